package launch

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// The direct output path. A launcher on the node of an agent that runs
// ranks of its job attaches to that agent's socket (an output-attach
// frame with the job's output token, which only the launcher and the
// job's agents know: it travels in the spawn request), and the agent
// sends it the records of the job's local ranks as it numbers them, before
// they are stored (iof.Service.Tap). The stream and the subscription
// carry every record as before: the launcher shows each record from
// whichever path brings it first, and the sequences drop the other copy
// (output.go). A record the direct path misses — it was made before the
// launcher attached, the agent dropped a launcher that did not read — is
// still brought by the subscription, or by a repair from the stream.

// maxDirectFrame bounds a frame the launcher reads on a direct path: a
// record of iof.MaxRecord bytes and its few fields.
const maxDirectFrame = iof.MaxRecord + 4<<10

// directDial bounds the launcher's connect and attach to an agent.
const directDial = 2 * time.Second

// CheckOutputToken reports whether token is the output token of a job
// with ranks on this node: a launcher attaching for the job's output
// (the agent's socket, proto.TypeOutputAttach).
//
// Errors: pmix.ErrNotFound for a job not running here, or one launched
// without a token; pmix.ErrInvalidCred for another token.
func (d *Daemon) CheckOutputToken(nspace, token string) error {
	d.mu.Lock()
	j := d.jobs[nspace]
	var want string
	if j != nil {
		want = j.req.OutputToken
	}
	d.mu.Unlock()
	if want == "" {
		return pmix.Errorf(pmix.ErrNotFound, "no job %s with a direct output path on node %s", pmix.Quote(nspace), d.cfg.Node)
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(want)) != 1 {
		return pmix.Errorf(pmix.ErrInvalidCred, "the output token for job %s is not the one its launcher gave", pmix.Quote(nspace))
	}
	return nil
}

// newOutputToken is a fresh job's output token.
func newOutputToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// directPath is the launcher's attachment to one agent.
type directPath struct {
	j    *runJob
	node string
	addr string // the agent's socket, "unix:/path"
	c    net.Conn
	// gone is closed when the run closes the path (closeDirect).
	gone     chan struct{}
	goneOnce sync.Once
}

// close ends the path.
func (p *directPath) close() {
	p.goneOnce.Do(func() { close(p.gone) })
	_ = p.c.Close()
}

// dialDirect attaches to node's agent for the job's output, when the
// agent listens on a Unix socket (a node of this machine; another
// machine's path refuses the connect, or its agent the token). It returns
// nil when there is no direct path.
func (r *Run) dialDirect(j *runJob, node string) error {
	addr := j.listen[node]
	path, ok := strings.CutPrefix(addr, "unix:")
	if !ok || r.outputToken == "" {
		return nil
	}
	c, err := net.DialTimeout("unix", path, directDial)
	if err != nil {
		return nil // not on this machine, or the agent is gone
	}
	_ = c.SetDeadline(time.Now().Add(directDial))
	if err := proto.WriteFrame(c, &proto.Frame{Type: proto.TypeOutputAttach, Seq: 1, Nspace: j.nspace, Credential: r.outputToken}); err != nil {
		_ = c.Close()
		return fmt.Errorf("attaching to the agent of node %s for the job's output: %w", node, err)
	}
	rep, err := proto.ReadFrame(c, proto.MaxHelloFrame)
	if err == nil && (rep.Type != proto.TypeReply || rep.Seq != 1) {
		err = fmt.Errorf("a %v frame, not the reply to output-attach", rep.Type)
	} else if err == nil && rep.Status != pmix.Success {
		err = rep.Err()
	}
	if err != nil {
		_ = c.Close()
		return fmt.Errorf("attaching to the agent of node %s for the job's output: %w", node, err)
	}
	_ = c.SetDeadline(time.Time{})
	p := &directPath{j: j, node: node, addr: addr, c: c, gone: make(chan struct{})}
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		_ = c.Close()
		return nil
	}
	r.direct[cluster.Qualify(j.cluster, node)] = p
	r.mu.Unlock()
	r.wg.Add(1)
	go r.readDirect(p)
	return nil
}

