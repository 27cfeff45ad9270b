package events

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
)

// TestLateRegistrationGetsCachedEvents: events notified before a handler
// exists are replayed to it when it registers, in order, once; the
// registration call returns before the first replayed invocation; events
// marked PMIX_EVENT_DO_NOT_CACHE are not replayed.
func TestLateRegistrationGetsCachedEvents(t *testing.T) {
	w := e2e.NewWorld(t)
	const code = pmix.EventNodeDown
	rm := w.Agents["a2"]
	for i := range 5 {
		if _, err := rm.Notify(t.Context(), code, pmix.RangeLocal, true, e2e.SeqInfo(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Not cached.
	if _, err := rm.Notify(t.Context(), code, pmix.RangeLocal, true, append(e2e.SeqInfo(99), pmix.NewInfo(pmix.KeyEventDoNotCache, pmix.Bool(true)))); err != nil {
		t.Fatal(err)
	}
	// A job event for jobA, cached too.
	if _, err := rm.Notify(t.Context(), pmix.EventProcTerminated, pmix.RangeNamespace, false, append(e2e.SeqInfo(5), pmix.NewInfo(pmix.KeyNspace, pmix.String("jobA")))); err != nil {
		t.Fatal(err)
	}
	e2e.WaitCached(t, w.Agents["a1"], 6)

	c := w.Client("A:jobA.3")
	var returned atomic.Bool
	var early atomic.Bool
	rec := e2e.NewRecorder()
	h := rec.Handler(pmix.EventNoActionTaken)
	_, err := c.C.RegisterEventHandler(t.Context(), []pmix.Status{code, pmix.EventProcTerminated}, []pmix.Info{e2e.JobLevel, e2e.EnviroLevel}, func(call *bus.Call, done bus.Done) {
		if !returned.Load() {
			early.Store(true)
		}
		h(call, done)
	})
	returned.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		if n := len(rec.All()); n < 6 {
			return fmt.Errorf("%d of 6 replayed", n)
		}
		return nil
	})
	e2e.CheckRun(t, e2e.Seqs(rec.All()), 0, 5)
	if early.Load() {
		t.Fatal("a replayed event was invoked before the registration call returned")
	}
	// Live events after the replay arrive once, after it.
	if _, err := rm.Notify(t.Context(), code, pmix.RangeLocal, true, e2e.SeqInfo(6)); err != nil {
		t.Fatal(err)
	}
	rec.WaitCount(t, code, 6)
	e2e.CheckRun(t, e2e.Seqs(rec.All()), 0, 6)
	// A second registration replays again, to it alone.
	rec2 := e2e.NewRecorder()
	if _, err := c.C.RegisterEventHandler(t.Context(), []pmix.Status{code}, []pmix.Info{e2e.EnviroLevel}, rec2.Handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	rec2.WaitCount(t, code, 6)
	if got := e2e.Seqs(rec2.All()); len(got) != 6 || got[0] != 0 || got[5] != 6 {
		t.Fatalf("second registration got %v", got)
	}
	if n := len(rec.All()); n != 7 {
		t.Fatalf("the first registration saw %d events, want 7: replay reached it again", n)
	}
}

// TestEventDuringReplayOnce: events notified continuously while a handler
// registers reach it exactly once each and in order — by replay up to some
// point, live after it — never both.
func TestEventDuringReplayOnce(t *testing.T) {
	w := e2e.NewWorld(t)
	const code = pmix.ExternalErrBase - 77
	const total = 400
	rm := w.Agents["a1"]
	c := w.Client("A:jobA.2")
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range total {
			if i == total/4 {
				close(started)
			}
			if _, err := rm.Notify(context.Background(), code, pmix.RangeNamespace, false, append(e2e.SeqInfo(i), pmix.NewInfo(pmix.KeyNspace, pmix.String("jobA")))); err != nil {
				t.Error(err)
				return
			}
		}
	})
	<-started
	rec := e2e.NewRecorder()
	if _, err := c.C.RegisterEventHandler(t.Context(), []pmix.Status{code}, nil, rec.Handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	rec.WaitCount(t, code, total)
	e2e.CheckRun(t, e2e.Seqs(rec.All()), 0, total-1)
}

// TestCacheFlood: ten times the cache size of environment events keep the
// newest 512 and count the evictions; a client registering afterwards gets
// at least those, each once, in order; a job event in the flood is kept for
// the job's client that has not attached yet, and released once it has
// received it.
func TestCacheFlood(t *testing.T) {
	w := e2e.NewWorld(t)
	rm := w.Agents["a1"]
	const env = pmix.EventNodeDown
	const jobCode = pmix.EventProcTerminated
	if err := rm.RegisterJob(t.Context(), agent.Job{Nspace: "late", Session: "s9", Procs: map[pmix.Rank]string{0: "a1"}}); err != nil {
		t.Fatal(err)
	}
	const flood = 10 * 512
	for i := range flood {
		if i == flood/2 {
			if _, err := rm.Notify(t.Context(), jobCode, pmix.RangeNamespace, false, []pmix.Info{pmix.NewInfo(pmix.KeyNspace, pmix.String("late")), pmix.NewInfo("test.seq", pmix.Int64(-1))}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := rm.Notify(t.Context(), env, pmix.RangeLocal, true, e2e.SeqInfo(i)); err != nil {
			t.Fatal(err)
		}
	}
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		s, err := rm.CacheStats(t.Context())
		if err != nil {
			return err
		}
		if s.Msgs != 512 || s.Evicted != flood+1-512 || s.JobMsgs != 1 {
			return fmt.Errorf("cached %d, evicted %d, job events retained %d; want 512, %d, 1", s.Msgs, s.Evicted, s.JobMsgs, flood+1-512)
		}
		return nil
	})

	env0, err := rm.RegisterClient(t.Context(), pmix.Proc{Nspace: "late", Rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	lc, err := client.Init(t.Context(), client.WithEnv(env0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lc.Finalize(context.Background()) })
	envRec, jobRec := e2e.NewRecorder(), e2e.NewRecorder()
	if _, err := lc.RegisterEventHandler(t.Context(), []pmix.Status{env}, []pmix.Info{e2e.EnviroLevel}, envRec.Handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	if _, err := lc.RegisterEventHandler(t.Context(), []pmix.Status{jobCode}, nil, jobRec.Handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	// The cache's last 512, or more: a registration placed while the
	// agent still dispatches the flood takes what follows its place live.
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		if got := e2e.Seqs(envRec.All()); len(got) == 0 || got[len(got)-1] != flood-1 {
			return fmt.Errorf("%d environment events, the last not yet", len(got))
		}
		return nil
	})
	got := e2e.Seqs(envRec.All())
	if got[0] > flood-512 {
		t.Fatalf("the replay began at #%d, after the cache's oldest #%d", got[0], flood-512)
	}
	e2e.CheckRun(t, got, got[0], flood-1)
	jobRec.WaitCount(t, jobCode, 1)
	// Received by every local client of the job: released.
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		s, err := rm.CacheStats(t.Context())
		if err != nil {
			return err
		}
		if s.JobMsgs != 0 {
			return fmt.Errorf("%d job events still retained", s.JobMsgs)
		}
		return nil
	})
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		if rm.Evictions() == 0 {
			return fmt.Errorf("the agent has not counted the evictions yet")
		}
		return nil
	})
}

