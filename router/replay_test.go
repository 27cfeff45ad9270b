package router

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// fencingHost is a fakeHost whose cache is empty but fixes its read point,
// as the agent's does: each registration's fence goes out and comes back.
type fencingHost struct{ fakeHost }

func (h *fencingHost) readCache(_ context.Context, _ pmix.Proc, _ string, _ bus.Registration, _ readPoint, marked func(), _ func([]cachedEvent) error) (readPoint, error) {
	marked()
	return readPoint{}, nil
}

// TestEventAfterFenceRunsInChain: an event that reaches the agent after a
// new registration's fence is back, but before the registration's reply
// has reached the dispatch goroutine (another process may send it the
// moment the client has its reply), waits for the registration's release
// and then runs the client's chain with the new registration in it, once;
// it does not run the chain without it and reach the registration apart.
func TestEventAfterFenceRunsInChain(t *testing.T) {
	place := event.Place{Cluster: "A", Node: "n1"}
	a0 := newFakeClient(t, place, pmix.Proc{Nspace: "jobA", Rank: 0}, "s1")
	b0 := newFakeClient(t, place, pmix.Proc{Nspace: "jobB", Rank: 0}, "s2")
	host := &fencingHost{fakeHost{clients: []Recipient{a0, b0}, jobs: map[string]map[pmix.Rank]string{"jobA": {0: "n1"}, "jobB": {0: "n1"}}}}
	r := startRouter(t, &MemTransport{}, place, host, 0, nil)

	var mu sync.Mutex
	var ran []string
	handler := func(name string) bus.Handler {
		return func(c *bus.Call, done bus.Done) {
			mu.Lock()
			ran = append(ran, fmt.Sprintf("%s:%v", name, c.Code))
			mu.Unlock()
			done(pmix.EventNoActionTaken, nil)
		}
	}
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(ran)
	}
	noneHeld := func() {
		t.Helper()
		clustertest.WaitFor(t, 10*time.Second, func() error {
			if n := r.nholds.Load(); n > 0 {
				return fmt.Errorf("%d registrations held", n)
			}
			return nil
		})
	}
	register := func(c *fakeClient, code pmix.Status, name string) (replied func()) {
		t.Helper()
		_, replied, err := r.Register(t.Context(), c, []pmix.Status{code}, nil, handler(name))
		if err != nil {
			t.Fatal(err)
		}
		return replied
	}
	const code, other = pmix.Status(-3101), pmix.Status(-3102)
	register(a0, code, "old")()
	register(b0, other, "b0")()
	noneHeld()

	replied := register(a0, code, "new")
	// The fence is back; the reply is on its way to the client, which a
	// peer hears of and notifies.
	n := 0
	notify := func(c pmix.Status) {
		t.Helper()
		n++
		m := &event.Message{ID: fmt.Sprint("e", n), Code: c, Range: pmix.RangeLocal, Source: bus.Origin{Cluster: "A", Node: "n1"}, Time: time.Now()}
		if err := r.Publish(m, nil); err != nil {
			t.Fatal(err)
		}
	}
	notify(code)
	notify(other) // handled after the first: once b0 has it, so was the first
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if !slices.Contains(seen(), fmt.Sprintf("b0:%v", other)) {
			return fmt.Errorf("b0 has not run: %v", seen())
		}
		return nil
	})
	if got := seen(); slices.Contains(got, fmt.Sprintf("old:%v", code)) {
		t.Fatalf("the event ran the client's chain without its new registration, before the release: %v", got)
	}
	replied()
	noneHeld()
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if len(seen()) < 3 {
			return fmt.Errorf("ran %v", seen())
		}
		return nil
	})
	want := []string{fmt.Sprintf("b0:%v", other), fmt.Sprintf("new:%v", code), fmt.Sprintf("old:%v", code)}
	if got := seen(); !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v (one chain, the new registration first)", got, want)
	}
}

// gapHost's cache answers a registration's first read with first, and its
// second read (after the first read point) with second: as a NATS server
// does for an event it matched against the subscriptions before the
// registration's Subscription was there, but whose stream stored it after
// the first read point — it comes neither live nor in the first read.
// Before the second read fixes its read point, lateLive is published: it
// comes live (and waits for the release), and is in the second read too.
type gapHost struct {
	fakeHost
	r             *Router
	sc            subjects.Scope
	first, second []*event.Message
	lateLive      *event.Message
}

func (h *gapHost) readCache(_ context.Context, _ pmix.Proc, _ string, _ bus.Registration, after readPoint, marked func(), batch func([]cachedEvent) error) (readPoint, error) {
	msgs := h.first
	if after.known {
		msgs = h.second
		if h.lateLive != nil {
			if err := h.r.Publish(h.lateLive, nil); err != nil {
				return readPoint{}, err
			}
		}
	}
	marked()
	var b []cachedEvent
	for _, m := range msgs {
		b = append(b, cachedEvent{sc: h.sc, m: m})
	}
	if len(b) > 0 {
		if err := batch(b); err != nil {
			return readPoint{}, err
		}
	}
	return readPoint{events: after.events + uint64(len(msgs)), known: true}, nil
}

// TestSecondReadTakesLateEvent: an event stored after a new registration's
// first read point that never came live reaches the registration from the
// second read, in its place; one the second read returns that also came
// live reaches it once, live.
func TestSecondReadTakesLateEvent(t *testing.T) {
	place := event.Place{Cluster: "A", Node: "n1"}
	a0 := newFakeClient(t, place, pmix.Proc{Nspace: "jobA", Rank: 0}, "s1")
	const code = pmix.Status(-3103)
	ev := func(id string) *event.Message {
		return &event.Message{ID: id, Code: code, Range: pmix.RangeLocal, Source: bus.Origin{Cluster: "A", Node: "n1"}, Time: time.Now()}
	}
	live := ev("live")
	host := &gapHost{
		fakeHost: fakeHost{clients: []Recipient{a0}, jobs: map[string]map[pmix.Rank]string{"jobA": {0: "n1"}}},
		sc:       subjects.Node("A", "n1"),
		first:    []*event.Message{ev("c1"), ev("c2")},
		second:   []*event.Message{ev("late"), live},
		lateLive: live,
	}
	r := startRouter(t, &MemTransport{}, place, host, 0, nil)
	host.r = r
	_, replied, err := r.Register(t.Context(), a0, []pmix.Status{code}, nil, a0.handler)
	if err != nil {
		t.Fatal(err)
	}
	replied()
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if n := r.nholds.Load(); n > 0 {
			return fmt.Errorf("%d registrations held", n)
		}
		return nil
	})
	var ids []string
	clustertest.WaitFor(t, 10*time.Second, func() error {
		host.mu.Lock()
		defer host.mu.Unlock()
		ids = ids[:0]
		for _, rep := range host.reports {
			ids = append(ids, rep.EventID)
		}
		if len(ids) < 4 {
			return fmt.Errorf("chains of %v ended", ids)
		}
		return nil
	})
	if want := []string{"c1", "c2", "late", "live"}; !slices.Equal(ids, want) {
		t.Errorf("the registration got %v, want %v: each once, the late event from the second read", ids, want)
	}
}
