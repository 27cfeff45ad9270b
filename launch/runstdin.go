package launch

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
)

// The launcher's half of stdin forwarding (`pmixbus run --stdin`, as
// prterun): it reads Config.Stdin.Reader and delivers each piece to the
// agents of the target ranks (OpStdin), one request per agent at a time,
// and reads on only once every agent took it. An agent whose rank does not
// read answers PMIX_ERR_IOF_XOFF after StdinHold and the launcher sends the
// same piece again: the launcher holds one piece, each agent one queue
// (stdin.go). A rank whose stdin closed (it ended) is dropped; once none is
// left, the launcher stops reading. The end of the reader is delivered as
// EOF.

// Stdin is what a run's ranks read as their standard input.
type Stdin struct {
	// Reader is read until EOF, which closes the targets' stdin. Nil: no
	// rank's stdin is forwarded, all read the null device. A Reader
	// blocked in Read when the run ends is left to return by itself: the
	// goroutine reading it ends then.
	Reader io.Reader
	// Rank is the rank of the run's first job that reads it (prterun's
	// default is 0), or pmix.RankWildcard for every rank of every job.
	Rank pmix.Rank
}

// ParseStdinTarget parses `--stdin`: a rank, "all" (pmix.RankWildcard), or
// "none" (none true).
//
// Errors: pmix.ErrBadParam for anything else.
func ParseStdinTarget(s string) (rank pmix.Rank, none bool, err error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "all":
		return pmix.RankWildcard, false, nil
	case "none":
		return 0, true, nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
	if err != nil || !pmix.Rank(n).Valid() {
		return 0, false, pmix.Errorf(pmix.ErrBadParam, "--stdin %s: want a rank, all or none", pmix.Quote(s))
	}
	return pmix.Rank(n), false, nil
}

// stdinRank is SpawnRequest.Stdin: the rank of the job that reads the
// run's stdin, every rank (RankWildcard), or none (nil).
func (c *Config) stdinRank() *pmix.Rank {
	if c.Stdin.Reader == nil {
		return nil
	}
	r := c.Stdin.Rank
	return &r
}

// stdinDest is the target ranks of one job on one node.
type stdinDest struct {
	j     *runJob
	node  string
	ranks []pmix.Rank
}

// stdinDests lists the agents, and their ranks, that read the run's stdin.
func (r *Run) stdinDests() []*stdinDest {
	var out []*stdinDest
	target := r.cfg.stdinRank()
	if target == nil {
		return nil
	}
	for _, j := range r.jobs {
		byNode := map[string]*stdinDest{}
		for _, p := range r.places {
			if p.Cluster != j.cluster || (*target != pmix.RankWildcard && *target != p.Rank) {
				continue
			}
			d := byNode[p.Node]
			if d == nil {
				d = &stdinDest{j: j, node: p.Node}
				byNode[p.Node] = d
				out = append(out, d)
			}
			d.ranks = append(d.ranks, p.Rank)
		}
	}
	return out
}

type stdinPiece struct {
	data []byte
	err  error // io.EOF at the end
}

// pumpStdin delivers the run's stdin until its end, until every target
// rank's stdin closed, or until the run ends.
func (r *Run) pumpStdin(dests []*stdinDest) {
	defer r.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	pieces := make(chan stdinPiece)
	go readStdin(r.cfg.Stdin.Reader, pieces, ctx.Done()) // not waited for: see Stdin.Reader
	writer := "launcher " + r.cfg.Launcher
	var offset int64
	for len(dests) > 0 {
		var p stdinPiece
		select {
		case p = <-pieces:
		case <-ctx.Done():
			return
		}
		eof := p.err != nil
		if eof && !errors.Is(p.err, io.EOF) {
			r.log.Warn("reading stdin failed; closing the ranks' stdin", "err", p.err)
		}
		dests = r.sendStdin(ctx, dests, StdinRequest{Writer: writer, Offset: offset, Data: p.data, EOF: eof})
		offset += int64(len(p.data))
		if eof {
			return
		}
	}
}

// readStdin reads rd into pieces of at most MaxStdinData bytes until its
// end or an error, which it passes on last.
func readStdin(rd io.Reader, out chan<- stdinPiece, stop <-chan struct{}) {
	for {
		buf := make([]byte, MaxStdinData)
		n, err := rd.Read(buf)
		if n == 0 && err == nil {
			continue
		}
		select {
		case out <- stdinPiece{data: buf[:n], err: err}:
		case <-stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// sendStdin delivers one piece to every dest at once and returns the
// dests that still have ranks reading.
func (r *Run) sendStdin(ctx context.Context, dests []*stdinDest, req StdinRequest) []*stdinDest {
	var wg sync.WaitGroup
	for _, d := range dests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := req
			req.Nspace, req.Ranks = d.j.nspace, d.ranks
			d.ranks = r.deliverTo(ctx, d, req)
		}()
	}
	wg.Wait()
	return slices.DeleteFunc(dests, func(d *stdinDest) bool { return len(d.ranks) == 0 })
}

// deliverTo sends req to d's agent until it takes it, and returns d's
// ranks still reading.
func (r *Run) deliverTo(ctx context.Context, d *stdinDest, req StdinRequest) []pmix.Rank {
	reply, err := DeliverStdin(ctx, r.cfg.Conn, d.j.cluster, d.node, req)
	switch {
	case err == nil:
		return Reading(reply)
	case errors.Is(err, ErrUnknownJob) || ctx.Err() != nil:
		// Its ranks there have all ended, or the run has.
	default:
		r.log.Warn("forwarding stdin failed; the node's ranks get no more of it", "nspace", d.j.nspace, "node", d.node, "err", err)
	}
	return nil
}

// Reading are the ranks of a reply that still read their stdin: held, and
// not closed.
func Reading(reply StdinReply) []pmix.Rank {
	return slices.DeleteFunc(slices.Clone(reply.Held), func(r pmix.Rank) bool { return slices.Contains(reply.Closed, r) })
}

// DeliverStdin sends req to node's agent of cluster c until it takes it:
// again while the agent answers ErrStdinFull (the hold there paces it),
// the same offset each time, so nothing is queued twice.
//
// Errors: those of Control and of Daemon.Stdin, but ErrStdinFull;
// ctx.Err().
func DeliverStdin(ctx context.Context, nc *nats.Conn, c cluster.ID, node string, req StdinRequest) (StdinReply, error) {
	for {
		var reply StdinReply
		rctx, cancel := context.WithTimeout(ctx, deliverStdinTimeout)
		err := Control(rctx, nc, c, node, OpStdin, req, &reply)
		cancel()
		if !errors.Is(err, ErrStdinFull) {
			return reply, err
		}
		if ctx.Err() != nil {
			return reply, ctx.Err()
		}
	}
}

// deliverStdinTimeout bounds one OpStdin request: the agent's hold and
// then some.
const deliverStdinTimeout = StdinHold + 10*time.Second
