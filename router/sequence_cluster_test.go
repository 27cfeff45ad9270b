package router

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// On a cluster of three routed NATS servers with R3 streams, a server
// (the agent's, unless it is the publisher's) is killed during a flood of
// job events and while a registration is being replayed to: each
// registration gets every event the stream stored for it once, in order —
// the copies lost with the server are fetched by sequence, those sent
// again are skipped.
func TestSequencedR3ServerKilled(t *testing.T) {
	c := clustertest.StartCluster(t, "A", 3)
	ctx := t.Context()
	nc := clustertest.Connect(t, c.URL())
	all, jobs := subjects.CacheSubjects("A")
	from, to := subjects.CopyTransform("A")
	cache, err := jetstream.OpenEventCache(ctx, nc, jetstream.EventCacheConfig{
		Cluster: "A", Subjects: all, JobSubjects: jobs, CopyFrom: from, CopyTo: to,
		MaxMsgs: 100_000, Replicas: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	place := event.Place{Cluster: "A", Node: "n1"}
	c0 := newFakeClient(t, place, pmix.Proc{Nspace: "jobA", Rank: 0}, "s")
	c1 := newFakeClient(t, place, pmix.Proc{Nspace: "jobA", Rank: 1}, "s")
	host := &fakeHost{clients: []Recipient{c0, c1}, jobs: map[string]map[pmix.Rank]string{"jobA": {0: "n1", 1: "n1"}}}
	done := make(chan struct{})
	r := New(Config{Transport: NATS(nc), Place: place, Host: host, Log: clustertest.Logger(t), Done: done})
	if err := r.Sequence(ctx, cache); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { r.Dispatch(); close(stopped) }()
	t.Cleanup(func() { close(done); <-stopped })

	register := func(fc *fakeClient) *seqReg {
		t.Helper()
		g := &seqReg{c: fc}
		id, replied, err := r.Register(ctx, fc, []pmix.Status{-3001}, nil, g.handler)
		if err != nil {
			t.Fatal(err)
		}
		g.id = id
		replied()
		return g
	}
	early := register(c0)

	// Another connection publishes, as another agent would.
	pub := clustertest.Connect(t, c.Server(0).ClientURL())
	const n = 1500
	var wg sync.WaitGroup
	wg.Add(1)
	half := make(chan struct{})
	go func() {
		defer wg.Done()
		for i := 1; i <= n; i++ {
			if i == n/2 {
				close(half)
			}
			m := &event.Message{ID: fmt.Sprint("e", i), Code: -3001, Range: pmix.RangeNamespace,
				Info:   []pmix.Info{pmix.NewInfo(seqKey, pmix.String(strconv.Itoa(i))), pmix.NewInfo(pmix.KeyNspace, pmix.String("jobA"))},
				Source: bus.Origin{Cluster: "A", Node: "n2"}, Time: time.Now()}
			scopes, err := event.Scopes(place, m, nil, host)
			if err != nil {
				t.Error(err)
				return
			}
			if err := event.Publish(pub, m, scopes); err != nil {
				return // its server went
			}
			if i%100 == 0 {
				time.Sleep(5 * time.Millisecond) // a flood, not a burst
			}
		}
	}()
	<-half
	// Kill the server the agent is connected to (not the publisher's),
	// and register while it is down and the streams elect leaders.
	var victim int
	for i, s := range c.Servers() {
		if s.ClientURL() == nc.ConnectedUrl() {
			victim = i
		}
	}
	if victim == 0 {
		victim = 1 // keep the publisher's
	}
	if err := c.Server(victim).Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	late := register(c1)
	wg.Wait()

	// What the stream stored is what each registration is owed.
	want := func() []int {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		last, err := cache.LastSeq(rctx)
		if err != nil {
			t.Logf("last sequence: %v", err)
			return nil
		}
		var out []int
		_, err = cache.ReadSeqs(rctx, 1, last, nil, func(b []jetstream.CachedMsg) error {
			for _, m := range b {
				em, err := event.UnmarshalMessage(m.Data)
				if err != nil {
					return err
				}
				for _, in := range em.Info {
					if in.Key == seqKey {
						s, _ := in.Value.Str()
						k, _ := strconv.Atoi(s)
						out = append(out, k)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Logf("reading the stream: %v", err)
			return nil
		}
		return out
	}
	clustertest.WaitFor(t, 30*time.Second, func() error {
		r.CheckTail() // as the agent does after a reconnect, and now and then
		w := want()
		// Core NATS publishes routed to the killed server before the
		// cluster knew are lost (up to hundreds): what is owed is what
		// the stream stored.
		if len(w) == 0 {
			return fmt.Errorf("the stream holds no event")
		}
		for name, g := range map[string]*seqReg{"early": early, "late": late} {
			if got := g.received(); !slices.Equal(got, w) {
				return fmt.Errorf("%s registration got %d events, the stream holds %d", name, len(got), len(w))
			}
		}
		return nil
	})
	t.Logf("stream held %d of %d events; %+v", len(want()), n, r.SeqStats())
}
