package router

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
)

// heldInvocations is a handler that completes only when the test says:
// it records the event number (info "n") of each invocation.
type heldInvocations struct {
	mu    sync.Mutex
	got   []int64
	dones []bus.Done
}

func (h *heldInvocations) handler(c *bus.Call, done bus.Done) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, in := range c.Info {
		if in.Key == "n" {
			n, _ := in.Value.Int()
			h.got = append(h.got, n)
		}
	}
	h.dones = append(h.dones, done)
}

func (h *heldInvocations) invoked() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

// complete completes the i-th invocation.
func (h *heldInvocations) complete(i int) {
	h.mu.Lock()
	done := h.dones[i]
	h.mu.Unlock()
	done(pmix.EventNoActionTaken, nil)
}

// windowRig is a router with one client whose window is set, over the
// in-memory transport.
type windowRig struct {
	t    *testing.T
	r    *Router
	host *fakeHost
	c    *fakeClient
	n    int64
}

func newWindowRig(t *testing.T, set func(*Window)) *windowRig {
	place := event.Place{Cluster: "A", Node: "n1"}
	c := newFakeClient(t, place, pmix.Proc{Nspace: "jobA", Rank: 0}, "s1")
	set(&c.win)
	host := &fakeHost{clients: []Recipient{c}, jobs: map[string]map[pmix.Rank]string{"jobA": {0: "n1"}}}
	return &windowRig{t: t, r: startRouter(t, &MemTransport{}, place, host, 0, nil), host: host, c: c}
}

func (w *windowRig) register(h bus.Handler, info ...pmix.Info) bus.ID {
	w.t.Helper()
	id, replied, err := w.r.Register(w.t.Context(), w.c, []pmix.Status{-3001}, info, h)
	if err != nil {
		w.t.Fatal(err)
	}
	replied()
	return id
}

// notify publishes the next event, numbered in its info, and returns its
// number.
func (w *windowRig) notify() int64 {
	w.t.Helper()
	w.n++
	m := &event.Message{ID: fmt.Sprint("e", w.n), Code: -3001, Range: pmix.RangeLocal,
		Info:   []pmix.Info{pmix.NewInfo("n", pmix.Int64(w.n))},
		Source: bus.Origin{Cluster: "A", Node: "n1"}, Time: time.Now()}
	if err := w.r.Publish(m, nil); err != nil {
		w.t.Fatal(err)
	}
	return w.n
}

func (w *windowRig) reports() []event.OutcomeReport {
	w.host.mu.Lock()
	defer w.host.mu.Unlock()
	return slices.Clone(w.host.reports)
}

func (w *windowRig) waitFor(what string, cond func() bool) {
	w.t.Helper()
	clustertest.WaitFor(w.t, 10*time.Second, func() error {
		if !cond() {
			return fmt.Errorf("%s: invoked %v, %d waiting, %d reports", what, w.c.received(), w.c.win.Waiting(), len(w.reports()))
		}
		return nil
	})
}

// TestWindowStartsInOrder: with a window of 2, a client's third event
// waits until a chain ends; waiting events start in arrival order as
// chains end, each on the snapshot of its arrival — a handler registered
// while they wait is not in their chains, but is in the chains of events
// that arrive after it.
func TestWindowStartsInOrder(t *testing.T) {
	w := newWindowRig(t, func(w *Window) { w.size = 2 })
	var h heldInvocations
	w.register(h.handler)
	for range 6 {
		w.notify()
	}
	w.waitFor("two started, four waiting", func() bool { return len(h.invoked()) == 2 && w.c.win.Waiting() == 4 })

	var later heldInvocations
	w.register(func(c *bus.Call, done bus.Done) { later.handler(c, done); done(pmix.EventNoActionTaken, nil) },
		pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("later")), pmix.NewInfo(pmix.KeyEventHdlrLast, pmix.Bool(true)))
	w.notify() // 7: after the registration
	w.waitFor("the seventh waits too", func() bool { return w.c.win.Waiting() == 5 })
	if got := h.invoked(); len(got) != 2 {
		t.Fatalf("invoked %v with a window of 2", got)
	}

	for i := range 7 {
		w.waitFor(fmt.Sprint("invocation ", i+1), func() bool { return len(h.invoked()) > i })
		h.complete(i)
	}
	w.waitFor("all ended", func() bool { return len(w.reports()) == 7 })
	if got := h.invoked(); !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("invoked in order %v", got)
	}
	if got := later.invoked(); !slices.Equal(got, []int64{7}) {
		t.Errorf("the handler registered while events waited got %v, want only the event after it", got)
	}
	if n := w.c.win.n.Load(); n != 0 || w.c.win.Waiting() != 0 {
		t.Errorf("%d chains in flight, %d waiting after all ended", n, w.c.win.Waiting())
	}
	for _, rep := range w.reports() {
		if rep.Outcome.Status != pmix.Success {
			t.Errorf("outcome %+v", rep.Outcome)
		}
	}
}

