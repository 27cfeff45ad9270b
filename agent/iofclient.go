package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// PMIx_IOF_push and PMIx_IOF_pull for the agent's clients
// (docs/iof.md, docs/protocol.md).
//
// A push goes the way the launcher's stdin goes: the agent sends the data
// to the agents of the targets (launch.DeliverStdin, the stdin control op)
// in pieces of launch.MaxStdinData, waiting while a target's queue is full,
// and replies once every target's agent queued it, so the client is paced
// by the slowest target. A connection's pushes run one at a time, and
// number their bytes, so a piece sent again is queued once.
//
// A pull is an ordered consumer per job on the job's output stream
// (iof.Follow), from the first record: a late puller sees the output from
// the start, each record once, in order per process; the records of the
// procs and channels asked for are sent as iof-data frames. Deregister and
// the end of the connection stop them. A pull is paced by the client: the
// consumer waits while half the client's queue limit is queued for it, so
// a client that reads slowly is not cut off for the output it asked for.

// maxIOFProcs bounds the procs of one push or pull.
const maxIOFProcs = 1 << 16

// iofClients is the IOF state of the agent's connections.
type iofClients struct {
	mu    sync.Mutex
	next  uint64 // numbers the connections' push writers
	conns map[*clientConn]*iofConn
}

type iofConn struct {
	ctx    context.Context // ends when the client detaches
	cancel context.CancelFunc
	writer string

	push   sync.Mutex // one push at a time, in offset order
	pushed int64      // bytes pushed, the next push's offset

	pulls map[uint64][]*iof.Follower // guarded by iofClients.mu
}

// iofConn returns cc's IOF state, made on first use.
func (a *Agent) iofConn(cc *clientConn, e *clientEntry) (*iofConn, error) {
	c := &a.iofc
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, _, ok := cc.attached(); !ok {
		return nil, pmix.NewError(pmix.ErrLostConnectionToClient, "client detached")
	}
	if st := c.conns[cc]; st != nil {
		return st, nil
	}
	if c.conns == nil {
		c.conns = map[*clientConn]*iofConn{}
	}
	c.next++
	ctx, cancel := context.WithCancel(a.ctx)
	st := &iofConn{ctx: ctx, cancel: cancel, pulls: map[uint64][]*iof.Follower{},
		writer: fmt.Sprintf("client %v of node %s #%d", e.proc, a.cfg.Node, c.next)}
	c.conns[cc] = st
	return st, nil
}

// iofDetached stops a client's pulls and pushes.
func (a *Agent) iofDetached(cc *clientConn) {
	a.iofc.mu.Lock()
	st := a.iofc.conns[cc]
	delete(a.iofc.conns, cc)
	a.iofc.mu.Unlock()
	if st == nil {
		return
	}
	st.cancel()
	for _, fs := range st.pulls {
		stopAll(fs)
	}
}

func stopAll(fs []*iof.Follower) {
	for _, f := range fs {
		f.Stop()
	}
}

// iofRequest serves an iof-push, iof-pull or iof-deregister frame.
func (cc *clientConn) iofRequest(f *proto.Frame) {
	e, _, ok := cc.attached()
	if !ok {
		cc.reply(f, pmix.NewError(pmix.ErrLostConnectionToClient, "client detached"), nil)
		return
	}
	st, err := cc.a.iofConn(cc, e)
	if err != nil {
		cc.reply(f, err, nil)
		return
	}
	switch f.Type {
	case proto.TypeIOFPull:
		cc.reply(f, cc.iofPull(st, f), func(r *proto.Frame) { r.ID = f.ID })
	case proto.TypeIOFDeregister:
		cc.reply(f, cc.a.iofDeregister(st, f.ID), nil)
	case proto.TypeIOFPush:
		// It waits for the targets' agents: not on the dispatch goroutine.
		push := func() {
			r := &proto.Frame{Type: proto.TypeReply, Seq: f.Seq}
			r.SetErr(cc.a.iofPush(st, f))
			_ = cc.write(r) // not cc.reply: see publishLookup
		}
		if !cc.a.goFunc(push) {
			cc.reply(f, ErrClosed, nil)
		}
	}
}

// iofTarget is the procs of one job a push or pull names.
type iofTarget struct {
	cluster cluster.ID
	nspace  string
	ranks   []pmix.Rank // pmix.RankWildcard: all
}

func (t iofTarget) all() bool { return slices.Contains(t.ranks, pmix.RankWildcard) }

