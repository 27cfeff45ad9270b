package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// Helpers for publish/lookup over the world of harness_test.go.

func rng(r pmix.Range) pmix.Info { return pmix.NewInfo(pmix.KeyRange, pmix.RangeValue(r)) }
func persist(p pmix.Persistence) pmix.Info {
	return pmix.NewInfo(pmix.KeyPersistence, pmix.PersistValue(p))
}
func waitAll() pmix.Info        { return pmix.NewInfo(pmix.KeyWait, pmix.Int32(0)) }
func timeout(s int32) pmix.Info { return pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(s)) }
func str(k, v string) pmix.Info { return pmix.NewInfo(k, pmix.String(v)) }

func (tc *tclient) publish(t *testing.T, infos ...pmix.Info) {
	t.Helper()
	if err := tc.c.Publish(t.Context(), infos); err != nil {
		t.Fatalf("%s: publish: %v", tc.name, err)
	}
}

// lookupOne looks key up and wants the value want, published by from.
func (tc *tclient) lookupOne(t *testing.T, key, want, from string, directives ...pmix.Info) {
	t.Helper()
	got, err := tc.c.Lookup(t.Context(), []string{key}, directives)
	if err != nil {
		t.Fatalf("%s: lookup %s: %v", tc.name, key, err)
	}
	if s, _ := got[0].Value.Str(); len(got) != 1 || got[0].Key != key || s != want || got[0].Proc.String() != from {
		t.Fatalf("%s: lookup %s: %+v, want %q from %s", tc.name, key, got, want, from)
	}
}

// lookupFails looks keys up and wants the status of want.
func (tc *tclient) lookupFails(t *testing.T, keys []string, want pmix.Status, directives ...pmix.Info) []client.PData {
	t.Helper()
	got, err := tc.c.Lookup(t.Context(), keys, directives)
	if !errors.Is(err, want) {
		t.Fatalf("%s: lookup %v: %+v %v, want %v", tc.name, keys, got, err, want)
	}
	return got
}

// lookupGone waits until a lookup of keys by tc is PMIX_ERR_NOT_FOUND:
// tc's agent mirrors what it looked up, and sees a removal made through
// another agent within its follow's delivery time.
func (tc *tclient) lookupGone(t *testing.T, keys ...string) {
	t.Helper()
	clustertest.WaitFor(t, waitTime, func() error {
		if got, err := tc.c.Lookup(t.Context(), keys, nil); !errors.Is(err, pmix.ErrNotFound) {
			return fmt.Errorf("%s: lookup %v: %+v %v, want not found", tc.name, keys, got, err)
		}
		return nil
	})
}

type lookupResult struct {
	data []client.PData
	err  error
}

// lookupAsync runs a lookup in the background.
func (tc *tclient) lookupAsync(keys []string, directives ...pmix.Info) <-chan lookupResult {
	ch := make(chan lookupResult, 1)
	tc.c.LookupCB(keys, directives, func(d []client.PData, err error) { ch <- lookupResult{d, err} })
	return ch
}

func awaitLookup(t *testing.T, ch <-chan lookupResult) lookupResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitTime):
		t.Fatal("lookup never returned")
	}
	return lookupResult{}
}

// waitWaiting waits until n PMIX_WAIT lookups wait with the buckets they
// wait on followed (agent.Agent.LookupsWaiting): a test publishes only once
// the lookup is past its first read, so what wakes it is the follow.
func (w *world) waitWaiting(t *testing.T, n int) {
	t.Helper()
	clustertest.WaitFor(t, waitTime, func() error {
		got := 0
		for _, a := range w.agents {
			got += a.LookupsWaiting()
		}
		if got != n {
			return fmt.Errorf("%d lookups waiting, want %d", got, n)
		}
		return nil
	})
}

