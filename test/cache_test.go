package test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
)

// seqInfo numbers events so a test can check order and uniqueness.
func seqInfo(i int) []pmix.Info { return []pmix.Info{pmix.NewInfo("test.seq", pmix.Int64(int64(i)))} }

func seqOf(d delivery) int {
	v, _ := pmix.LookupValue(d.Info, "test.seq")
	n, _ := v.Int()
	return int(n)
}

func seqs(ds []delivery) []int {
	out := make([]int, len(ds))
	for i, d := range ds {
		out[i] = seqOf(d)
	}
	return out
}

// checkRun fails unless got is exactly from, from+1, …, to.
func checkRun(t *testing.T, got []int, from, to int) {
	t.Helper()
	if len(got) != to-from+1 {
		t.Fatalf("got %d events, want %d (%d..%d): %v; missing %s", len(got), to-from+1, from, to, abbreviate(got), missing(got, from, to))
	}
	for i, s := range got {
		if s != from+i {
			t.Fatalf("event %d is #%d, want #%d: %v", i, s, from+i, abbreviate(got))
		}
	}
}

// missing names the numbers of from..to that got lacks, as ranges.
func missing(got []int, from, to int) string {
	have := map[int]bool{}
	for _, g := range got {
		have[g] = true
	}
	var out []string
	for i := from; i <= to; i++ {
		if have[i] {
			continue
		}
		j := i
		for j+1 <= to && !have[j+1] {
			j++
		}
		if j == i {
			out = append(out, fmt.Sprint(i))
		} else {
			out = append(out, fmt.Sprintf("%d..%d", i, j))
		}
		i = j
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, " ")
}

func abbreviate(s []int) string {
	if len(s) <= 20 {
		return fmt.Sprint(s)
	}
	return fmt.Sprint(s[:10], " … ", s[len(s)-10:])
}

