package launch

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/pmix"
)

// The agent's half of stdin forwarding. A rank whose stdin is forwarded
// (SpawnRequest.Stdin) reads a pipe; the daemon queues what OpStdin
// requests bring for it and a goroutine per rank writes the queue to the
// pipe. The queue is bounded, as PRRTE bounds its input buffers: a request
// that does not fit waits up to StdinHold for room, then is refused with
// ErrStdinFull (PMIX_ERR_IOF_XOFF) and nothing of it is queued, so a rank
// that never reads its input makes neither the agent nor the writer hold
// more than a queue and a request. When the rank ends, stops reading
// (EPIPE) or is sent EOF, its pipe closes, its queue is dropped and the
// replies name it Closed.

// Stdin flow control.
const (
	// StdinBuffer and StdinBuffers are PRRTE's (PRTE_IOF_BASE_MSG_MAX,
	// PRTE_IOF_MAX_INPUT_BUFFERS): an agent queues at most
	// StdinBuffers×StdinBuffer bytes for one rank.
	StdinBuffer  = 4 << 10
	StdinBuffers = 50
	// MaxStdinData bounds the data of one request: 16 buffers.
	MaxStdinData = 16 * StdinBuffer
	// StdinHold is how long an agent holds a request whose data does not
	// fit before it answers ErrStdinFull; a writer's request timeout must
	// exceed it.
	StdinHold = 2 * time.Second
	// maxStdinWriters bounds the writers whose offsets a rank's pipe
	// remembers; the least recent is forgotten (its next request is then
	// taken as it comes).
	maxStdinWriters = 16
	maxWriterName   = 256
	stdinCapacity   = StdinBuffers * StdinBuffer
)

// stdinPipe is one rank's forwarded stdin: the write end of its pipe and
// the queue of what was delivered and not yet written.
type stdinPipe struct {
	w io.WriteCloser

	mu      sync.Mutex
	queue   [][]byte
	queued  int
	eof     bool // write what is queued, then close
	closed  bool // nothing more is taken
	writers map[string]int64
	order   []string      // writers, least recent first
	space   chan struct{} // closed, and replaced, when the queue shrinks or the pipe closes
	kick    chan struct{} // wakes the writing goroutine
}

// stdinFor reports whether rank r reads a forwarded stdin.
func (r *SpawnRequest) stdinFor(rank pmix.Rank) bool {
	return r.Stdin != nil && (*r.Stdin == pmix.RankWildcard || *r.Stdin == rank)
}

// forwardStdin starts writing lp's forwarded stdin, until the process ends
// or the daemon shuts down.
func (d *Daemon) forwardStdin(lp *localProc) *stdinPipe {
	s := &stdinPipe{w: lp.p.Stdin(), writers: map[string]int64{}, space: make(chan struct{}), kick: make(chan struct{}, 1)}
	if !d.goFunc(func() { s.run(lp.p.Done(), d.ctx.Done()) }) {
		s.shut()
	}
	return s
}

// run writes the queue to the pipe, one buffer at a time, and closes the
// pipe at EOF, when a write fails (the process no longer reads it), when
// the process ends or stop is closed.
func (s *stdinPipe) run(ended, stop <-chan struct{}) {
	defer s.shut()
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			eof := s.eof
			s.mu.Unlock()
			if eof {
				return
			}
			select {
			case <-s.kick:
			case <-ended:
				return
			case <-stop:
				return
			}
			continue
		}
		b := s.queue[0]
		s.mu.Unlock()
		// A process that does not read blocks this write; its end closes
		// the pipe (exec's Wait), which ends the write.
		_, err := s.w.Write(b)
		s.mu.Lock()
		if len(s.queue) > 0 {
			s.queue[0] = nil
			s.queue = s.queue[1:]
			s.queued -= len(b)
		}
		s.freedLocked()
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// shut closes the pipe and drops what is queued.
func (s *stdinPipe) shut() {
	s.mu.Lock()
	s.closed, s.queue, s.queued = true, nil, 0
	s.freedLocked()
	s.mu.Unlock()
	_ = s.w.Close()
}

func (s *stdinPipe) freedLocked() {
	close(s.space)
	s.space = make(chan struct{})
}

// fresh is the part of data at offset that writer has not delivered yet.
func (s *stdinPipe) fresh(writer string, offset int64, data []byte) []byte {
	next, known := s.writers[writer]
	if !known || next <= offset {
		return data
	}
	return data[min(next-offset, int64(len(data))):]
}