// iofTargets groups procs by job, checked: they come from a client.
func (a *Agent) iofTargets(procs []pmix.Proc) ([]iofTarget, error) {
	if len(procs) == 0 || len(procs) > maxIOFProcs {
		return nil, pmix.Errorf(pmix.ErrBadParam, "%d procs: want 1 to %d", len(procs), maxIOFProcs)
	}
	var out []iofTarget
	for _, p := range procs {
		cid, ns, qualified := cluster.Split(p.Nspace)
		if !qualified {
			cid = a.cfg.Cluster
		}
		if err := cid.Validate(); err != nil {
			return nil, err
		}
		if ns == "" || len(ns) > pmix.MaxNspaceLen {
			return nil, pmix.Errorf(pmix.ErrBadParam, "proc %v: nspace of %d bytes, want 1 to %d", p, len(ns), pmix.MaxNspaceLen)
		}
		if !p.Rank.Valid() && p.Rank != pmix.RankWildcard {
			return nil, pmix.Errorf(pmix.ErrBadParam, "proc %v: not a process's rank or PMIX_RANK_WILDCARD", p)
		}
		i := slices.IndexFunc(out, func(t iofTarget) bool { return t.cluster == cid && t.nspace == ns })
		if i < 0 {
			out = append(out, iofTarget{cluster: cid, nspace: ns})
			i = len(out) - 1
		}
		if !slices.Contains(out[i].ranks, p.Rank) {
			out[i].ranks = append(out[i].ranks, p.Rank)
		}
	}
	return out, nil
}

// iofPush serves PMIx_IOF_push.
//
// Errors: pmix.ErrBadParam for a bad frame; pmix.ErrNotFound for a job or
// rank that does not run; launch.ErrNoStdin for a target whose stdin is
// not forwarded; pmix.ErrIOFComplete when every target's stdin is closed;
// the errors of launch.DeliverStdin.
func (a *Agent) iofPush(st *iofConn, f *proto.Frame) error {
	eof := pmix.Flag(f.Info, pmix.KeyIOFComplete)
	if len(f.Payload) > proto.MaxIOFPush {
		return pmix.Errorf(pmix.ErrBadParam, "IOF push of %d bytes: at most %d", len(f.Payload), proto.MaxIOFPush)
	}
	targets, err := a.iofTargets(f.Procs)
	if err != nil {
		return err
	}
	if len(f.Payload) == 0 && !eof {
		return nil
	}
	st.push.Lock()
	defer st.push.Unlock()
	for _, t := range targets {
		if err := a.pushTo(st, t, f.Payload, eof); err != nil {
			return err
		}
	}
	st.pushed += int64(len(f.Payload))
	return nil
}

// pushTo delivers data to one job's targets, piece by piece.
func (a *Agent) pushTo(st *iofConn, t iofTarget, data []byte, eof bool) error {
	nodes, err := a.stdinNodes(st.ctx, t)
	if err != nil {
		return err
	}
	reading := map[string][]pmix.Rank{} // by node, once the first piece told
	first := true
	for off := 0; first || off < len(data); {
		n := min(len(data)-off, launch.MaxStdinData)
		req := launch.StdinRequest{Nspace: t.nspace, Ranks: t.ranks, Writer: st.writer, Offset: st.pushed + int64(off),
			Data: data[off : off+n], EOF: eof && off+n == len(data)}
		held, err := a.deliverPiece(st.ctx, t, nodes, req, reading)
		if err != nil {
			return err
		}
		if first {
			if missing := missingRanks(t, held); len(missing) > 0 {
				return pmix.Errorf(pmix.ErrNotFound, "job %s of cluster %s runs no rank %s", t.nspace, t.cluster, launch.FormatRanks(missing))
			}
			if len(data) > 0 && len(held) == 0 {
				return fmt.Errorf("%w: no rank of job %s has its stdin forwarded", launch.ErrNoStdin, t.nspace)
			}
			if len(data) > 0 && len(reading) == 0 {
				return pmix.Errorf(pmix.ErrIOFComplete, "the stdin of every target of job %s is closed (they ended, or were sent EOF)", t.nspace)
			}
			nodes, first = slices.Collect(maps.Keys(reading)), false
		}
		off += n
		if len(nodes) == 0 {
			return nil
		}
	}
	return nil
}

// deliverPiece sends one piece to every node at once; it returns the
// ranks the nodes hold and updates reading with those still reading.
func (a *Agent) deliverPiece(ctx context.Context, t iofTarget, nodes []string, req launch.StdinRequest, reading map[string][]pmix.Rank) ([]pmix.Rank, error) {
	type result struct {
		node  string
		reply launch.StdinReply
		err   error
	}
	results := make([]result, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reply, err := launch.DeliverStdin(ctx, a.nc, t.cluster, node, req)
			results[i] = result{node, reply, err}
		}()
	}
	wg.Wait()
	var held []pmix.Rank
	for _, r := range results {
		switch {
		case errors.Is(r.err, launch.ErrUnknownJob):
			delete(reading, r.node) // its ranks there have all ended
		case r.err != nil:
			return nil, r.err
		default:
			held = append(held, r.reply.Held...)
			if rs := launch.Reading(r.reply); len(rs) > 0 {
				reading[r.node] = rs
			} else {
				delete(reading, r.node)
			}
		}
	}
	return held, nil
}

