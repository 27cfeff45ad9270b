package exchange

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/collective"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
)

// collSpec is two clusters of two agents each:
//
//	A: a1: jobA.0 jobA.1 big.0,2,…   a2: jobA.2 jobA.3 big.1,3,…
//	B: b1: jobB.0 jobB.1             b2: jobB.2
func collSpec() agenttest.Spec {
	var big []string
	for r := range 16 {
		big = append(big, []string{"a1", "a2"}[r%2])
	}
	return agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A", Nodes: []string{"a1", "a2"}}, {ID: "B", Nodes: []string{"b1", "b2"}}},
		Jobs: []agenttest.Job{
			{Cluster: "A", Nspace: "jobA", Nodes: []string{"a1", "a1", "a2", "a2"},
				Info: []pmix.Info{pmix.NewInfo(pmix.KeyJobSize, pmix.Uint32(4))}},
			{Cluster: "A", Nspace: "big", Nodes: big},
			{Cluster: "B", Nspace: "jobB", Nodes: []string{"b1", "b1", "b2"},
				Info: []pmix.Info{pmix.NewInfo(pmix.KeyJobSize, pmix.Uint32(3))}},
		},
		Agent: func(c *agent.Config) { c.HandlerTimeout = 10 * time.Second },
	}
}

var (
	jobA = pmix.Proc{Nspace: "jobA", Rank: pmix.RankWildcard}
	jobB = pmix.Proc{Nspace: "jobB", Rank: pmix.RankWildcard}
)

