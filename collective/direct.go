package collective

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// DirectSubject is where an agent asks for the committed data of one proc
// it does not host ("direct modex"): the agent hosting the proc subscribes
// once the proc first committed.
func DirectSubject(proc pmix.Proc) string {
	id, ns, _ := cluster.Split(proc.Nspace)
	return Prefix + ".get." + subjects.ClusterToken(string(id)) + "." + subjects.EscapeToken(ns) + "." +
		strconv.FormatUint(uint64(proc.Rank), 10)
}

// directRequest asks for a proc's data: [1, key: str, wait: uint (ms)]. The
// answer is [status: int, code: str, message: str, data: [ProcData]], the
// proc's REMOTE and GLOBAL values once key is among them (or wait passed).
type directRequest struct {
	key  string
	wait time.Duration
}

func (r directRequest) marshal() ([]byte, error) {
	w := newEnc()
	w.arr(3)
	w.uint(wireVersion)
	w.str(r.key)
	w.uint(uint64(r.wait / time.Millisecond))
	return w.bytes()
}

func unmarshalDirectRequest(b []byte) (directRequest, error) {
	var r directRequest
	err := decode(b, "direct request", func(d *dec) {
		d.arr(3, "direct request")
		d.version()
		r.key = d.str("key")
		r.wait = time.Duration(d.uint(math.MaxInt64/uint64(time.Millisecond), "wait")) * time.Millisecond
	})
	return r, err
}

type directAnswer struct {
	outcome
	data []procData
}

func (a directAnswer) marshal() ([]byte, error) {
	w := newEnc()
	w.arr(4)
	w.int(int64(a.status))
	w.str(a.code)
	w.str(a.message)
	w.data(a.data)
	return w.bytes()
}

func unmarshalDirectAnswer(b []byte) (directAnswer, error) {
	var a directAnswer
	err := decode(b, "direct answer", func(d *dec) {
		d.arr(4, "direct answer")
		a.status = d.status("status")
		a.code = d.str("code")
		a.message = d.str("message")
		a.data = d.data()
	})
	return a, err
}

// serveDirectLocked makes proc's data answerable to other agents, once.
func (s *Service) serveDirectLocked(proc pmix.Proc) {
	if s.closed || s.direct[proc] != nil {
		return
	}
	sub, err := s.cfg.Conn.Subscribe(DirectSubject(proc), func(m *nats.Msg) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.goFuncLocked(func() { s.answerDirect(proc, m) })
	})
	if err != nil {
		s.log.Warn("collective: other agents will not fetch this proc's data", "proc", proc.String(), "err", err)
		return
	}
	s.direct[proc] = sub
}

// answerDirect answers another agent's request for proc's data, waiting
// for the key as long as the request says: with the proc's REMOTE and
// GLOBAL data once the key is among them or the wait passed, or with
// ErrNotFound when the proc committed the key with a LOCAL scope, or
// ErrPeerTerminated when it ended without committing it.
func (s *Service) answerDirect(proc pmix.Proc, m *nats.Msg) {
	var a directAnswer
	r, err := unmarshalDirectRequest(m.Data)
	if err == nil && r.wait > 0 {
		ctx, cancel := context.WithTimeout(s.ctx, r.wait)
		// "" and "" as the reader's place: another node, where REMOTE and
		// GLOBAL values are visible.
		_, err = s.await(ctx, proc, r.key, "", "")
		cancel()
		if !errors.Is(err, pmix.ErrNotFound) {
			err = nil // answer with what there is
		}
	}
	if err != nil {
		a.outcome = outcomeOf(err)
	} else if d, ok := s.kv.shared(proc); ok {
		a.data = []procData{d}
	}
	b, err := a.marshal()
	if err == nil {
		err = m.Respond(b)
	}
	if err != nil {
		s.log.Debug("collective: answering a direct request", "proc", proc.String(), "err", err)
	}
}

// directWait bounds one direct request's wait at the proc's agent: a Get
// that waits longer asks again, so that it learns soon of an agent lost
// while it waited.
const directWait = 5 * time.Second

