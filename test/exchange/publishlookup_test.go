package exchange

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

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// Helpers for publish/lookup over an e2e.World.

func persist(p pmix.Persistence) pmix.Info {
	return pmix.NewInfo(pmix.KeyPersistence, pmix.PersistValue(p))
}
func waitAll() pmix.Info        { return pmix.NewInfo(pmix.KeyWait, pmix.Int32(0)) }
func timeout(s int32) pmix.Info { return pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(s)) }

func awaitLookup(t *testing.T, ch <-chan e2e.LookupResult) e2e.LookupResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(e2e.WaitTime):
		t.Fatal("lookup never returned")
	}
	return e2e.LookupResult{}
}

// TestRendezvousAcrossClusters is RFC0003's rendezvous: two jobs on two
// clusters each publish their cluster-qualified nspace at GLOBAL range under
// a key the other knows, then look up the other's. Neither knows which
// publishes first, so each waits.
func TestRendezvousAcrossClusters(t *testing.T) {
	w := e2e.NewWorld(t)
	a, b := w.Client("A:jobA.0"), w.Client("B:jobB.2")
	type side struct {
		tc             *e2e.Client
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
			cid, _ := pmix.LookupValue(s.tc.C.Info(), pmix.KeyClusterID)
			if id, _ := cid.Str(); cluster.Qualify(cluster.ID(id), s.tc.C.Proc().Nspace) != s.myID {
				t.Errorf("%s: cluster id %v", s.tc.Name, cid)
			}
			if err := s.tc.C.Publish(context.Background(), []pmix.Info{e2e.Str(s.mine, s.myID), e2e.Rng(pmix.RangeGlobal)}); err != nil {
				t.Errorf("%s: publish: %v", s.tc.Name, err)
				return
			}
			got, err := s.tc.C.Lookup(context.Background(), []string{s.theirs}, []pmix.Info{waitAll(), timeout(20)})
			if err != nil {
				t.Errorf("%s: lookup: %v", s.tc.Name, err)
				return
			}
			if v, _ := got[0].Value.Str(); v != s.remoteID || !strings.HasPrefix(got[0].Proc.Nspace, s.remoteID) {
				t.Errorf("%s: found %+v, want %s", s.tc.Name, got[0], s.remoteID)
			}
		})
	}
	wg.Wait()
}