// missingRanks are the ranks t names that no node held.
func missingRanks(t iofTarget, held []pmix.Rank) []pmix.Rank {
	if t.all() {
		return nil
	}
	return slices.DeleteFunc(slices.Clone(t.ranks), func(r pmix.Rank) bool { return slices.Contains(held, r) })
}

// stdinNodes are the nodes that run t's ranks: from the job map when the
// job has ranks here, else every node of the job (its key in the jobs
// bucket).
func (a *Agent) stdinNodes(ctx context.Context, t iofTarget) ([]string, error) {
	if t.cluster == a.cfg.Cluster {
		if m := a.jobRanks(t.nspace); m != nil {
			var nodes []string
			for r, node := range m {
				if (t.all() || slices.Contains(t.ranks, r)) && !slices.Contains(nodes, node) {
					nodes = append(nodes, node)
				}
			}
			if len(nodes) == 0 {
				return nil, pmix.Errorf(pmix.ErrNotFound, "job %s runs no rank %s", t.nspace, launch.FormatRanks(t.ranks))
			}
			return nodes, nil
		}
	}
	return launch.JobNodes(ctx, a.nc, t.cluster, t.nspace)
}

// iofPull serves PMIx_IOF_pull: f.ID is the client's id for it.
//
// Errors: pmix.ErrBadParam for no channel, STDIN, a bad proc, or an id
// in use; pmix.ErrUnreach when a job's output stream does not answer.
func (cc *clientConn) iofPull(st *iofConn, f *proto.Frame) error {
	a := cc.a
	channels := iof.Channel(f.Channels)
	if channels&iof.STDIN != 0 {
		return pmix.Errorf(pmix.ErrBadParam, "IOF pull of stdin: only stdout, stderr and stddiag can be pulled")
	}
	channels &= iof.STDOUT | iof.STDERR | iof.STDDIAG
	if channels == 0 {
		return pmix.Errorf(pmix.ErrBadParam, "IOF pull of no channel (channels %#x)", f.Channels)
	}
	targets, err := a.iofTargets(f.Procs)
	if err != nil {
		return err
	}
	a.iofc.mu.Lock()
	_, dup := st.pulls[f.ID]
	a.iofc.mu.Unlock()
	if dup || f.ID == 0 {
		return pmix.Errorf(pmix.ErrBadParam, "IOF pull id %d is in use or zero", f.ID)
	}
	var fs []*iof.Follower
	for _, t := range targets {
		source := t.nspace
		if t.cluster != a.cfg.Cluster {
			source = cluster.Qualify(t.cluster, t.nspace)
		}
		bad := func(err error) { cc.logger().Debug("skipping a record of the output stream", "err", err) }
		fl, err := iof.Follow(st.ctx, a.nc, string(t.cluster), t.nspace, iof.FollowOptions{Bad: bad}, func(d iof.Delivered) {
			rec := d.Record
			if d.Job != "" || rec.Channel&channels == 0 || (!t.all() && !slices.Contains(t.ranks, rec.Rank)) {
				return
			}
			// Paced by the client: the consumer waits, not the client's queue.
			if !cc.w.waitBelow(a.cfg.ClientQueueLimit/2, st.ctx.Done()) {
				return
			}
			_ = cc.write(recordFrame(f.ID, source, rec, false))
		})
		if err != nil {
			stopAll(fs)
			return err
		}
		fs = append(fs, fl)
	}
	a.iofc.mu.Lock()
	defer a.iofc.mu.Unlock()
	if a.iofc.conns[cc] != st { // detached meanwhile
		stopAll(fs)
		return pmix.NewError(pmix.ErrLostConnectionToClient, "client detached")
	}
	st.pulls[f.ID] = fs
	return nil
}

// iofDeregister ends a pull.
//
// Errors: pmix.ErrNotFound for an id not pulling.
func (a *Agent) iofDeregister(st *iofConn, id uint64) error {
	a.iofc.mu.Lock()
	fs, ok := st.pulls[id]
	delete(st.pulls, id)
	a.iofc.mu.Unlock()
	if !ok {
		return pmix.Errorf(pmix.ErrNotFound, "no IOF pull %d", id)
	}
	stopAll(fs)
	return nil
}