// take queues fresh data (cut into buffers) and notes the writer's
// offset. s.mu is held, and room was checked.
func (s *stdinPipe) takeLocked(writer string, offset int64, data []byte, eof bool) {
	fresh := s.fresh(writer, offset, data)
	for b := range slices.Chunk(fresh, StdinBuffer) {
		s.queue = append(s.queue, b)
		s.queued += len(b)
	}
	if _, known := s.writers[writer]; known {
		s.order = slices.DeleteFunc(s.order, func(w string) bool { return w == writer })
	} else if len(s.order) >= maxStdinWriters {
		delete(s.writers, s.order[0])
		s.order = s.order[1:]
	}
	s.order = append(s.order, writer)
	s.writers[writer] = max(s.writers[writer], offset+int64(len(data)))
	s.eof = s.eof || eof
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// stdinTarget is one rank a request delivers to.
type stdinTarget struct {
	rank pmix.Rank
	in   *stdinPipe
}

// answerStdin serves an OpStdin request.
func (d *Daemon) answerStdin(m *nats.Msg, job string) {
	var req StdinRequest
	reply := StdinReply{}
	err := decode(m.Data, &req)
	if err == nil {
		err = forJob(OpStdin, job, req)
	}
	if err == nil {
		reply, err = d.Stdin(d.ctx, req)
	}
	reply.Error = errorOf(err)
	respond(m, reply)
}

// Stdin delivers req to the stdin of its ranks on this node: queued for
// every rank at once, or for none.
//
// Errors: pmix.ErrBadParam for a malformed request; ErrUnknownJob when
// the node runs no rank of the job; ErrNoStdin for a rank named whose
// stdin is not forwarded; ErrStdinFull when a rank's queue had no room
// within StdinHold; ErrClosed at shutdown.
func (d *Daemon) Stdin(ctx context.Context, req StdinRequest) (StdinReply, error) {
	var reply StdinReply
	switch {
	case len(req.Data) > MaxStdinData:
		return reply, pmix.Errorf(pmix.ErrBadParam, "stdin request of %d bytes: at most %d", len(req.Data), MaxStdinData)
	case req.Writer == "" || len(req.Writer) > maxWriterName:
		return reply, pmix.Errorf(pmix.ErrBadParam, "stdin request: writer name of %d bytes, want 1 to %d", len(req.Writer), maxWriterName)
	case req.Offset < 0:
		return reply, pmix.Errorf(pmix.ErrBadParam, "stdin request: negative offset %d", req.Offset)
	case len(req.Ranks) == 0:
		return reply, pmix.Errorf(pmix.ErrBadParam, "stdin request for job %s names no rank", req.Nspace)
	}
	targets, err := d.stdinTargets(req)
	if err != nil {
		return reply, err
	}
	for _, t := range targets {
		reply.Held = append(reply.Held, t.rank)
	}
	hold := time.NewTimer(StdinHold)
	defer hold.Stop()
	for {
		closed, wait := deliverStdin(targets, req)
		if wait == nil {
			reply.Closed = closed
			return reply, nil
		}
		select {
		case <-wait:
		case <-hold.C:
			return reply, fmt.Errorf("%w: a rank of job %s on node %s has not read its input for %v", ErrStdinFull, req.Nspace, d.cfg.Node, StdinHold)
		case <-ctx.Done():
			return reply, ErrClosed
		}
	}
}

// stdinTargets are the ranks of req this node runs, by rank.
func (d *Daemon) stdinTargets(req StdinRequest) ([]stdinTarget, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	j, ok := d.jobs[req.Nspace]
	if !ok {
		return nil, fmt.Errorf("%w: %s on node %s", ErrUnknownJob, req.Nspace, d.cfg.Node)
	}
	var out []stdinTarget
	for _, r := range req.Ranks {
		if r == pmix.RankWildcard {
			for rank, lp := range j.procs {
				if lp.in != nil {
					out = append(out, stdinTarget{rank, lp.in})
				}
			}
			continue
		}
		lp, ok := j.procs[r]
		if !ok {
			continue
		}
		if lp.in == nil {
			return nil, fmt.Errorf("%w: rank %v of job %s reads the null device (stdin goes to the ranks run --stdin names)", ErrNoStdin, r, req.Nspace)
		}
		out = append(out, stdinTarget{r, lp.in})
	}
	slices.SortFunc(out, func(a, b stdinTarget) int { return cmp.Compare(a.rank, b.rank) })
	return slices.CompactFunc(out, func(a, b stdinTarget) bool { return a.rank == b.rank }), nil
}

// deliverStdin queues req's data for every open target, if all have room:
// it returns the closed targets, or, when one has no room, a channel
// closed once its queue shrinks (nothing was queued then). The pipes are
// locked in rank order, so two requests never queue in different orders.
func deliverStdin(targets []stdinTarget, req StdinRequest) (closed []pmix.Rank, wait <-chan struct{}) {
	for _, t := range targets {
		t.in.mu.Lock()
	}
	defer func() {
		for _, t := range targets {
			t.in.mu.Unlock()
		}
	}()
	for _, t := range targets {
		s := t.in
		if !s.closed && !s.eof && s.queued+len(s.fresh(req.Writer, req.Offset, req.Data)) > stdinCapacity {
			return nil, s.space
		}
	}
	for _, t := range targets {
		if t.in.closed || t.in.eof {
			closed = append(closed, t.rank)
			continue
		}
		t.in.takeLocked(req.Writer, req.Offset, req.Data, req.EOF)
	}
	return closed, nil
}
