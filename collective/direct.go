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
// for the key as long as the request says.
func (s *Service) answerDirect(proc pmix.Proc, m *nats.Msg) {
	var a directAnswer
	r, err := unmarshalDirectRequest(m.Data)
	if err == nil && r.wait > 0 {
		ctx, cancel := context.WithTimeout(s.ctx, r.wait)
		// "" and "" as the reader's place: another node, where REMOTE and
		// GLOBAL values are visible.
		_, _, err = s.kv.waitFor(ctx, proc, r.key, "", "")
		cancel()
		if err != nil {
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

// fetch asks the agent hosting proc for its data and stores it; it keeps
// asking until wait passed while no agent answers (the proc has not
// committed yet).
func (s *Service) fetch(ctx context.Context, proc pmix.Proc, key string, wait time.Duration) error {
	b, err := directRequest{key: key, wait: wait}.marshal()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(wait)
	for {
		rctx, cancel := context.WithTimeout(ctx, max(time.Until(deadline), 0)+s.cfg.AckWait)
		m, err := s.cfg.Conn.RequestWithContext(rctx, DirectSubject(proc), b)
		cancel()
		if err == nil {
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
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			return pmix.Errorf(pmix.ErrUnreach, "asking for the data of %v: %w", proc, err)
		}
		if time.Until(deadline) <= 0 {
			return fmt.Errorf("%w: no agent holds data of %v", ErrNotFound, proc)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(s.cfg.Retry, time.Until(deadline))):
		}
	}
}
