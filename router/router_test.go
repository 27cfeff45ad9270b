package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
)

// fakeClient is a Recipient with a real registry whose handlers record
// what they get.
type fakeClient struct {
	proc    pmix.Proc
	session string
	reg     *bus.Registry
	mu      sync.Mutex
	got     []pmix.Status
	win     Window // the default window unless a test sets another
}

func (c *fakeClient) Target() (pmix.Proc, string, *bus.Registry, bool) {
	return c.proc, c.session, c.reg, true
}
func (c *fakeClient) Cork()       {}
func (c *fakeClient) Uncork(bool) {}

func (c *fakeClient) Window() *Window { return &c.win }

func (c *fakeClient) handler(_ *bus.Call, done bus.Done) { done(pmix.EventNoActionTaken, nil) }

func (c *fakeClient) received() []pmix.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// fakeHost is a Host: a fixed set of clients, no cache.
type fakeHost struct {
	clients []Recipient
	jobs    map[string]map[pmix.Rank]string
	mu      sync.Mutex
	reports []event.OutcomeReport
}

func (h *fakeHost) Recipients() []Recipient { return h.clients }
func (h *fakeHost) Nodes(ns string, r pmix.Rank) ([]string, bool) {
	j, ok := h.jobs[ns]
	if !ok {
		return nil, false
	}
	if n, ok := j[r]; ok {
		return []string{n}, true
	}
	return nil, true
}
func (h *fakeHost) Outcome(rep event.OutcomeReport) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reports = append(h.reports, rep)
	for _, rc := range h.clients {
		if fc := rc.(*fakeClient); fc.proc == rep.Client {
			fc.mu.Lock()
			fc.got = append(fc.got, rep.Outcome.Code)
			fc.mu.Unlock()
		}
	}
}
func (h *fakeHost) GoFunc(f func()) bool { go f(); return true }