// await waits until proc's key is visible to a reader on (cluster, node),
// or ctx ends. A key the proc committed with a scope the reader is
// outside of is ErrNotFound at once; a proc that terminated, or whose job
// ended, without committing it ErrPeerTerminated.
//
// Errors: those; ctx.Err(); ErrClosed.
func (s *Service) await(ctx context.Context, proc pmix.Proc, key, cluster, node string) (pmix.Value, error) {
	for {
		v, changed, err := s.lookup(proc, key, cluster, node)
		if v != nil || err != nil {
			return deref(v), err
		}
		ends, err := s.ended(proc)
		if err != nil {
			return pmix.Value{}, err
		}
		select {
		case <-changed:
		case <-ends.Done():
		case <-ctx.Done():
			return pmix.Value{}, ctx.Err()
		}
	}
}

// fetch waits for the key of a proc of another agent, asking that agent
// for the proc's data until the key is there (see await).
func (s *Service) fetch(ctx context.Context, proc pmix.Proc, key string) (pmix.Value, error) {
	// Lost with its node, the proc is announced by the agents that
	// declared the node down, not by its own.
	s.mu.Lock()
	s.watchGoneLocked(proc.Nspace, true)
	s.mu.Unlock()
	for {
		v, _, err := s.lookup(proc, key, string(s.cfg.Cluster), s.cfg.Node)
		if v != nil || err != nil {
			return deref(v), err
		}
		ends, err := s.ended(proc)
		if err != nil {
			return pmix.Value{}, err
		}
		if err := s.ask(ctx, ends, proc, key); err != nil {
			return pmix.Value{}, err
		}
	}
}

// lookup returns proc's value of key if a reader on (cluster, node) sees
// it, ErrNotFound if it is outside the value's scope, and otherwise a
// channel closed at the store's next change.
func (s *Service) lookup(proc pmix.Proc, key, cluster, node string) (*pmix.Value, <-chan struct{}, error) {
	v, found, visible, changed := s.kv.get(proc, key, cluster, node)
	switch {
	case found && visible:
		return &v, nil, nil
	case found:
		return nil, nil, fmt.Errorf("%w: %v put %s with a scope the reader is outside of", ErrNotFound, proc, pmix.Quote(key))
	}
	return nil, changed, nil
}

func deref(v *pmix.Value) pmix.Value {
	if v == nil {
		return pmix.Value{}
	}
	return *v
}

// ended returns ErrPeerTerminated if proc terminated or its job ended,
// ErrClosed if the service closed, and otherwise a context that ends at
// the next such news.
func (s *Service) ended(proc pmix.Proc) (context.Context, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if _, ok := s.jobsEnded[proc.Nspace]; ok {
		return nil, fmt.Errorf("%w: %v: its job ended", ErrPeerTerminated, proc)
	}
	if dp, ok := s.dead[proc]; ok {
		return nil, fmt.Errorf("%w: %v %s without committing it", ErrPeerTerminated, proc, dp.notice.how())
	}
	return s.ends, nil
}

// endsLocked wakes the waiting gets: a process terminated or a job ended.
func (s *Service) endsLocked() {
	s.endNews()
	s.ends, s.endNews = context.WithCancel(s.ctx)
}

// ask sends one direct request for proc's data and stores the answer. It
// returns nil to be called again: the answer came without the key, no
// agent answered yet (the proc has not committed anything), or ends
// ended.
func (s *Service) ask(ctx, ends context.Context, proc pmix.Proc, key string) error {
	wait := directWait
	if dl, ok := ctx.Deadline(); ok {
		wait = max(min(wait, time.Until(dl)), time.Millisecond)
	}
	b, err := directRequest{key: key, wait: wait}.marshal()
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, wait+s.cfg.AckWait)
	defer cancel()
	defer context.AfterFunc(ends, cancel)()
	m, err := s.cfg.Conn.RequestWithContext(rctx, DirectSubject(proc), b)
	switch {
	case err == nil:
		a, err := unmarshalDirectAnswer(m.Data)
		if err != nil {
			return err
		}
		if err := a.err(); err != nil {
			return err
		}
		for _, d := range a.data {
			s.kv.add(d)
		}
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case ends.Err() != nil:
		return nil
	case errors.Is(err, nats.ErrNoResponders):
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ends.Done():
		case <-time.After(s.cfg.Retry):
		}
		return nil
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return nil
	}
	return pmix.Errorf(pmix.ErrUnreach, "asking for the data of %v: %w", proc, err)
}