// TestWindowClose: a client that goes drops its waiting events, each
// reported ended with PMIX_ERR_INIT; its chains in flight end as usual,
// and start nothing.
func TestWindowClose(t *testing.T) {
	w := newWindowRig(t, func(w *Window) { w.size = 1 })
	var h heldInvocations
	w.register(h.handler)
	for range 3 {
		w.notify()
	}
	w.waitFor("one started, two waiting", func() bool { return len(h.invoked()) == 1 && w.c.win.Waiting() == 2 })
	w.c.win.Close()
	w.waitFor("two dropped", func() bool { return len(w.reports()) == 2 })
	for _, rep := range w.reports() {
		if rep.Outcome.Status != pmix.ErrInit || rep.Outcome.Code != -3001 {
			t.Errorf("dropped event's outcome %+v", rep.Outcome)
		}
	}
	h.complete(0)
	w.waitFor("the first ended", func() bool { return len(w.reports()) == 3 })
	if got := h.invoked(); len(got) != 1 {
		t.Errorf("invoked %v after the close", got)
	}
}

// TestWindowCutOff: waiting events count against the client's queue
// limit. Past it, a client none of whose chains ended for the stall time
// is cut off; past four times it, at once.
func TestWindowCutOff(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stall time.Duration
		n     int
	}{
		{"stalled", 20 * time.Millisecond, 12}, // over the limit, under four times
		{"far over", time.Hour, 60},            // past four times the limit
	} {
		t.Run(tc.name, func(t *testing.T) {
			cut := make(chan error, 1)
			w := newWindowRig(t, func(w *Window) {
				w.size, w.limit, w.stall = 1, 1000, tc.stall
				w.cut = func(err error) {
					select {
					case cut <- err:
					default:
					}
				}
			})
			var h heldInvocations
			w.register(h.handler)
			for range tc.n {
				w.notify()
			}
			select {
			case err := <-cut:
				if pmix.StatusOf(err) != pmix.ErrOutOfResource {
					t.Errorf("cut off with %v", err)
				}
				t.Log(err)
			case <-time.After(10 * time.Second):
				t.Fatalf("not cut off; %d waiting", w.c.win.Waiting())
			}
		})
	}
}

// TestWindowStress: many events through a small window, completions
// from other goroutines in any order and at once, registrations coming
// and going meanwhile: every event ends exactly once, each handler sees
// the events in arrival order, and nothing stays in flight. (Meant for
// the race detector.)
func TestWindowStress(t *testing.T) {
	const events = 2000
	w := newWindowRig(t, func(w *Window) { w.size = 4 })
	type seen struct {
		mu   sync.Mutex
		last int64
		bad  []string
	}
	record := func(s *seen, name string, c *bus.Call) (n int64) {
		for _, in := range c.Info {
			if in.Key == "n" {
				n, _ = in.Value.Int()
				s.mu.Lock()
				if n <= s.last {
					s.bad = append(s.bad, fmt.Sprintf("%s: event %d after %d", name, n, s.last))
				}
				s.last = n
				s.mu.Unlock()
			}
		}
		return n
	}
	var main seen
	w.register(func(c *bus.Call, done bus.Done) {
		if record(&main, "main", c)%2 == 0 { // some complete within the call, the others later, elsewhere
			done(pmix.EventNoActionTaken, nil)
			return
		}
		go done(pmix.EventNoActionTaken, nil)
	}, pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("main")))
	stop := make(chan struct{})
	churned := make(chan struct{})
	go func() { // a second handler registered and deregistered over and over
		defer close(churned)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var s seen
			id, replied, err := w.r.Register(t.Context(), w.c, []pmix.Status{-3001}, []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String(fmt.Sprint("churn", i)))},
				func(c *bus.Call, done bus.Done) { record(&s, "churn", c); go done(pmix.EventNoActionTaken, nil) })
			if err != nil {
				t.Error(err)
				return
			}
			replied()
			if err := w.r.Deregister(w.c, w.c.reg, id); err != nil {
				t.Error(err)
				return
			}
			s.mu.Lock()
			if len(s.bad) > 0 {
				t.Error(s.bad)
			}
			s.mu.Unlock()
		}
	}()
	for range events {
		w.notify()
	}
	w.waitFor("every event ended", func() bool { return len(w.reports()) >= events })
	close(stop)
	<-churned
	if n := len(w.reports()); n != events {
		t.Errorf("%d outcomes for %d events", n, events)
	}
	if len(main.bad) > 0 {
		t.Errorf("out of order: %v", main.bad[:min(len(main.bad), 5)])
	}
	if main.last != events {
		t.Errorf("main handler's last event %d, want %d", main.last, events)
	}
	w.waitFor("nothing in flight", func() bool { return w.c.win.n.Load() == 0 && w.c.win.Waiting() == 0 })
}