func newFakeClient(t *testing.T, place event.Place, proc pmix.Proc, session string) *fakeClient {
	t.Helper()
	reg, err := bus.NewRegistry(bus.Config{Self: bus.Origin{Cluster: string(place.Cluster), Node: place.Node, Session: session, Proc: proc}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	c := &fakeClient{proc: proc, session: session, reg: reg}
	c.win.size = DefaultWindow
	return c
}

// startRouter makes a router on tr for host, lets prepare adjust it (nil:
// nothing), and runs its dispatch goroutine until the test ends.
func startRouter(t *testing.T, tr Transport, place event.Place, host Host, inbox int, prepare func(*Router)) *Router {
	t.Helper()
	done := make(chan struct{})
	r := newRouter(tr, place, host, clustertest.Logger(t), done, inbox)
	if prepare != nil {
		prepare(r)
	}
	stopped := make(chan struct{})
	go func() { r.Dispatch(); close(stopped) }()
	t.Cleanup(func() { close(done); <-stopped })
	return r
}

// The router subscribes to exactly what its clients' registrations need,
// and delivers each event to the clients in its range, over an in-memory
// Transport: no NATS server.
func TestRouterInMemory(t *testing.T) {
	place := event.Place{Cluster: "A", Node: "n1"}
	a0 := newFakeClient(t, place, pmix.Proc{Nspace: "jobA", Rank: 0}, "s1")
	b0 := newFakeClient(t, place, pmix.Proc{Nspace: "jobB", Rank: 0}, "s2")
	host := &fakeHost{clients: []Recipient{a0, b0}, jobs: map[string]map[pmix.Rank]string{"jobA": {0: "n1"}, "jobB": {0: "n1"}}}
	r := startRouter(t, &MemTransport{}, place, host, 0, nil)

	register := func(c *fakeClient, codes []pmix.Status, info []pmix.Info) bus.ID {
		t.Helper()
		id, replied, err := r.Register(t.Context(), c, codes, info, c.handler)
		if err != nil {
			t.Fatal(err)
		}
		replied()
		return id
	}
	idA := register(a0, []pmix.Status{-3001}, []pmix.Info{pmix.NewInfo(pmix.KeyEventJobLevel, pmix.Bool(true))})
	register(b0, nil, []pmix.Info{pmix.NewInfo(pmix.KeyEventEnviroLevel, pmix.Bool(true))})

	got := r.Subjects()
	for _, want := range []string{
		"pmix.evt.A.ns.jobA.-3001", "pmix.evt.A.ns.jobA.-3001.nc", "pmix.evt.A.node.n1.-3001", "pmix.evt.global.*.-3001",
		"pmix.env.A.ns.jobB.>", "pmix.env.A.node.n1.>", "pmix.env.A.sess.s2.>", "pmix.env.global.*.>",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("no Subscription %s in %v", want, got)
		}
	}
	for _, s := range got {
		if strings.HasPrefix(s, "pmix.evt.A.ns.jobB") || strings.HasPrefix(s, "pmix.env.A.ns.jobA") {
			t.Errorf("Subscription %s that no registration needs", s)
		}
	}

	n := 0
	notify := func(code pmix.Status, rng pmix.Range, env bool, info ...pmix.Info) {
		t.Helper()
		n++
		m := &event.Message{ID: fmt.Sprint("e", n), Code: code, Range: rng, Environment: env, Info: info,
			Source: bus.Origin{Cluster: "A", Node: "n1"}, Time: time.Now()}
		if err := r.Publish(m, nil); err != nil {
			t.Fatal(err)
		}
	}
	nspace := func(ns string) pmix.Info { return pmix.NewInfo(pmix.KeyNspace, pmix.String(ns)) }
	notify(-3001, pmix.RangeNamespace, false, nspace("jobA")) // a0
	notify(-3001, pmix.RangeNamespace, false, nspace("jobB")) // nobody: b0 takes environment events only
	notify(-3002, pmix.RangeLocal, true)                      // b0
	notify(-3003, pmix.RangeNamespace, true, nspace("jobA"))  // nobody: a0 wants no environment events
	notify(-3004, pmix.RangeNamespace, true, nspace("jobB"))  // b0
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if len(a0.received()) < 1 || len(b0.received()) < 2 {
			return fmt.Errorf("a0 %v, b0 %v", a0.received(), b0.received())
		}
		return nil
	})
	// Fence: one more event each clients takes, after which nothing else
	// can still be on its way.
	notify(-3001, pmix.RangeLocal, false)
	notify(-3005, pmix.RangeLocal, true)
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if len(a0.received()) < 2 || len(b0.received()) < 3 {
			return fmt.Errorf("a0 %v, b0 %v", a0.received(), b0.received())
		}
		return nil
	})
	if got := a0.received(); !slices.Equal(got, []pmix.Status{-3001, -3001}) {
		t.Errorf("a0 got %v", got)
	}
	if got := b0.received(); !slices.Equal(got, []pmix.Status{-3002, -3004, -3005}) {
		t.Errorf("b0 got %v", got)
	}

	if err := r.Deregister(a0, a0.reg, idA); err != nil {
		t.Fatal(err)
	}
	for _, s := range r.Subjects() {
		if strings.HasPrefix(s, "pmix.evt.") {
			t.Errorf("Subscription %s left after the only job-event registration went", s)
		}
	}
}