// TestPublishLookupEndToEnd runs publish, lookup and unpublish between the
// clients of four agents in two clusters.
func TestPublishLookupEndToEnd(t *testing.T) {
	w := e2e.NewWorld(t)
	a0, a1, a2, a3 := w.Client("A:jobA.0"), w.Client("A:jobA.1"), w.Client("A:jobA.2"), w.Client("A:jobA.3")
	a20, b0, b2 := w.Client("A:jobA2.0"), w.Client("B:jobB.0"), w.Client("B:jobB.2")

	t.Run("ranges", func(t *testing.T) {
		a0.Publish(t, e2e.Str("sess", "a0"))                             // SESSION by default
		a0.Publish(t, e2e.Str("ns", "a0"), e2e.Rng(pmix.RangeNamespace)) // jobA only
		a0.Publish(t, e2e.Str("local", "a0"), e2e.Rng(pmix.RangeLocal))  // node a1 only
		a2.LookupOne(t, "sess", "a0", "jobA.0")                          // another agent
		a20.LookupOne(t, "sess", "a0", "jobA.0")                         // another job of the session
		b0.LookupFails(t, []string{"sess"}, pmix.ErrNotFound)            // sessions belong to a cluster
		a3.LookupOne(t, "ns", "a0", "jobA.0")
		a20.LookupFails(t, []string{"ns"}, pmix.ErrNotFound)
		a20.LookupOne(t, "local", "a0", "jobA.0") // same node
		a1.LookupOne(t, "local", "a0", "jobA.0")
		a2.LookupFails(t, []string{"local"}, pmix.ErrNotFound) // node a2
		// Both ways: a NAMESPACE lookup by jobA2 does not take jobA's
		// session data.
		a20.LookupFails(t, []string{"sess"}, pmix.ErrNotFound, e2e.Rng(pmix.RangeNamespace))
	})

	t.Run("global and cluster-qualified publishers", func(t *testing.T) {
		b2.Publish(t, e2e.Str("g", "b2"), e2e.Rng(pmix.RangeGlobal))
		a3.LookupOne(t, "g", "b2", "B:jobB.2")
		b0.LookupOne(t, "g", "b2", "jobB.2")
		a3.LookupFails(t, []string{"g"}, pmix.ErrNotFound, e2e.Rng(pmix.RangeSession))
	})

	t.Run("duplicates", func(t *testing.T) {
		err := a1.C.Publish(t.Context(), []pmix.Info{e2e.Str("sess", "again")})
		if !errors.Is(err, pmix.ErrDuplicateKey) {
			t.Fatalf("duplicate in the session scope: %v", err)
		}
		b0.Publish(t, e2e.Str("sess", "b0")) // B's session is another scope
		a1.Publish(t, e2e.Str("sess", "a1"), e2e.Rng(pmix.RangeNamespace))
		a3.LookupOne(t, "sess", "a1", "jobA.1") // the narrowest scope wins
	})

	t.Run("statuses", func(t *testing.T) {
		got := a2.LookupFails(t, []string{"ns", "missing"}, pmix.ErrPartialSuccess)
		if len(got) != 1 || got[0].Key != "ns" {
			t.Fatalf("partial: %+v", got)
		}
		a0.Publish(t, e2e.Str("private", "p"), pmix.NewInfo(pmix.KeyAccessPermissions,
			pmix.Infos([]pmix.Info{e2e.Str(pmix.KeyAccessUserIDs, fmt.Sprint(os.Getuid()+1))})))
		a1.LookupFails(t, []string{"private"}, pmix.ErrNoPermissions)
		a1.LookupFails(t, []string{"nothing"}, pmix.ErrNotFound)
		if _, err := a1.C.Lookup(t.Context(), nil, nil); !errors.Is(err, pmix.ErrBadParam) {
			t.Fatalf("no keys: %v", err)
		}
	})

	t.Run("unpublish", func(t *testing.T) {
		if err := a1.C.Unpublish(t.Context(), []string{"ns"}, nil); !errors.Is(err, pmix.ErrNoPermissions) {
			t.Fatalf("unpublish of another's key: %v", err)
		}
		done := make(chan error, 1)
		a0.C.UnpublishCB([]string{"ns"}, nil, func(err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		a3.LookupGone(t, "ns")
		if err := a0.C.Unpublish(t.Context(), nil, nil); err != nil {
			t.Fatal(err)
		}
		a2.LookupGone(t, "local", "private")
	})

	t.Run("first read, across agents and clusters", func(t *testing.T) {
		for i := range 3 {
			key := fmt.Sprintf("once%d", i)
			done := make(chan error, 1)
			a2.C.PublishCB([]pmix.Info{e2e.Str(key, "t"), e2e.Rng(pmix.RangeGlobal), persist(pmix.PersistFirstRead)}, func(err error) { done <- err })
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			var got atomic.Int32
			var wg sync.WaitGroup
			for _, tc := range []*e2e.Client{a0, a1, a3, a20, b0, b2} {
				wg.Go(func() {
					d, err := tc.C.Lookup(context.Background(), []string{key}, nil)
					switch {
					case err == nil && len(d) == 1:
						got.Add(1)
					case !errors.Is(err, pmix.ErrNotFound):
						t.Errorf("%s: %v", tc.Name, err)
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
		creators := []*e2e.Client{a0, a1, a2, a3, a20, b0, b2}
		var wins, dups atomic.Int32
		var wg sync.WaitGroup
		for i := range 100 {
			tc := creators[i%len(creators)]
			wg.Go(func() {
				err := tc.C.Publish(context.Background(), []pmix.Info{e2e.Str("contended", tc.Name), e2e.Rng(pmix.RangeGlobal)})
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, pmix.ErrDuplicateKey):
					dups.Add(1)
				default:
					t.Errorf("%s: %v", tc.Name, err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 || dups.Load() != 99 {
			t.Fatalf("%d winners, %d duplicates", wins.Load(), dups.Load())
		}
	})

	t.Run("wait woken from another cluster", func(t *testing.T) {
		ch := a1.LookupAsync([]string{"late", "later"}, waitAll(), timeout(20))
		w.WaitWaiting(t, 1)
		b0.Publish(t, e2e.Str("late", "b0"), e2e.Rng(pmix.RangeGlobal))
		b2.Publish(t, e2e.Str("later", "b2"), e2e.Rng(pmix.RangeGlobal))
		r := awaitLookup(t, ch)
		if r.Err != nil || len(r.Data) != 2 || r.Data[0].Proc.String() != "B:jobB.0" || r.Data[1].Proc.String() != "B:jobB.2" {
			t.Fatalf("woken lookup: %+v %v", r.Data, r.Err)
		}
	})

	t.Run("wait times out", func(t *testing.T) {
		began := time.Now()
		got := a1.LookupFails(t, []string{"g", "never"}, pmix.ErrTimeout, waitAll(), timeout(1))
		if len(got) != 1 || time.Since(began) < time.Second {
			t.Fatalf("timed out with %+v after %v", got, time.Since(began))
		}
		// A caller's deadline becomes the agent's timeout.
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		if _, err := a1.C.Lookup(ctx, []string{"never"}, []pmix.Info{waitAll()}); !errors.Is(err, pmix.ErrTimeout) {
			t.Fatalf("deadline: %v", err)
		}
	})
}

// TestPersistenceEndToEnd: data goes when its persistence ends — PROC when
// the publisher finalizes, APP when its job is deregistered, SESSION when
// the last job of the session is — and INDEFINITE data stays.
func TestPersistenceEndToEnd(t *testing.T) {
	w := e2e.NewWorld(t)
	a0, a20, b0 := w.Client("A:jobA.0"), w.Client("A:jobA2.0"), w.Client("B:jobB.0")
	g := e2e.Rng(pmix.RangeGlobal)
	a0.Publish(t, e2e.Str("proc", "p"), g, persist(pmix.PersistProc))
	a0.Publish(t, e2e.Str("app", "a"), g) // APP by default
	a0.Publish(t, e2e.Str("indef", "i"), g, persist(pmix.PersistIndef))
	a20.Publish(t, e2e.Str("session", "s"), g, persist(pmix.PersistSession))
	a20.Publish(t, e2e.Str("app2", "a"), g, persist(pmix.PersistApp))
	present := func(key string, want bool) {
		t.Helper()
		// b0's agent mirrors what it looked up: a removal made through
		// another agent reaches it within its follow's delivery time.
		clustertest.WaitFor(t, e2e.WaitTime, func() error {
			_, err := b0.C.Lookup(t.Context(), []string{key}, nil)
			if got := err == nil; got != want {
				return fmt.Errorf("%s present: %v (%v), want %v", key, got, err, want)
			}
			return nil
		})
	}
	present("proc", true)
	if err := a0.C.Finalize(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Finalize returns once the agent replied; the cleanup follows the
	// connection's close.
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		if _, err := b0.C.Lookup(t.Context(), []string{"proc"}, nil); !errors.Is(err, pmix.ErrNotFound) {
			return fmt.Errorf("proc still there: %v", err)
		}
		return nil
	})
	present("app", true)
	for _, node := range []string{"a1", "a2"} {
		if err := w.Agents[node].DeregisterJob(t.Context(), "jobA"); err != nil {
			t.Fatal(err)
		}
	}
	present("app", false)
	present("indef", true)
	present("session", true)
	// jobA2 was the last job of session s1 on a1: its session data goes
	// with it.
	if err := w.Agents["a1"].DeregisterJob(t.Context(), "jobA2"); err != nil {
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
	w := e2e.NewWorld(t)
	a0, a2, b0 := w.Client("A:jobA.0"), w.Client("A:jobA.2"), w.Client("B:jobB.0")
	a0.Publish(t, e2e.Str("before", "x"), e2e.Rng(pmix.RangeGlobal))
	a2.LookupOne(t, "before", "x", "jobA.0")

	if err := w.MC.ShutdownHub(t.Context()); err != nil {
		t.Fatal(err)
	}
	a0.Publish(t, e2e.Str("local", "x"), e2e.Rng(pmix.RangeNamespace))
	a2.LookupOne(t, "local", "x", "jobA.0")
	b0.Publish(t, e2e.Str("local", "y"))
	b0.LookupOne(t, "local", "y", "jobB.0")

	began := time.Now()
	a2.LookupFails(t, []string{"before"}, pmix.ErrTimeout, timeout(1))
	a2.LookupFails(t, []string{"before"}, pmix.ErrTimeout, waitAll(), timeout(1))
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("two 1 s lookups took %v", d)
	}
	a2.LookupFails(t, []string{"before"}, pmix.ErrUnreach) // no timeout: at once
	if err := b0.C.Publish(t.Context(), []pmix.Info{e2e.Str("during", "x"), e2e.Rng(pmix.RangeGlobal)}); !errors.Is(err, pmix.ErrUnreach) {
		t.Fatalf("global publish without the hub: %v", err)
	}
	waiting := a2.LookupAsync([]string{"after"}, waitAll(), timeout(30))

	if err := w.MC.RestartHub(t.Context()); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		return b0.C.Publish(t.Context(), []pmix.Info{e2e.Str("after", "b0"), e2e.Rng(pmix.RangeGlobal)})
	})
	if r := awaitLookup(t, waiting); r.Err != nil || r.Data[0].Proc.String() != "B:jobB.0" {
		t.Fatalf("lookup waiting through the outage: %+v %v", r.Data, r.Err)
	}
	b0.LookupOne(t, "before", "x", "A:jobA.0")
}

// TestPublishFramesFromRawClient: the frames are the protocol's, usable
// without the reference client; a partial lookup carries its data.
func TestPublishFramesFromRawClient(t *testing.T) {
	w := e2e.NewWorld(t)
	env, err := w.Agents["b2"].RegisterClient(t.Context(), pmix.Proc{Nspace: "jobB", Rank: 9})
	if err != nil {
		t.Fatal(err)
	}
	r := e2e.DialRaw(t, w.Agents["b2"])
	r.Hello(env)
	r.Send(&proto.Frame{Type: proto.TypePublish, Seq: 2, Info: []pmix.Info{e2e.Str("raw", "v"), e2e.Rng(pmix.RangeNamespace)}})
	if f := r.Recv(); f.Seq != 2 || f.Status != pmix.Success {
		t.Fatalf("publish reply: %+v", f)
	}
	r.Send(&proto.Frame{Type: proto.TypeLookup, Seq: 3, Keys: []string{"raw", "absent"}})
	f := r.Recv()
	if f.Seq != 3 || f.Status != pmix.ErrPartialSuccess || len(f.Data) != 1 || f.Data[0].Proc != (pmix.Proc{Nspace: "jobB", Rank: 9}) {
		t.Fatalf("lookup reply: %+v", f)
	}
	w.Client("B:jobB.0").LookupOne(t, "raw", "v", "jobB.9")
	r.Send(&proto.Frame{Type: proto.TypeUnpublish, Seq: 4})
	if f := r.Recv(); f.Seq != 4 || f.Status != pmix.Success {
		t.Fatalf("unpublish reply: %+v", f)
	}
	w.Client("B:jobB.0").LookupFails(t, []string{"raw"}, pmix.ErrNotFound)
}
