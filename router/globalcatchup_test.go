package router

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// While a catch-up is due, another cluster's GLOBAL events wait and run
// after the caught-up ones, each once; this cluster's own run at once; one
// received before the outage is not run again when caught up.
func TestCatchupKeepsEachSourceInOrder(t *testing.T) {
	place := event.Place{Cluster: "A", Node: "n1"}
	c := newFakeClient(t, place, pmix.Proc{Nspace: "job", Rank: 0}, "s1")
	host := &fakeHost{clients: []Recipient{c}, jobs: map[string]map[pmix.Rank]string{"job": {0: "n1"}}}
	r := startRouter(t, &MemTransport{}, place, host, 0, nil)
	_, replied, err := r.Register(t.Context(), c, nil, nil, c.handler)
	if err != nil {
		t.Fatal(err)
	}
	replied()

	msg := func(code pmix.Status, from string) *event.Message {
		return &event.Message{ID: fmt.Sprint(from, code), Code: code, Range: pmix.RangeGlobal,
			Source: bus.Origin{Cluster: from, Node: "x"}, Time: time.Now()}
	}
	live := func(m *event.Message) {
		t.Helper()
		if err := r.Publish(m, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(want ...pmix.Status) {
		t.Helper()
		clustertest.WaitFor(t, 10*time.Second, func() error {
			if got := c.received(); !slices.Equal(got, want) {
				return fmt.Errorf("got %v, want %v", got, want)
			}
			return nil
		})
	}
	before, e1, e2, e3, own := msg(-3100, "B"), msg(-3101, "B"), msg(-3102, "B"), msg(-3103, "B"), msg(-3104, "A")
	live(before)
	waitFor(-3100)

	r.BeginCatchup()
	live(e3)  // B's, once the link is back: waits
	live(own) // A's own: runs
	waitFor(-3100, -3104)
	if filters := r.GlobalFilters(); !slices.Equal(filters, []string{subjects.Global().CachedWildcard()}) {
		t.Errorf("catch-up filters %v", filters)
	}
	sc := subjects.Global()
	caught := []cachedEvent{{sc: sc, m: before}, {sc: sc, m: e1}, {sc: sc, m: e2}, {sc: sc, m: e3}}
	if err := r.CatchUp(caught); err != nil {
		t.Fatal(err)
	}
	r.EndCatchup()
	waitFor(-3100, -3104, -3101, -3102, -3103)
	if n := r.catchup.caughtUp.Load(); n != 2 {
		t.Errorf("%d events caught up, want the 2 that had not come", n)
	}

	// With no catch-up due, B's events run at once again.
	live(msg(-3105, "B"))
	waitFor(-3100, -3104, -3101, -3102, -3103, -3105)
}