// TestRendezvousAcrossClusters is RFC0003's rendezvous: two jobs on two
// clusters each publish their cluster-qualified nspace at GLOBAL range under
// a key the other knows, then look up the other's. Neither knows which
// publishes first, so each waits.
func TestRendezvousAcrossClusters(t *testing.T) {
	w := newWorld(t)
	a, b := w.client("A:jobA.0"), w.client("B:jobB.2")
	type side struct {
		tc             *tclient
		mine, theirs   string
		myID, remoteID string
	}
	sides := []side{
		{tc: a, mine: "rendezvous-a", theirs: "rendezvous-b", myID: cluster.Qualify("A", "jobA"), remoteID: "B:jobB"},
		{tc: b, mine: "rendezvous-b", theirs: "rendezvous-a", myID: cluster.Qualify("B", "jobB"), remoteID: "A:jobA"},
	}
	var wg sync.WaitGroup
	for _, s := range sides {
		wg.Go(func() {
			// The cluster id comes from the job info, as PMIx_Get(PMIX_CLUSTER_ID) would.
			cid, _ := pmix.LookupValue(s.tc.c.Info(), pmix.KeyClusterID)
			if id, _ := cid.Str(); cluster.Qualify(cluster.ID(id), s.tc.c.Proc().Nspace) != s.myID {
				t.Errorf("%s: cluster id %v", s.tc.name, cid)
			}
			if err := s.tc.c.Publish(context.Background(), []pmix.Info{str(s.mine, s.myID), rng(pmix.RangeGlobal)}); err != nil {
				t.Errorf("%s: publish: %v", s.tc.name, err)
				return
			}
			got, err := s.tc.c.Lookup(context.Background(), []string{s.theirs}, []pmix.Info{waitAll(), timeout(20)})
			if err != nil {
				t.Errorf("%s: lookup: %v", s.tc.name, err)
				return
			}
			if v, _ := got[0].Value.Str(); v != s.remoteID || !strings.HasPrefix(got[0].Proc.Nspace, s.remoteID) {
				t.Errorf("%s: found %+v, want %s", s.tc.name, got[0], s.remoteID)
			}
		})
	}
	wg.Wait()
}