// TestLateRegistrationGetsCachedEvents: events notified before a handler
// exists are replayed to it when it registers, in order, once; the
// registration call returns before the first replayed invocation; events
// marked PMIX_EVENT_DO_NOT_CACHE are not replayed.
func TestLateRegistrationGetsCachedEvents(t *testing.T) {
	w := newWorld(t)
	const code = pmix.EventNodeDown
	rm := w.agents["a2"]
	for i := range 5 {
		if _, err := rm.Notify(t.Context(), code, pmix.RangeLocal, true, seqInfo(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Not cached.
	if _, err := rm.Notify(t.Context(), code, pmix.RangeLocal, true, append(seqInfo(99), pmix.NewInfo(pmix.KeyEventDoNotCache, pmix.Bool(true)))); err != nil {
		t.Fatal(err)
	}
	// A job event for jobA, cached too.
	if _, err := rm.Notify(t.Context(), pmix.EventProcTerminated, pmix.RangeNamespace, false, append(seqInfo(5), pmix.NewInfo(pmix.KeyNspace, pmix.String("jobA")))); err != nil {
		t.Fatal(err)
	}
	waitCached(t, w.agents["a1"], 6)

	c := w.client("A:jobA.3")
	var returned atomic.Bool
	var early atomic.Bool
	rec := newRecorder()
	h := rec.handler(pmix.EventNoActionTaken)
	_, err := c.c.RegisterEventHandler(t.Context(), []pmix.Status{code, pmix.EventProcTerminated}, []pmix.Info{jobLevel, enviroLevel}, func(call *bus.Call, done bus.Done) {
		if !returned.Load() {
			early.Store(true)
		}
		h(call, done)
	})
	returned.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, waitTime, func() error {
		if n := len(rec.all()); n < 6 {
			return fmt.Errorf("%d of 6 replayed", n)
		}
		return nil
	})
	checkRun(t, seqs(rec.all()), 0, 5)
	if early.Load() {
		t.Fatal("a replayed event was invoked before the registration call returned")
	}
	// Live events after the replay arrive once, after it.
	if _, err := rm.Notify(t.Context(), code, pmix.RangeLocal, true, seqInfo(6)); err != nil {
		t.Fatal(err)
	}
	rec.waitCount(t, code, 6)
	checkRun(t, seqs(rec.all()), 0, 6)
	// A second registration replays again, to it alone.
	rec2 := newRecorder()
	if _, err := c.c.RegisterEventHandler(t.Context(), []pmix.Status{code}, []pmix.Info{enviroLevel}, rec2.handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	rec2.waitCount(t, code, 6)
	if got := seqs(rec2.all()); len(got) != 6 || got[0] != 0 || got[5] != 6 {
		t.Fatalf("second registration got %v", got)
	}
	if n := len(rec.all()); n != 7 {
		t.Fatalf("the first registration saw %d events, want 7: replay reached it again", n)
	}
}

func waitCached(t *testing.T, a *agent.Agent, n uint64) {
	t.Helper()
	clustertest.WaitFor(t, waitTime, func() error {
		s, err := a.CacheStats(t.Context())
		if err != nil {
			return err
		}
		if s.Msgs < n {
			return fmt.Errorf("%d of %d events cached", s.Msgs, n)
		}
		return nil
	})
}

// TestEventDuringReplayOnce: events notified continuously while a handler
// registers reach it exactly once each and in order — by replay up to some
// point, live after it — never both.
func TestEventDuringReplayOnce(t *testing.T) {
	w := newWorld(t)
	const code = pmix.ExternalErrBase - 77
	const total = 400
	rm := w.agents["a1"]
	c := w.client("A:jobA.2")
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range total {
			if i == total/4 {
				close(started)
			}
			if _, err := rm.Notify(context.Background(), code, pmix.RangeNamespace, false, append(seqInfo(i), pmix.NewInfo(pmix.KeyNspace, pmix.String("jobA")))); err != nil {
				t.Error(err)
				return
			}
		}
	})
	<-started
	rec := newRecorder()
	if _, err := c.c.RegisterEventHandler(t.Context(), []pmix.Status{code}, nil, rec.handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	rec.waitCount(t, code, total)
	checkRun(t, seqs(rec.all()), 0, total-1)
}

// TestCacheFlood: ten times the cache size of environment events keep the
// newest 512 and count the evictions; a client registering afterwards gets
// at least those, each once, in order; a job event in the flood is kept for
// the job's client that has not attached yet, and released once it has
// received it.
func TestCacheFlood(t *testing.T) {
	w := newWorld(t)
	rm := w.agents["a1"]
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
		if _, err := rm.Notify(t.Context(), env, pmix.RangeLocal, true, seqInfo(i)); err != nil {
			t.Fatal(err)
		}
	}
	clustertest.WaitFor(t, waitTime, func() error {
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
	envRec, jobRec := newRecorder(), newRecorder()
	if _, err := lc.RegisterEventHandler(t.Context(), []pmix.Status{env}, []pmix.Info{enviroLevel}, envRec.handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	if _, err := lc.RegisterEventHandler(t.Context(), []pmix.Status{jobCode}, nil, jobRec.handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	// The cache's last 512, or more: a registration placed while the
	// agent still dispatches the flood takes what follows its place live.
	clustertest.WaitFor(t, waitTime, func() error {
		if got := seqs(envRec.all()); len(got) == 0 || got[len(got)-1] != flood-1 {
			return fmt.Errorf("%d environment events, the last not yet", len(got))
		}
		return nil
	})
	got := seqs(envRec.all())
	if got[0] > flood-512 {
		t.Fatalf("the replay began at #%d, after the cache's oldest #%d", got[0], flood-512)
	}
	checkRun(t, got, got[0], flood-1)
	jobRec.waitCount(t, jobCode, 1)
	// Received by every local client of the job: released.
	clustertest.WaitFor(t, waitTime, func() error {
		s, err := rm.CacheStats(t.Context())
		if err != nil {
			return err
		}
		if s.JobMsgs != 0 {
			return fmt.Errorf("%d job events still retained", s.JobMsgs)
		}
		return nil
	})
	clustertest.WaitFor(t, waitTime, func() error {
		if rm.Evictions() == 0 {
			return fmt.Errorf("the agent has not counted the evictions yet")
		}
		return nil
	})
}

// TestCacheSurvivesServerRestart: with file storage, the cache outlives a
// restart of the cluster's NATS server.
func TestCacheSurvivesServerRestart(t *testing.T) {
	w := newWorld(t)
	const code = pmix.EventNodeOffline
	rm := w.agents["b1"]
	for i := range 3 {
		if _, err := rm.Notify(t.Context(), code, pmix.RangeLocal, true, seqInfo(i)); err != nil {
			t.Fatal(err)
		}
	}
	waitCached(t, rm, 3)
	srv := w.mc.Cluster("B").Server(0)
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, waitTime, func() error {
		if !rm.NATS().IsConnected() {
			return fmt.Errorf("agent not reconnected")
		}
		_, err := rm.CacheStats(t.Context())
		return err
	})
	c := w.client("B:jobB.0")
	rec := newRecorder()
	if _, err := c.c.RegisterEventHandler(t.Context(), []pmix.Status{code}, []pmix.Info{enviroLevel}, rec.handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	rec.waitCount(t, code, 3)
	checkRun(t, seqs(rec.all()), 0, 2)
}

// TestCacheWithEmbeddedServer: an agent with its own embedded NATS server
// (no URL) caches and replays the same way, in memory storage here.
func TestCacheWithEmbeddedServer(t *testing.T) {
	dir := shortDir(t)
	cfg := agent.DefaultConfig("solo", "n1")
	cfg.StoreDir = filepath.Join(dir, "store")
	cfg.Listen = "unix:" + filepath.Join(dir, "n1.sock")
	cfg.CacheMemory = true
	cfg.CacheSize = 4
	cfg.Logger = clustertest.Logger(t)
	a := runAgent(t, cfg)
	if a.Server() == nil {
		t.Fatal("no embedded server")
	}
	if err := a.RegisterJob(t.Context(), agent.Job{Nspace: "j", Procs: map[pmix.Rank]string{0: "n1"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, err := a.Notify(t.Context(), pmix.EventNodeDown, pmix.RangeLocal, true, seqInfo(i)); err != nil {
			t.Fatal(err)
		}
	}
	waitCached(t, a, 4)
	env, err := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "j", Rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Init(t.Context(), client.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Finalize(context.Background()) })
	rec := newRecorder()
	if _, err := c.RegisterEventHandler(t.Context(), []pmix.Status{pmix.EventNodeDown}, []pmix.Info{enviroLevel}, rec.handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	rec.waitCount(t, pmix.EventNodeDown, 4)
	checkRun(t, seqs(rec.all()), 2, 5)
}

// TestCustomReplayedOnEveryNode: a CUSTOM event for ranks on two nodes is
// stored once for each node's agent scope, so a late registrant on either
// node has it replayed (and the job-events stream holds a copy for each
// node's retention: event.TestPublishStoresEachScope). It was published
// twice with the same Nats-Msg-Id: the stream kept the first node's copy
// and dropped the other.
func TestCustomReplayedOnEveryNode(t *testing.T) {
	w := newWorld(t)
	const code = pmix.ExternalErrBase - 7
	targets := pmix.Procs([]pmix.Proc{{Nspace: "jobA", Rank: 0}, {Nspace: "jobA", Rank: 3}}) // on a1 and a2
	if _, err := w.agents["a1"].Notify(t.Context(), code, pmix.RangeCustom, false, append(seqInfo(1), pmix.NewInfo(pmix.KeyEventCustomRange, targets))); err != nil {
		t.Fatal(err)
	}
	waitCached(t, w.agents["a1"], 2)
	for _, name := range []string{"A:jobA.0", "A:jobA.3"} {
		rec := newRecorder()
		if _, err := w.client(name).c.RegisterEventHandler(t.Context(), []pmix.Status{code}, nil, rec.handler(pmix.EventNoActionTaken)); err != nil {
			t.Fatal(err)
		}
		rec.waitCount(t, code, 1)
		checkRun(t, seqs(rec.all()), 1, 1)
	}
	// Not a target: nothing replayed, though its node has the event.
	rec := newRecorder()
	if _, err := w.client("A:jobA.2").c.RegisterEventHandler(t.Context(), []pmix.Status{code}, nil, rec.handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.agents["a2"].Notify(t.Context(), code, pmix.RangeCustom, false, append(seqInfo(2), pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{{Nspace: "jobA", Rank: 2}})))); err != nil {
		t.Fatal(err)
	}
	rec.waitCount(t, code, 1)
	checkRun(t, seqs(rec.all()), 2, 2)
}
