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

// cacheHost is a fakeHost with a cache: every event the test publishes,
// as the events stream would hold it.
type cacheHost struct {
	*fakeHost
	cmu   sync.Mutex
	cache []cachedEvent
}

func (h *cacheHost) add(sc subjects.Scope, m *event.Message) {
	h.cmu.Lock()
	defer h.cmu.Unlock()
	h.cache = append(h.cache, cachedEvent{sc: sc, m: m, seq: uint64(len(h.cache) + 1)})
}

func (h *cacheHost) readJobEvents(_ context.Context, _, _ []string, _ readPoint, marked func() error, batch func([]cachedEvent) error) (uint64, uint64, error) {
	h.cmu.Lock()
	all := slices.Clone(h.cache)
	h.cmu.Unlock()
	if err := marked(); err != nil {
		return 0, 0, err
	}
	for b := range slices.Chunk(all, 7) {
		if err := batch(b); err != nil {
			return 0, 0, err
		}
	}
	return uint64(len(all)), 0, nil
}

// The router recovers the events its full inbox dropped, over an
// in-memory transport that drops as NATS does: each job event runs the
// client's chain once, in order, and a registration made meanwhile (its
// fence waits with the events kept during the recovery) gets each event
// once too, in order, to the last: those that queued for it while it was
// held (here: all that were not run before it, the fake cache giving a
// registration nothing), then live ones.
func TestRecoveryInMemory(t *testing.T) {
	place := event.Place{Cluster: "A", Node: "n1"}
	a0 := newFakeClient(t, place, pmix.Proc{Nspace: "jobA", Rank: 0}, "s1")
	host := &cacheHost{fakeHost: &fakeHost{clients: []Recipient{a0}, jobs: map[string]map[pmix.Rank]string{"jobA": {0: "n1"}}}}
	tr := &MemTransport{dropWhenFull: true}
	r := startRouter(t, tr, place, host, 8, func(r *Router) {
		r.anchor = readPoint{known: true} // the cache was empty
	})

	const code = pmix.Status(-3001)
	var mu sync.Mutex
	got := map[string][]int{}
	record := func(name string) bus.Handler {
		return func(c *bus.Call, done bus.Done) {
			v, _ := pmix.LookupValue(c.Info, "seq")
			i, _ := v.Int()
			mu.Lock()
			got[name] = append(got[name], int(i))
			mu.Unlock()
			done(pmix.EventNoActionTaken, nil)
		}
	}
	register := func(name string) error {
		info := []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String(name))}
		_, replied, err := r.Register(t.Context(), a0, []pmix.Status{code}, info, record(name))
		if err != nil {
			return err
		}
		replied()
		return nil
	}
	if err := register("first"); err != nil {
		t.Fatal(err)
	}

	const n, later = 3000, 1500
	sc := subjects.Node("A", "n1")
	for i := range n {
		if i == later {
			go func() {
				if err := register("second"); err != nil {
					t.Error(err)
				}
			}()
		}
		m := &event.Message{ID: fmt.Sprint("e", i), Code: code, Range: pmix.RangeLocal,
			Source: bus.Origin{Cluster: "A", Node: "n1"}, Info: []pmix.Info{pmix.NewInfo("seq", pmix.Int64(int64(i)))}, Time: time.Now()}
		host.add(sc, m)
		if err := r.Publish(m, nil); err != nil {
			t.Fatal(err)
		}
	}
	clustertest.WaitFor(t, 20*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got["first"]) < n {
			return fmt.Errorf("%d of %d events; %d dropped, %d recovered", len(got["first"]), n, r.dropped(), r.rec.recovered.Load())
		}
		if s := got["second"]; len(s) == 0 || s[len(s)-1] != n-1 {
			return fmt.Errorf("the second registration got %d events", len(s))
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if r.dropped() == 0 {
		t.Fatal("nothing was dropped")
	}
	t.Logf("%d dropped, %d recovered in %d rounds; the second registration got %d", r.dropped(), r.rec.recovered.Load(), r.rec.rounds.Load(), len(got["second"]))
	for i, s := range got["first"] {
		if s != i {
			t.Fatalf("delivery %d is event #%d, of %d", i, s, len(got["first"]))
		}
	}
	second := got["second"]
	for i, s := range second {
		if s != second[0]+i {
			t.Fatalf("the second registration's delivery %d is event #%d after #%d", i, s, second[0])
		}
	}
}