// TestCacheSurvivesServerRestart: with file storage, the cache outlives a
// restart of the cluster's NATS server.
func TestCacheSurvivesServerRestart(t *testing.T) {
	w := e2e.NewWorld(t)
	const code = pmix.EventNodeOffline
	rm := w.Agents["b1"]
	for i := range 3 {
		if _, err := rm.Notify(t.Context(), code, pmix.RangeLocal, true, e2e.SeqInfo(i)); err != nil {
			t.Fatal(err)
		}
	}
	e2e.WaitCached(t, rm, 3)
	srv := w.MC.Cluster("B").Server(0)
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		if !rm.NATS().IsConnected() {
			return fmt.Errorf("agent not reconnected")
		}
		_, err := rm.CacheStats(t.Context())
		return err
	})
	c := w.Client("B:jobB.0")
	rec := e2e.NewRecorder()
	if _, err := c.C.RegisterEventHandler(t.Context(), []pmix.Status{code}, []pmix.Info{e2e.EnviroLevel}, rec.Handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	rec.WaitCount(t, code, 3)
	e2e.CheckRun(t, e2e.Seqs(rec.All()), 0, 2)
}

// TestCacheWithEmbeddedServer: an agent with its own embedded NATS server
// (no URL) caches and replays the same way, in memory storage here.
func TestCacheWithEmbeddedServer(t *testing.T) {
	dir := e2e.ShortDir(t)
	cfg := agent.DefaultConfig("solo", "n1")
	cfg.StoreDir = filepath.Join(dir, "store")
	cfg.Listen = "unix:" + filepath.Join(dir, "n1.sock")
	cfg.CacheMemory = true
	cfg.CacheSize = 4
	cfg.Logger = clustertest.Logger(t)
	a := e2e.RunAgent(t, cfg)
	if a.Server() == nil {
		t.Fatal("no embedded server")
	}
	if err := a.RegisterJob(t.Context(), agent.Job{Nspace: "j", Procs: map[pmix.Rank]string{0: "n1"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, err := a.Notify(t.Context(), pmix.EventNodeDown, pmix.RangeLocal, true, e2e.SeqInfo(i)); err != nil {
			t.Fatal(err)
		}
	}
	e2e.WaitCached(t, a, 4)
	env, err := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "j", Rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Init(t.Context(), client.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Finalize(context.Background()) })
	rec := e2e.NewRecorder()
	if _, err := c.RegisterEventHandler(t.Context(), []pmix.Status{pmix.EventNodeDown}, []pmix.Info{e2e.EnviroLevel}, rec.Handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	rec.WaitCount(t, pmix.EventNodeDown, 4)
	e2e.CheckRun(t, e2e.Seqs(rec.All()), 2, 5)
}

// TestCustomReplayedOnEveryNode: a CUSTOM event for ranks on two nodes is
// stored once for each node's agent scope, so a late registrant on either
// node has it replayed (and the job-events stream holds a copy for each
// node's retention: event.TestPublishStoresEachScope). It was published
// twice with the same Nats-Msg-Id: the stream kept the first node's copy
// and dropped the other.
func TestCustomReplayedOnEveryNode(t *testing.T) {
	w := e2e.NewWorld(t)
	const code = pmix.ExternalErrBase - 7
	targets := pmix.Procs([]pmix.Proc{{Nspace: "jobA", Rank: 0}, {Nspace: "jobA", Rank: 3}}) // on a1 and a2
	if _, err := w.Agents["a1"].Notify(t.Context(), code, pmix.RangeCustom, false, append(e2e.SeqInfo(1), pmix.NewInfo(pmix.KeyEventCustomRange, targets))); err != nil {
		t.Fatal(err)
	}
	e2e.WaitCached(t, w.Agents["a1"], 2)
	for _, name := range []string{"A:jobA.0", "A:jobA.3"} {
		rec := e2e.NewRecorder()
		if _, err := w.Client(name).C.RegisterEventHandler(t.Context(), []pmix.Status{code}, nil, rec.Handler(pmix.EventNoActionTaken)); err != nil {
			t.Fatal(err)
		}
		rec.WaitCount(t, code, 1)
		e2e.CheckRun(t, e2e.Seqs(rec.All()), 1, 1)
	}
	// Not a target: nothing replayed, though its node has the event.
	rec := e2e.NewRecorder()
	if _, err := w.Client("A:jobA.2").C.RegisterEventHandler(t.Context(), []pmix.Status{code}, nil, rec.Handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Agents["a2"].Notify(t.Context(), code, pmix.RangeCustom, false, append(e2e.SeqInfo(2), pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{{Nspace: "jobA", Rank: 2}})))); err != nil {
		t.Fatal(err)
	}
	rec.WaitCount(t, code, 1)
	e2e.CheckRun(t, e2e.Seqs(rec.All()), 2, 2)
}