// readDirect hands what the agent sends to the follow loop until the
// path closes. A frame that is not a valid record of a rank of the job on
// that node ends the path: the agent is not to be trusted further.
func (r *Run) readDirect(p *directPath) {
	defer r.wg.Done()
	defer func() {
		_ = p.c.Close()
		r.mu.Lock()
		if r.direct[cluster.Qualify(p.j.cluster, p.node)] == p {
			delete(r.direct, cluster.Qualify(p.j.cluster, p.node))
		}
		r.mu.Unlock()
	}()
	rd := proto.NewReader(p.c, maxDirectFrame)
	for first := true; ; first = false {
		f, err := rd.ReadFrame()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
				r.log.Warn("the direct output path from an agent broke", "node", p.node, "err", err)
			}
			return
		}
		rec, err := r.directRecord(p, f)
		if err != nil {
			r.log.Warn("dropping the direct output path from an agent", "node", p.node, "err", err)
			return
		}
		if first {
			select {
			case <-r.following: // no output is handled before Config.Started
			case <-r.stop:
				return
			case <-p.gone: // the launch failed
				return
			}
		}
		// Handled here rather than by the follow loop: one goroutine's
		// wake less between the agent's write and the launcher's.
		r.outMu.Lock()
		if r.outDone {
			r.outMu.Unlock()
			return
		}
		r.record(incoming{Delivered: iof.Delivered{Parsed: iof.Parsed{Record: rec}}, direct: true})
		r.mu.Lock()
		ended := r.left == 0
		r.mu.Unlock()
		r.outMu.Unlock()
		if ended {
			select {
			case r.kick <- struct{}{}:
			default:
			}
		}
	}
}

// directRecord checks a frame of a direct path and makes it a record.
//
// Errors: pmix.ErrBadParam, saying what is wrong.
func (r *Run) directRecord(p *directPath, f *proto.Frame) (iof.Record, error) {
	bad := func(format string, args ...any) (iof.Record, error) {
		return iof.Record{}, pmix.Errorf(pmix.ErrBadParam, "direct output: "+format, args...)
	}
	if f.Type != proto.TypeIOFData || f.ID != 0 {
		return bad("a %v frame (id %d), want iof-data", f.Type, f.ID)
	}
	src := f.Source
	if src.Nspace != p.j.nspace || int64(src.Rank) >= int64(len(r.places)) || !r.places[src.Rank].local(p.j.cluster, p.node) {
		return bad("a record of %v, not of a rank of job %s on node %s", src, p.j.nspace, p.node)
	}
	ch := iof.Channel(f.Channels)
	if ch != iof.STDOUT && ch != iof.STDERR && ch != iof.STDDIAG {
		return bad("channel %#x", f.Channels)
	}
	if f.Seq == 0 || len(f.Payload) > iof.MaxRecord {
		return bad("record %d of %d bytes", f.Seq, len(f.Payload))
	}
	rec := iof.Record{Cluster: string(p.j.cluster), Nspace: src.Nspace, Rank: src.Rank, Channel: ch, Seq: f.Seq, Data: f.Payload}
	var file, topic string
	for _, in := range f.Info {
		var ok bool
		switch in.Key {
		case pmix.KeyIOFTime:
			rec.Time, ok = in.Value.Time()
		case pmix.KeyIOFComplete:
			rec.Complete, ok = in.Value.Bool()
		case pmix.KeyLogKey:
			file, ok = in.Value.Str()
		case pmix.KeyLogVal:
			topic, ok = in.Value.Str()
		default:
			ok = true // room to grow
		}
		if !ok {
			return bad("%s of type %v", in.Key, in.Value.Type())
		}
	}
	if file != "" || topic != "" {
		if ch != iof.STDDIAG || file == "" {
			return bad("a help message %q / %q on %v", file, topic, ch)
		}
		rec.Help = &iof.Help{File: file, Topic: topic}
	}
	return rec, nil
}

// closeDirect ends every direct path; no other is made after.
func (r *Run) closeDirect() {
	r.mu.Lock()
	r.stopping = true
	paths := make([]*directPath, 0, len(r.direct))
	for _, p := range r.direct {
		paths = append(paths, p)
	}
	r.mu.Unlock()
	for _, p := range paths {
		p.close()
	}
}

// redialDirect, at each poll: a node of this machine whose direct path
// closed (the agent dropped a launcher that fell behind) is attached to
// again while it runs ranks of the job. What was sent meanwhile comes
// from the subscription.
func (r *Run) redialDirect() {
	if r.outputToken == "" {
		return
	}
	for _, j := range r.jobs {
		for _, node := range j.nodes {
			if !strings.HasPrefix(j.listen[node], "unix:") {
				continue
			}
			r.mu.Lock()
			_, up := r.direct[cluster.Qualify(j.cluster, node)]
			running := false
			for rk, p := range r.places {
				if _, ended := r.ends[pmix.Rank(rk)]; !ended && p.local(j.cluster, node) {
					running = true
					break
				}
			}
			r.mu.Unlock()
			if !up && running {
				if err := r.dialDirect(j, node); err != nil {
					r.log.Debug("no direct output path", "node", node, "err", err)
				}
			}
		}
	}
}

// DirectRecords is how many records of the job the run showed as a direct
// path brought them, ahead of NATS.
func (r *Run) DirectRecords() int64 { return r.directShown.Load() }

// DirectNodes are the nodes (cluster:node) whose agents hand the job's
// output to this launcher directly now, sorted.
func (r *Run) DirectNodes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.direct))
}