// fenceAll calls Fence from each named client at once, each with the
// procs procsOf gives it, and returns each one's error.
func fenceAll(t *testing.T, w *agenttest.World, names []string, procsOf func(name string) []pmix.Proc, info []pmix.Info) map[string]error {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[string]error{}
	ctx, cancel := context.WithTimeout(t.Context(), e2e.WaitTime)
	defer cancel()
	for _, n := range names {
		c := w.Client(n)
		if c == nil {
			t.Fatalf("no client %s", n)
		}
		wg.Go(func() {
			err := c.Fence(ctx, procsOf(n), info)
			mu.Lock()
			out[n] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func mustFence(t *testing.T, w *agenttest.World, names []string, procsOf func(string) []pmix.Proc, info ...pmix.Info) {
	t.Helper()
	for n, err := range fenceAll(t, w, names, procsOf, info) {
		if err != nil {
			t.Fatalf("%s: fence: %v", n, err)
		}
	}
}

func same(procs ...pmix.Proc) func(string) []pmix.Proc {
	return func(string) []pmix.Proc { return procs }
}

// bothJobs names A's jobA and B's jobB as a client of either cluster does:
// its own job unqualified, the other "cluster:nspace".
func bothJobs(name string) []pmix.Proc {
	if strings.HasPrefix(name, "A:") {
		return []pmix.Proc{jobA, {Nspace: "B:jobB", Rank: pmix.RankWildcard}}
	}
	return []pmix.Proc{{Nspace: "A:jobA", Rank: pmix.RankWildcard}, jobB}
}

var (
	namesA    = []string{"A:jobA.0", "A:jobA.1", "A:jobA.2", "A:jobA.3"}
	namesB    = []string{"B:jobB.0", "B:jobB.1", "B:jobB.2"}
	namesBoth = append(append([]string{}, namesA...), namesB...)
	collect   = pmix.NewInfo(pmix.KeyCollectData, pmix.Bool(true))
	timeout1  = pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(1))
)

// TestFenceExchangesDataAcrossAgentsAndClusters: every proc of two jobs on
// two clusters puts, commits and fences with PMIX_COLLECT_DATA; each then
// gets every other's values, as their scopes allow.
func TestFenceExchangesDataAcrossAgentsAndClusters(t *testing.T) {
	w := agenttest.Start(t, collSpec())
	ctx := t.Context()
	for _, n := range namesBoth {
		c := w.Client(n)
		for _, put := range []struct {
			scope pmix.Scope
			key   string
		}{{pmix.ScopeGlobal, "g"}, {pmix.ScopeLocal, "l"}, {pmix.ScopeRemote, "r"}, {pmix.ScopeInternal, "i"}} {
			if err := c.Put(put.scope, put.key, pmix.String(n)); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Commit(ctx); err != nil {
			t.Fatalf("%s: commit: %v", n, err)
		}
	}
	mustFence(t, w, namesBoth, bothJobs, collect)

	a0 := w.Client("A:jobA.0") // on a1
	for _, tc := range []struct {
		peer pmix.Proc
		key  string
		want string // "" : PMIX_ERR_NOT_FOUND
	}{
		{pmix.Proc{Nspace: "B:jobB", Rank: 2}, "g", "B:jobB.2"}, // another cluster
		{pmix.Proc{Nspace: "B:jobB", Rank: 2}, "r", "B:jobB.2"},
		{pmix.Proc{Nspace: "B:jobB", Rank: 2}, "l", ""},
		{pmix.Proc{Nspace: "jobA", Rank: 3}, "g", "A:jobA.3"}, // another agent
		{pmix.Proc{Nspace: "A:jobA", Rank: 3}, "r", "A:jobA.3"},
		{pmix.Proc{Nspace: "jobA", Rank: 1}, "l", "A:jobA.1"}, // the same agent
		{pmix.Proc{Nspace: "jobA", Rank: 1}, "r", ""},
		// Never leaves its process: a get would wait for ever (direct
		// modex) but with PMIX_IMMEDIATE.
		{pmix.Proc{Nspace: "jobA", Rank: 1}, "i", ""},
		{pmix.Proc{Nspace: "jobA", Rank: 0}, "i", "A:jobA.0"}, // but it reads its own
		{pmix.Proc{Nspace: "B:jobB", Rank: 0}, "no such key", ""},
	} {
		var info []pmix.Info
		if tc.key == "i" || tc.key == "no such key" {
			info = []pmix.Info{pmix.NewInfo(pmix.KeyImmediate, pmix.Bool(true))}
		}
		v, err := a0.Get(ctx, tc.peer, tc.key, info)
		if tc.want == "" {
			if !errors.Is(err, pmix.ErrNotFound) {
				t.Errorf("get %s of %v: %v, %v; want PMIX_ERR_NOT_FOUND", tc.key, tc.peer, v, err)
			}
			continue
		}
		if s, _ := v.Str(); err != nil || s != tc.want {
			t.Errorf("get %s of %v: %v, %v; want %q", tc.key, tc.peer, v, err, tc.want)
		}
	}
	// From B, A's values.
	v, err := w.Client("B:jobB.1").Get(ctx, pmix.Proc{Nspace: "A:jobA", Rank: 2}, "g", nil)
	if s, _ := v.Str(); err != nil || s != "A:jobA.2" {
		t.Errorf("B gets A:jobA.2's g: %v, %v", v, err)
	}
	// Job-level info, from the agent and (PMIX_OPTIONAL) from the client's own store.
	for _, info := range [][]pmix.Info{nil, {pmix.NewInfo(pmix.KeyOptional, pmix.Bool(true))}} {
		v, err = w.Client("A:jobA.2").Get(ctx, jobA, pmix.KeyJobSize, info)
		if err != nil || !v.Equal(pmix.Uint32(4)) {
			t.Errorf("get %s of jobA (%v): %v, %v", pmix.KeyJobSize, info, v, err)
		}
	}
}

// TestGetDirectives: PMIX_OPTIONAL looks in the process only,
// PMIX_IMMEDIATE does not wait, PMIX_TIMEOUT waits for a commit.
func TestGetDirectives(t *testing.T) {
	w := agenttest.Start(t, collSpec())
	ctx := t.Context()
	a0, a1 := w.Client("A:jobA.0"), w.Client("A:jobA.1") // both on a1
	peer := pmix.Proc{Nspace: "jobA", Rank: 1}
	if err := a1.Put(pmix.ScopeLocal, "k", pmix.Int64(7)); err != nil {
		t.Fatal(err)
	}
	if _, err := a0.Get(ctx, peer, "k", []pmix.Info{pmix.NewInfo(pmix.KeyImmediate, pmix.Bool(true))}); !errors.Is(err, pmix.ErrNotFound) {
		t.Fatalf("before commit, PMIX_IMMEDIATE: %v, want PMIX_ERR_NOT_FOUND", err)
	}
	got := make(chan error, 1)
	go func() {
		v, err := a0.Get(ctx, peer, "k", []pmix.Info{pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(20))})
		if err == nil && !v.Equal(pmix.Int64(7)) {
			err = fmt.Errorf("got %v", v)
		}
		got <- err
	}()
	if err := a1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("get waiting for a commit: %v", err)
	}
	if _, err := a0.Get(ctx, peer, "k", []pmix.Info{pmix.NewInfo(pmix.KeyOptional, pmix.Bool(true))}); !errors.Is(err, pmix.ErrNotFound) {
		t.Fatalf("PMIX_OPTIONAL of a peer's key: %v, want PMIX_ERR_NOT_FOUND", err)
	}
	for _, p := range []pmix.Proc{peer, {Nspace: "jobA", Rank: 3}, {Nspace: "B:jobB", Rank: 2}} {
		start := time.Now()
		if _, err := a0.Get(ctx, p, "never", []pmix.Info{timeout1}); !errors.Is(err, pmix.ErrTimeout) {
			t.Fatalf("get of a key %v never committed, PMIX_TIMEOUT 1: %v, want PMIX_ERR_TIMEOUT", p, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("PMIX_TIMEOUT 1 took %v", d)
		}
	}
}

// TestGetWithoutFence: without a collecting fence, a get of a value of a
// proc of another agent, of this cluster or another, fetches it from that
// agent ("direct modex"), waiting for its commit with no PMIX_TIMEOUT as
// with one; PMIX_OPTIONAL does not wait.
func TestGetWithoutFence(t *testing.T) {
	w := agenttest.Start(t, collSpec())
	ctx := t.Context()
	a0 := w.Client("A:jobA.0") // on a1
	for _, tc := range []struct {
		name string
		peer pmix.Proc
	}{{"B:jobB.2", pmix.Proc{Nspace: "B:jobB", Rank: 2}}, {"A:jobA.3", pmix.Proc{Nspace: "jobA", Rank: 3}}} {
		c := w.Client(tc.name)
		optional := []pmix.Info{pmix.NewInfo(pmix.KeyOptional, pmix.Bool(true))}
		if _, err := a0.Get(ctx, tc.peer, "k", optional); !errors.Is(err, pmix.ErrNotFound) {
			t.Fatalf("PMIX_OPTIONAL get of %s's k before it put any: %v, want PMIX_ERR_NOT_FOUND", tc.name, err)
		}
		got := make(chan error, 1)
		go func() {
			v, err := a0.Get(ctx, tc.peer, "k", nil)
			if s, _ := v.Str(); err == nil && s != tc.name {
				err = fmt.Errorf("got %v", v)
			}
			got <- err
		}()
		if err := c.Put(pmix.ScopeRemote, "k", pmix.String(tc.name)); err != nil {
			t.Fatal(err)
		}
		if err := c.Put(pmix.ScopeLocal, "l", pmix.String(tc.name)); err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("get of %s's k, waiting for its commit: %v", tc.name, err)
		}
		if _, err := a0.Get(ctx, tc.peer, "l", nil); !errors.Is(err, pmix.ErrNotFound) {
			t.Fatalf("get of %s's LOCAL value from another node: %v, want PMIX_ERR_NOT_FOUND", tc.name, err)
		}
	}
}

// TestFenceSubsetsAndIDs: a fence of two procs on two agents; two
// concurrent fences of the same procs told apart by their ids; and the
// same fence again, which is a new operation.
func TestFenceSubsetsAndIDs(t *testing.T) {
	w := agenttest.Start(t, collSpec())
	pair := []string{"A:jobA.1", "A:jobA.2"}
	sub := same(pmix.Proc{Nspace: "jobA", Rank: 1}, pmix.Proc{Nspace: "jobA", Rank: 2})
	mustFence(t, w, pair, sub)
	var wg sync.WaitGroup
	for _, id := range []string{"x", "y", "z"} {
		wg.Go(func() {
			for n, err := range fenceAll(t, w, pair, sub, []pmix.Info{pmix.NewInfo(pmix.KeyCollectiveID, pmix.String(id))}) {
				if err != nil {
					t.Errorf("fence %s at %s: %v", id, n, err)
				}
			}
		})
	}
	wg.Wait()
	mustFence(t, w, pair, sub)
	// A subset across clusters.
	mustFence(t, w, []string{"A:jobA.3", "B:jobB.0"}, func(n string) []pmix.Proc {
		if strings.HasPrefix(n, "A:") {
			return []pmix.Proc{{Nspace: "jobA", Rank: 3}, {Nspace: "B:jobB", Rank: 0}}
		}
		return []pmix.Proc{{Nspace: "A:jobA", Rank: 3}, {Nspace: "jobB", Rank: 0}}
	})
}

// TestFenceTimeoutReachesEveryone: a participant that never arrives fails
// the fence for all the others with PMIX_ERR_TIMEOUT naming it, on both
// clusters, within the timeout and not a hang; calling late then is an
// error at once.
func TestFenceTimeoutReachesEveryone(t *testing.T) {
	w := agenttest.Start(t, collSpec())
	arrived := []string{"A:jobA.0", "A:jobA.1", "A:jobA.2", "B:jobB.0", "B:jobB.1", "B:jobB.2"} // not A:jobA.3
	start := time.Now()
	for n, err := range fenceAll(t, w, arrived, bothJobs, []pmix.Info{pmix.NewInfo(pmix.KeyTimeout, pmix.Uint32(1))}) {
		if !errors.Is(err, pmix.ErrTimeout) {
			t.Errorf("%s: %v, want PMIX_ERR_TIMEOUT", n, err)
			continue
		}
		if !strings.Contains(err.Error(), "A:jobA.{3}") {
			t.Errorf("%s: %v; want it to name A:jobA.3", n, err)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the timed out fence took %v", d)
	}
	err := w.Client("A:jobA.3").Fence(t.Context(), bothJobs("A:jobA.3"), []pmix.Info{timeout1})
	if !errors.Is(err, collective.ErrFinished) {
		t.Errorf("latecomer: %v, want %v", err, collective.ErrFinished)
	}
}

// TestFenceMessagesGrowWithAgents: on the collective subjects a fence
// sends one contribution per agent and one release, and across clusters
// one release check per agent of the other cluster: as many for 16
// procs as for 4 on the same two agents.
func TestFenceMessagesGrowWithAgents(t *testing.T) {
	w := agenttest.Start(t, collSpec())
	nc := w.Agent("a2").NATS() // an agent's: it may subscribe to pmix.> where NATS is secured
	var count, marks atomic.Int64
	const mark = collective.Prefix + ".x.mark"
	sub, err := nc.Subscribe(collective.Prefix+".>", func(m *nats.Msg) {
		if m.Subject == mark {
			marks.Add(1)
			return
		}
		count.Add(1)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// B's agents see A's coordinator and this counter before counting: a
	// contribution sent before its coordinator's interest crossed the leaf
	// link is sent again, and would count twice.
	for _, s := range []string{collective.LeadSubject("A", "jobA"), collective.Prefix + ".x"} {
		if err := w.WaitInterest(t.Context(), "B", s); err != nil {
			t.Fatal(err)
		}
	}
	var big []string
	for r := range 16 {
		big = append(big, fmt.Sprintf("A:big.%d", r))
	}
	for _, tc := range []struct {
		name   string
		names  []string
		procs  func(string) []pmix.Proc
		agents int
		remote int // agents of another cluster than the coordinator's
	}{
		{"4 procs on 2 agents", namesA, same(jobA), 2, 0},
		{"16 procs on 2 agents", big, same(pmix.Proc{Nspace: "big", Rank: pmix.RankWildcard}), 2, 0},
		{"7 procs on 4 agents in 2 clusters", namesBoth, bothJobs, 4, 2},
	} {
		// The first operation its coordinator sees of an nspace also asks
		// once for its terminations (collective.AskSubject): count the
		// next, once the coordinator's mark, published after its release,
		// arrived.
		mustFence(t, w, tc.names, tc.procs, collect)
		wantMarks := marks.Load() + 1
		if err := w.Agent("a1").NATS().Publish(mark, nil); err != nil {
			t.Fatal(err)
		}
		clustertest.WaitFor(t, e2e.WaitTime, func() error {
			if marks.Load() < wantMarks {
				return errors.New("the mark has not arrived")
			}
			return nil
		})
		count.Store(0)
		mustFence(t, w, tc.names, tc.procs, collect)
		want := int64(tc.agents + 1 + tc.remote)
		clustertest.WaitFor(t, e2e.WaitTime, func() error {
			if n := count.Load(); n != want {
				return fmt.Errorf("%s: %d messages, want %d (one per agent, one release, one release check per agent of another cluster)", tc.name, n, want)
			}
			return nil
		})
	}
}

var _ = client.Init // the tests drive clients that agenttest attached

// TestConnectAcrossClusters: RFC0003's connect of two jobs on two
// clusters gives every member the same new "cluster:nspace" and distinct
// ranks covering 0..N-1, in the order of the sorted membership; a connect
// within one cluster gives an nspace of that cluster; XCHG_ONLY none.
func TestConnectAcrossClusters(t *testing.T) {
	w := agenttest.Start(t, collSpec())
	ctx, cancel := context.WithTimeout(t.Context(), e2e.WaitTime)
	defer cancel()
	reports := make(chan agent.ConnectReport, 100)
	w.Agent("b2").OnConnect(func(r agent.ConnectReport) { reports <- r })
	remoteSize := func() (pmix.Value, error) {
		return w.Client("A:jobA.1").Get(ctx, pmix.Proc{Nspace: "B:jobB", Rank: pmix.RankWildcard}, pmix.KeyJobSize, nil)
	}
	if _, err := remoteSize(); !errors.Is(err, pmix.ErrNotFound) {
		t.Fatalf("B:jobB's job size before the connect: %v, want PMIX_ERR_NOT_FOUND", err)
	}
	res := e2e.ConnectAll(t, w, namesBoth, bothJobs, pmix.NewInfo(pmix.KeyConnectID, pmix.String("myconnect")))
	// The host of b2 (B:jobB.2) saw its process connect.
	if r := <-reports; r.Proc != (pmix.Proc{Nspace: "jobB", Rank: 2}) || r.Nspace != res["B:jobB.2"].Nspace || r.Rank != 6 || len(r.Members) != 7 || r.Disconnect {
		t.Errorf("b2's report: %+v", r)
	}
	// Every member has the other nspaces' job-level info (RFC0003).
	if v, err := remoteSize(); err != nil || !v.Equal(pmix.Uint32(3)) {
		t.Errorf("B:jobB's job size at A:jobA.1 after the connect: %v, %v", v, err)
	}
	if v, err := w.Client("B:jobB.2").Get(ctx, pmix.Proc{Nspace: "A:jobA", Rank: pmix.RankWildcard}, pmix.KeyJobSize, nil); err != nil || !v.Equal(pmix.Uint32(4)) {
		t.Errorf("A:jobA's job size at B:jobB.2 after the connect: %v, %v", v, err)
	}
	nspace := res[namesBoth[0]].Nspace
	if !strings.HasPrefix(nspace, "A:cnct.") {
		t.Fatalf("new nspace %q: want A:cnct.… (the coordinator's cluster, members on two)", nspace)
	}
	for i, n := range namesBoth { // A:jobA.0…3, then B:jobB.0…2: the sorted membership
		if g := res[n]; g.Err != nil || g.Nspace != nspace || g.Rank != pmix.Rank(i) {
			t.Errorf("%s: %q rank %v, %v; want %q rank %d", n, g.Nspace, g.Rank, g.Err, nspace, i)
		}
	}
	// The new nspace is the group's: a fence on it is a fence of its
	// members, and its ranks name them.
	for _, n := range namesBoth {
		if err := w.Client(n).Put(pmix.ScopeGlobal, "who", pmix.String(n)); err != nil {
			t.Fatal(err)
		}
		if err := w.Client(n).Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mustFence(t, w, namesBoth, same(pmix.Proc{Nspace: nspace, Rank: pmix.RankWildcard}), collect)
	for rank, n := range namesBoth {
		v, err := w.Client("B:jobB.0").Get(ctx, pmix.Proc{Nspace: nspace, Rank: pmix.Rank(rank)}, "who", []pmix.Info{pmix.NewInfo(pmix.KeyImmediate, pmix.Bool(true))})
		if s, _ := v.Str(); err != nil || s != n {
			t.Errorf("get who of %s.%d: %v, %v; want %s", nspace, rank, v, err, n)
		}
	}
	// The same procs and id again: another operation, another nspace.
	again := e2e.ConnectAll(t, w, namesBoth, bothJobs, pmix.NewInfo(pmix.KeyConnectID, pmix.String("myconnect")))
	if g := again[namesA[0]]; g.Err != nil || g.Nspace == nspace {
		t.Errorf("second connect: %q, %v; want a new nspace", g.Nspace, g.Err)
	}
	one := e2e.ConnectAll(t, w, namesA, same(jobA))
	if g := one[namesA[2]]; g.Err != nil || !strings.HasPrefix(g.Nspace, "cnct.") || g.Rank != 2 {
		t.Errorf("connect within A: %q rank %v, %v; want cnct.… rank 2", g.Nspace, g.Rank, g.Err)
	}
	xchg := e2e.ConnectAll(t, w, namesA, same(jobA), pmix.NewInfo(pmix.KeyConnectXchgOnly, pmix.Bool(true)))
	if g := xchg[namesA[1]]; g.Err != nil || g.Nspace != "" || g.Rank != pmix.RankUndef {
		t.Errorf("XCHG_ONLY: %q rank %v, %v; want no nspace", g.Nspace, g.Rank, g.Err)
	}
	// Disconnect: every member leaves; then the nspace names nothing.
	var wg sync.WaitGroup
	for _, n := range namesBoth {
		wg.Go(func() {
			if err := w.Client(n).Disconnect(ctx, nspace, nil); err != nil {
				t.Errorf("%s: disconnect of %s: %v", n, nspace, err)
			}
		})
	}
	wg.Wait()
	for seen := false; !seen; {
		select {
		case r := <-reports:
			if seen = r.Disconnect; seen && (r.Nspace != nspace || r.Proc.Rank != 2) {
				t.Errorf("b2's disconnect report: %+v", r)
			}
		case <-ctx.Done():
			t.Fatal("b2's host got no disconnect report")
		}
	}
	if err := w.Client("B:jobB.1").Disconnect(ctx, nspace, nil); !errors.Is(err, pmix.ErrInvalidNamespace) {
		t.Errorf("disconnect again: %v, want PMIX_ERR_INVALID_NAMESPACE", err)
	}
	if err := w.Client("B:jobB.1").Disconnect(ctx, one[namesA[0]].Nspace, nil); !errors.Is(err, pmix.ErrInvalidNamespace) {
		t.Errorf("disconnect of a group B:jobB.1 is not in: %v, want PMIX_ERR_INVALID_NAMESPACE", err)
	}
	if err := w.Client("A:jobA.0").Fence(ctx, []pmix.Proc{{Nspace: nspace, Rank: pmix.RankWildcard}}, nil); !errors.Is(err, pmix.ErrBadParam) {
		t.Errorf("fence on a disconnected nspace: %v, want PMIX_ERR_BAD_PARAM", err)
	}
}

// TestFenceWithoutCoordinator: when the coordinator's agent is down, a
// fence with a timeout still ends, with PMIX_ERR_TIMEOUT, at every
// participant.
func TestFenceWithoutCoordinator(t *testing.T) {
	spec := collSpec()
	spec.Jobs = spec.Jobs[:1] // jobA only: its clients on a1 are the ones below
	w := agenttest.Start(t, spec)
	sctx, cancel := context.WithTimeout(t.Context(), e2e.WaitTime)
	defer cancel()
	// A request from each of a1's clients first: agent/conn.go sets a
	// connection's logger after answering hello, unsynchronized with a
	// Shutdown that closes the connection at once (a data race of its own).
	for _, n := range []string{"A:jobA.0", "A:jobA.1"} {
		_, _ = w.Client(n).Get(sctx, pmix.Proc{Nspace: "jobA", Rank: 3}, "none", []pmix.Info{pmix.NewInfo(pmix.KeyImmediate, pmix.Bool(true))})
	}
	if err := w.Agent("a1").Shutdown(sctx); err != nil { // hosts jobA.0: coordinates jobA's collectives
		t.Fatal(err)
	}
	// A fence of the whole job, from its ranks on a2: a fence of a2's
	// ranks alone would be decided by a2, with no coordinator.
	pair := []string{"A:jobA.2", "A:jobA.3"} // both on a2
	start := time.Now()
	for n, err := range fenceAll(t, w, pair, same(pmix.Proc{Nspace: "jobA", Rank: pmix.RankWildcard}), []pmix.Info{timeout1}) {
		if !errors.Is(err, pmix.ErrTimeout) || !strings.Contains(err.Error(), "coordinator") {
			t.Errorf("%s: %v, want PMIX_ERR_TIMEOUT saying the coordinator was not heard from", n, err)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestGetEndsWithPeerOrFinalize: a get waiting for a key with no
// PMIX_TIMEOUT ends with PMIX_ERR_NOT_FOUND when the proc terminates
// without committing it, of another agent of this cluster or of another
// cluster; and a Finalize of the waiting process is not held up by it.
func TestGetEndsWithPeerOrFinalize(t *testing.T) {
	w := agenttest.Start(t, collSpec())
	ctx := t.Context()
	a0 := w.Client("A:jobA.0") // on a1
	for _, tc := range []struct {
		node string
		peer pmix.Proc
	}{{"a2", pmix.Proc{Nspace: "jobA", Rank: 3}}, {"b2", pmix.Proc{Nspace: "B:jobB", Rank: 2}}} {
		got := make(chan error, 1)
		go func() {
			_, err := a0.Get(ctx, tc.peer, "never", nil)
			got <- err
		}()
		_, ns, _ := cluster.Split(tc.peer.Nspace)
		if err := w.Agent(tc.node).ProcTerminated(ctx, pmix.Proc{Nspace: ns, Rank: tc.peer.Rank}, true); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if !errors.Is(err, pmix.ErrNotFound) || !strings.Contains(err.Error(), "terminated") {
				t.Errorf("get of a key %v never committed, %v terminated: %v, want PMIX_ERR_NOT_FOUND saying so", tc.peer, tc.peer, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("get of a key of %v still waiting a minute after it terminated", tc.peer)
		}
	}
	a1 := w.Client("A:jobA.1")
	got := make(chan error, 1)
	go func() {
		_, err := a1.Get(ctx, pmix.Proc{Nspace: "jobA", Rank: 2}, "never", nil)
		got <- err
	}()
	done := make(chan error, 1)
	go func() { done <- a1.Finalize(ctx) }()
	for _, ch := range []chan error{done, got} {
		select {
		case <-ch:
		case <-time.After(time.Minute):
			t.Fatal("Finalize, or the get it interrupted, still waiting after a minute")
		}
	}
}

// TestDataArraysAcrossAgents: data arrays of other element types than
// info and proc (pmix.Array) put by one process are read by processes of
// another agent and another cluster as they were put, nested ones too.
func TestDataArraysAcrossAgents(t *testing.T) {
	w := agenttest.Start(t, collSpec())
	ctx := t.Context()
	arrays := map[string]pmix.Value{
		"sizes":   pmix.Array(4, []pmix.Value{pmix.Uint64(0), pmix.Uint64(1 << 40)}), // PMIX_SIZE
		"strings": pmix.Array(3, []pmix.Value{pmix.String("a"), pmix.String("")}),
		"bytes":   pmix.Array(27, []pmix.Value{pmix.Bytes([]byte{0, 1}), pmix.Bytes(nil)}),
		"values": pmix.Array(pmix.ElemValue, []pmix.Value{pmix.String("x"), pmix.Float64(2.5),
			pmix.Array(14, []pmix.Value{pmix.Uint32(7)})}),
		"empty": pmix.Array(13, nil),
	}
	c := w.Client("A:jobA.0")
	for k, v := range arrays {
		if err := c.Put(pmix.ScopeGlobal, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, reader := range []string{"A:jobA.3", "B:jobB.1"} {
		for k, want := range arrays {
			got, err := w.Client(reader).Get(ctx, pmix.Proc{Nspace: "A:jobA", Rank: 0}, k, nil)
			if err != nil || !got.Equal(want) {
				t.Errorf("%s gets %s: %v, %v; want %v", reader, k, got, err, want)
			}
		}
	}
}