// Subscriptions are counted per scope and code: a subject stays while any
// registration needs it; a scope's wildcard replaces its code subjects
// while a registration needs every code (or more than wildcardAbove); a
// registration of too many codes is refused.
func TestRouterSubscriptionCounting(t *testing.T) {
	place := event.Place{Cluster: "A", Node: "n1"}
	c1 := newFakeClient(t, place, pmix.Proc{Nspace: "j", Rank: 0}, "")
	c2 := newFakeClient(t, place, pmix.Proc{Nspace: "j", Rank: 1}, "")
	host := &fakeHost{clients: []Recipient{c1, c2}}
	done := make(chan struct{})
	defer close(done)
	r := newRouter(&MemTransport{}, place, host, clustertest.Logger(t), done, 0)
	go r.Dispatch()
	jobOnly := []pmix.Info{pmix.NewInfo(pmix.KeyEventJobLevel, pmix.Bool(true))}
	register := func(c *fakeClient, codes []pmix.Status) bus.ID {
		t.Helper()
		id, replied, err := r.Register(t.Context(), c, codes, jobOnly, c.handler)
		if err != nil {
			t.Fatal(err)
		}
		replied()
		return id
	}
	node := func() []string {
		var out []string
		for _, s := range r.Subjects() {
			if strings.HasPrefix(s, "pmix.evt.A.node.n1.") {
				out = append(out, strings.TrimPrefix(s, "pmix.evt.A.node.n1."))
			}
		}
		return out
	}
	want := func(what string, subjs ...string) {
		t.Helper()
		if got := node(); !slices.Equal(got, subjs) {
			t.Fatalf("%s: node scope subscribed to %v, want %v", what, got, subjs)
		}
	}
	a := register(c1, []pmix.Status{-3001})
	register(c2, []pmix.Status{-3001, -3002})
	want("two registrations", "-3001", "-3001.nc", "-3002", "-3002.nc")
	if err := r.Deregister(c1, c1.reg, a); err != nil {
		t.Fatal(err)
	}
	want("-3001 still needed by c2", "-3001", "-3001.nc", "-3002", "-3002.nc")
	d := register(c1, nil)
	want("a default registration takes the wildcard", ">")
	if err := r.Deregister(c1, c1.reg, d); err != nil {
		t.Fatal(err)
	}
	want("the codes come back", "-3001", "-3001.nc", "-3002", "-3002.nc")
	r.Forget(c2)
	want("the client left")

	many := make([]pmix.Status, wildcardAbove+1)
	for i := range many {
		many[i] = pmix.Status(-4000 - i)
	}
	register(c1, many)
	want("many codes take the wildcard", ">")
	tooMany := make([]pmix.Status, MaxRegistrationCodes+1)
	for i := range tooMany {
		tooMany[i] = pmix.Status(-5000 - i)
	}
	if _, _, err := r.Register(t.Context(), c2, tooMany, nil, c2.handler); !errors.Is(err, pmix.ErrBadParam) || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("a registration of %d codes: %v", len(tooMany), err)
	}
}

// blockingFlush is a Transport whose Flush waits until released.
type blockingFlush struct {
	*MemTransport
	entered chan struct{}
	release chan struct{}
}

func (b *blockingFlush) Flush(ctx context.Context) error {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A registration waiting for NATS to confirm its subscriptions holds no
// lock the event path needs: events keep reaching the other clients
// meanwhile (they used to wait, behind the router's lock, for the flush).
func TestRegistrationFlushDoesNotStallDispatch(t *testing.T) {
	place := event.Place{Cluster: "A", Node: "n1"}
	c1 := newFakeClient(t, place, pmix.Proc{Nspace: "j", Rank: 0}, "")
	c2 := newFakeClient(t, place, pmix.Proc{Nspace: "j", Rank: 1}, "")
	host := &fakeHost{clients: []Recipient{c1, c2}, jobs: map[string]map[pmix.Rank]string{"j": {0: "n1", 1: "n1"}}}
	tr := &blockingFlush{MemTransport: &MemTransport{}, entered: make(chan struct{}, 1), release: make(chan struct{})}
	done := make(chan struct{})
	defer close(done)
	r := newRouter(tr, place, host, clustertest.Logger(t), done, 0)
	go r.Dispatch()

	close(tr.release) // c1's registration goes through
	id, replied, err := r.Register(t.Context(), c1, []pmix.Status{-3001}, nil, c1.handler)
	if err != nil {
		t.Fatal(err)
	}
	replied()
	_ = id
	<-tr.entered                     // c1's flush
	tr.release = make(chan struct{}) // the next flush blocks
	registered := make(chan error, 1)
	go func() {
		_, replied, err := r.Register(t.Context(), c2, []pmix.Status{-3002}, nil, c2.handler)
		if err == nil {
			replied()
		}
		registered <- err
	}()
	<-tr.entered
	m := &event.Message{ID: "x1", Code: -3001, Range: pmix.RangeLocal, Source: bus.Origin{Cluster: "A", Node: "n1"}, Time: time.Now()}
	if err := r.Publish(m, nil); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if len(c1.received()) != 1 {
			return fmt.Errorf("c1 got %v while c2's registration waits for NATS", c1.received())
		}
		return nil
	})
	close(tr.release)
	if err := <-registered; err != nil {
		t.Fatal(err)
	}
}