// TestPublishLookupEndToEnd runs publish, lookup and unpublish between the
// clients of four agents in two clusters.
func TestPublishLookupEndToEnd(t *testing.T) {
	w := newWorld(t)
	a0, a1, a2, a3 := w.client("A:jobA.0"), w.client("A:jobA.1"), w.client("A:jobA.2"), w.client("A:jobA.3")
	a20, b0, b2 := w.client("A:jobA2.0"), w.client("B:jobB.0"), w.client("B:jobB.2")

	t.Run("ranges", func(t *testing.T) {
		a0.publish(t, str("sess", "a0"))                         // SESSION by default
		a0.publish(t, str("ns", "a0"), rng(pmix.RangeNamespace)) // jobA only
		a0.publish(t, str("local", "a0"), rng(pmix.RangeLocal))  // node a1 only
		a2.lookupOne(t, "sess", "a0", "jobA.0")                  // another agent
		a20.lookupOne(t, "sess", "a0", "jobA.0")                 // another job of the session
		b0.lookupFails(t, []string{"sess"}, pmix.ErrNotFound)    // sessions belong to a cluster
		a3.lookupOne(t, "ns", "a0", "jobA.0")
		a20.lookupFails(t, []string{"ns"}, pmix.ErrNotFound)
		a20.lookupOne(t, "local", "a0", "jobA.0") // same node
		a1.lookupOne(t, "local", "a0", "jobA.0")
		a2.lookupFails(t, []string{"local"}, pmix.ErrNotFound) // node a2
		// Both ways: a NAMESPACE lookup by jobA2 does not take jobA's
		// session data.
		a20.lookupFails(t, []string{"sess"}, pmix.ErrNotFound, rng(pmix.RangeNamespace))
	})

	t.Run("global and cluster-qualified publishers", func(t *testing.T) {
		b2.publish(t, str("g", "b2"), rng(pmix.RangeGlobal))
		a3.lookupOne(t, "g", "b2", "B:jobB.2")
		b0.lookupOne(t, "g", "b2", "jobB.2")
		a3.lookupFails(t, []string{"g"}, pmix.ErrNotFound, rng(pmix.RangeSession))
	})

	t.Run("duplicates", func(t *testing.T) {
		err := a1.c.Publish(t.Context(), []pmix.Info{str("sess", "again")})
		if !errors.Is(err, pmix.ErrDuplicateKey) {
			t.Fatalf("duplicate in the session scope: %v", err)
		}
		b0.publish(t, str("sess", "b0")) // B's session is another scope
		a1.publish(t, str("sess", "a1"), rng(pmix.RangeNamespace))
		a3.lookupOne(t, "sess", "a1", "jobA.1") // the narrowest scope wins
	})

	t.Run("statuses", func(t *testing.T) {
		got := a2.lookupFails(t, []string{"ns", "missing"}, pmix.ErrPartialSuccess)
		if len(got) != 1 || got[0].Key != "ns" {
			t.Fatalf("partial: %+v", got)
		}
		a0.publish(t, str("private", "p"), pmix.NewInfo(pmix.KeyAccessPermissions,
			pmix.Infos([]pmix.Info{str(pmix.KeyAccessUserIDs, fmt.Sprint(os.Getuid()+1))})))
		a1.lookupFails(t, []string{"private"}, pmix.ErrNoPermissions)
		a1.lookupFails(t, []string{"nothing"}, pmix.ErrNotFound)
		if _, err := a1.c.Lookup(t.Context(), nil, nil); !errors.Is(err, pmix.ErrBadParam) {
			t.Fatalf("no keys: %v", err)
		}
	})

	t.Run("unpublish", func(t *testing.T) {
		if err := a1.c.Unpublish(t.Context(), []string{"ns"}, nil); !errors.Is(err, pmix.ErrNoPermissions) {
			t.Fatalf("unpublish of another's key: %v", err)
		}
		done := make(chan error, 1)
		a0.c.UnpublishCB([]string{"ns"}, nil, func(err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		a3.lookupGone(t, "ns")
		if err := a0.c.Unpublish(t.Context(), nil, nil); err != nil {
			t.Fatal(err)
		}
		a2.lookupGone(t, "local", "private")
	})

	t.Run("first read, across agents and clusters", func(t *testing.T) {
		for i := range 3 {
			key := fmt.Sprintf("once%d", i)
			done := make(chan error, 1)
			a2.c.PublishCB([]pmix.Info{str(key, "t"), rng(pmix.RangeGlobal), persist(pmix.PersistFirstRead)}, func(err error) { done <- err })
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			var got atomic.Int32
			var wg sync.WaitGroup
			for _, tc := range []*tclient{a0, a1, a3, a20, b0, b2} {
				wg.Go(func() {
					d, err := tc.c.Lookup(context.Background(), []string{key}, nil)
					switch {
					case err == nil && len(d) == 1:
						got.Add(1)
					case !errors.Is(err, pmix.ErrNotFound):
						t.Errorf("%s: %v", tc.name, err)
					}
				})
			}
			wg.Wait()
			if got.Load() != 1 {
				t.Fatalf("%s: %d lookups got it", key, got.Load())
			}
		}
	})

	// Concurrency: 100 goroutines, over clients of both clusters, create
	// the same key; exactly one wins.
	t.Run("100 creators", func(t *testing.T) {
		creators := []*tclient{a0, a1, a2, a3, a20, b0, b2}
		var wins, dups atomic.Int32
		var wg sync.WaitGroup
		for i := range 100 {
			tc := creators[i%len(creators)]
			wg.Go(func() {
				err := tc.c.Publish(context.Background(), []pmix.Info{str("contended", tc.name), rng(pmix.RangeGlobal)})
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, pmix.ErrDuplicateKey):
					dups.Add(1)
				default:
					t.Errorf("%s: %v", tc.name, err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 || dups.Load() != 99 {
			t.Fatalf("%d winners, %d duplicates", wins.Load(), dups.Load())
		}
	})

	t.Run("wait woken from another cluster", func(t *testing.T) {
		ch := a1.lookupAsync([]string{"late", "later"}, waitAll(), timeout(20))
		w.waitWaiting(t, 1)
		b0.publish(t, str("late", "b0"), rng(pmix.RangeGlobal))
		b2.publish(t, str("later", "b2"), rng(pmix.RangeGlobal))
		r := awaitLookup(t, ch)
		if r.err != nil || len(r.data) != 2 || r.data[0].Proc.String() != "B:jobB.0" || r.data[1].Proc.String() != "B:jobB.2" {
			t.Fatalf("woken lookup: %+v %v", r.data, r.err)
		}
	})

	t.Run("wait times out", func(t *testing.T) {
		began := time.Now()
		got := a1.lookupFails(t, []string{"g", "never"}, pmix.ErrTimeout, waitAll(), timeout(1))
		if len(got) != 1 || time.Since(began) < time.Second {
			t.Fatalf("timed out with %+v after %v", got, time.Since(began))
		}
		// A caller's deadline becomes the agent's timeout.
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		if _, err := a1.c.Lookup(ctx, []string{"never"}, []pmix.Info{waitAll()}); !errors.Is(err, pmix.ErrTimeout) {
			t.Fatalf("deadline: %v", err)
		}
	})
}

// TestPersistenceEndToEnd: data goes when its persistence ends — PROC when
// the publisher finalizes, APP when its job is deregistered, SESSION when
// the last job of the session is — and INDEFINITE data stays.
func TestPersistenceEndToEnd(t *testing.T) {
	w := newWorld(t)
	a0, a20, b0 := w.client("A:jobA.0"), w.client("A:jobA2.0"), w.client("B:jobB.0")
	g := rng(pmix.RangeGlobal)
	a0.publish(t, str("proc", "p"), g, persist(pmix.PersistProc))
	a0.publish(t, str("app", "a"), g) // APP by default
	a0.publish(t, str("indef", "i"), g, persist(pmix.PersistIndef))
	a20.publish(t, str("session", "s"), g, persist(pmix.PersistSession))
	a20.publish(t, str("app2", "a"), g, persist(pmix.PersistApp))
	present := func(key string, want bool) {
		t.Helper()
		// b0's agent mirrors what it looked up: a removal made through
		// another agent reaches it within its follow's delivery time.
		clustertest.WaitFor(t, waitTime, func() error {
			_, err := b0.c.Lookup(t.Context(), []string{key}, nil)
			if got := err == nil; got != want {
				return fmt.Errorf("%s present: %v (%v), want %v", key, got, err, want)
			}
			return nil
		})
	}
	present("proc", true)
	if err := a0.c.Finalize(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Finalize returns once the agent replied; the cleanup follows the
	// connection's close.
	clustertest.WaitFor(t, waitTime, func() error {
		if _, err := b0.c.Lookup(t.Context(), []string{"proc"}, nil); !errors.Is(err, pmix.ErrNotFound) {
			return fmt.Errorf("proc still there: %v", err)
		}
		return nil
	})
	present("app", true)
	for _, node := range []string{"a1", "a2"} {
		if err := w.agents[node].DeregisterJob(t.Context(), "jobA"); err != nil {
			t.Fatal(err)
		}
	}
	present("app", false)
	present("indef", true)
	present("session", true)
	// jobA2 was the last job of session s1 on a1: its session data goes
	// with it.
	if err := w.agents["a1"].DeregisterJob(t.Context(), "jobA2"); err != nil {
		t.Fatal(err)
	}
	present("app2", false)
	present("session", false)
	present("indef", true)
}

// TestHubLoss: without the hub, each cluster's own scopes keep working, a
// GLOBAL lookup times out cleanly and a GLOBAL publish fails at once; when
// the hub returns, both work again, and a lookup that waited through the
// outage is served.
func TestHubLoss(t *testing.T) {
	w := newWorld(t)
	a0, a2, b0 := w.client("A:jobA.0"), w.client("A:jobA.2"), w.client("B:jobB.0")
	a0.publish(t, str("before", "x"), rng(pmix.RangeGlobal))
	a2.lookupOne(t, "before", "x", "jobA.0")

	if err := w.mc.ShutdownHub(t.Context()); err != nil {
		t.Fatal(err)
	}
	a0.publish(t, str("local", "x"), rng(pmix.RangeNamespace))
	a2.lookupOne(t, "local", "x", "jobA.0")
	b0.publish(t, str("local", "y"))
	b0.lookupOne(t, "local", "y", "jobB.0")

	began := time.Now()
	a2.lookupFails(t, []string{"before"}, pmix.ErrTimeout, timeout(1))
	a2.lookupFails(t, []string{"before"}, pmix.ErrTimeout, waitAll(), timeout(1))
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("two 1 s lookups took %v", d)
	}
	a2.lookupFails(t, []string{"before"}, pmix.ErrUnreach) // no timeout: at once
	if err := b0.c.Publish(t.Context(), []pmix.Info{str("during", "x"), rng(pmix.RangeGlobal)}); !errors.Is(err, pmix.ErrUnreach) {
		t.Fatalf("global publish without the hub: %v", err)
	}
	waiting := a2.lookupAsync([]string{"after"}, waitAll(), timeout(30))

	if err := w.mc.RestartHub(t.Context()); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, waitTime, func() error {
		return b0.c.Publish(t.Context(), []pmix.Info{str("after", "b0"), rng(pmix.RangeGlobal)})
	})
	if r := awaitLookup(t, waiting); r.err != nil || r.data[0].Proc.String() != "B:jobB.0" {
		t.Fatalf("lookup waiting through the outage: %+v %v", r.data, r.err)
	}
	b0.lookupOne(t, "before", "x", "A:jobA.0")
}

// TestPublishFramesFromRawClient: the frames are the protocol's, usable
// without the reference client; a partial lookup carries its data.
func TestPublishFramesFromRawClient(t *testing.T) {
	w := newWorld(t)
	env, err := w.agents["b2"].RegisterClient(t.Context(), pmix.Proc{Nspace: "jobB", Rank: 9})
	if err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, w.agents["b2"])
	r.hello(env)
	r.send(&proto.Frame{Type: proto.TypePublish, Seq: 2, Info: []pmix.Info{str("raw", "v"), rng(pmix.RangeNamespace)}})
	if f := r.recv(); f.Seq != 2 || f.Status != pmix.Success {
		t.Fatalf("publish reply: %+v", f)
	}
	r.send(&proto.Frame{Type: proto.TypeLookup, Seq: 3, Keys: []string{"raw", "absent"}})
	f := r.recv()
	if f.Seq != 3 || f.Status != pmix.ErrPartialSuccess || len(f.Data) != 1 || f.Data[0].Proc != (pmix.Proc{Nspace: "jobB", Rank: 9}) {
		t.Fatalf("lookup reply: %+v", f)
	}
	w.client("B:jobB.0").lookupOne(t, "raw", "v", "jobB.9")
	r.send(&proto.Frame{Type: proto.TypeUnpublish, Seq: 4})
	if f := r.recv(); f.Seq != 4 || f.Status != pmix.Success {
		t.Fatalf("unpublish reply: %+v", f)
	}
	w.client("B:jobB.0").lookupFails(t, []string{"raw"}, pmix.ErrNotFound)
}
