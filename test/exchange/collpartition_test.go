package exchange

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/collective"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
)

// TestCollectiveAcrossCut: a connect, and a fence, of A's jobA and B's
// jobB (coordinated in A), with B's leaf links cut after B's agents and
// a1 contributed and before the last contribution (a2's, A:jobA.3's
// arrival). Cut for good: every participant, on both sides, fails with
// the collective's PMIX_ERR_TIMEOUT, within the timeout (and the grace),
// and nobody completes. Healed before the timeout: every participant
// completes, a connect with the same new nspace on both sides. Healed
// after B's agents gave up (B's participants gave a shorter timeout than
// A's): B's agents say so when the coordinator asks, and A's participants
// fail as B's did, at once, not at their own timeout.
func TestCollectiveAcrossCut(t *testing.T) {
	w := agenttest.Start(t, collSpec())
	mc := w.MultiCluster()
	cw := watchColl(t, w, "a2") // what the coordinator (a1, jobA's rank 0) is sent and asks
	early := slices.DeleteFunc(slices.Clone(namesBoth), func(n string) bool { return n == "A:jobA.3" })
	const (
		never  = iota
		healed // before the timeout
		gaveUp // healed once B's agents gave up
	)
	for i, tc := range []struct {
		kind     string
		heal     int
		timeout  uint32 // PMIX_TIMEOUT, seconds
		timeoutB uint32 // B's participants'
	}{
		{"connect", never, 2, 2},
		{"connect", healed, 15, 15},
		{"connect", gaveUp, 15, 1},
		{"fence", never, 2, 2},
		{"fence", healed, 15, 15},
	} {
		name := tc.kind + []string{", cut for good", ", healed", ", healed after B gave up"}[tc.heal]
		t.Run(name, func(t *testing.T) {
			cw.reset()
			id := fmt.Sprintf("cut%d", i)
			infoOf := func(n string) []pmix.Info {
				timeout := tc.timeout
				if n[0] == 'B' {
					timeout = tc.timeoutB
				}
				return []pmix.Info{pmix.NewInfo(pmix.KeyTimeout, pmix.Uint32(timeout)),
					pmix.NewInfo(pmix.KeyConnectID, pmix.String(id)), pmix.NewInfo(pmix.KeyCollectiveID, pmix.String(id))}
			}
			// The test's context: the timeout and a margin (the grace, twice,
			// and a loaded machine's).
			ctx, cancel := context.WithTimeout(t.Context(), time.Duration(tc.timeout)*time.Second+e2e.WaitTime)
			defer cancel()
			type outcome struct {
				nspace string
				err    error
			}
			var omu sync.Mutex
			out := map[string]outcome{}
			var wg sync.WaitGroup
			join := func(n string) {
				wg.Go(func() {
					var o outcome
					if tc.kind == "connect" {
						o.nspace, _, o.err = w.Client(n).Connect(ctx, bothJobs(n), infoOf(n))
					} else {
						o.err = w.Client(n).Fence(ctx, bothJobs(n), infoOf(n))
					}
					omu.Lock()
					out[n] = o
					omu.Unlock()
				})
			}
			for _, n := range early {
				join(n)
			}
			cw.contributed(t, "a1", "b1", "b2")
			if err := mc.CutLinks("B"); err != nil {
				t.Fatal(err)
			}
			restored := false
			restore := func() {
				if !restored {
					restored = true
					if err := mc.RestoreLinks(t.Context(), "B"); err != nil {
						t.Fatal(err)
					}
				}
			}
			defer restore()
			join("A:jobA.3") // the last contribution: a2's
			if tc.heal == gaveUp {
				clustertest.WaitFor(t, e2e.WaitTime, func() error {
					omu.Lock()
					defer omu.Unlock()
					for _, n := range namesB {
						if _, ok := out[n]; !ok {
							return fmt.Errorf("%s still waits", n)
						}
					}
					return nil
				})
				restore()
			}
			if tc.heal == healed {
				cw.checked(t) // the coordinator holds the release, asking B's agents
				restore()
			}
			wg.Wait()
			if ctx.Err() != nil {
				t.Fatalf("the %s outlived its timeout and the margin: %v", tc.kind, out)
			}
			nspace := out["A:jobA.0"].nspace
			for _, n := range namesBoth {
				o := out[n]
				switch {
				case tc.heal == healed && (o.err != nil || o.nspace != nspace):
					t.Errorf("%s: %q, %v; want it completed, as A:jobA.0 did (%q)", n, o.nspace, o.err, nspace)
				case tc.heal != healed && !errors.Is(o.err, collective.ErrTimeout):
					t.Errorf("%s: %q, %v; want the %s's PMIX_ERR_TIMEOUT, as every participant", n, o.nspace, o.err, tc.kind)
				}
			}
			if tc.heal == healed && tc.kind == "connect" && nspace == "" {
				t.Error("the connect gave no nspace")
			}
		})
	}
}

// TestCollectiveAcrossLostAgent: b2 contributes to a connect across
// clusters, then dies (its NATS connection closed, no Shutdown) and b1
// declares its node down. The coordinator's release check gets no answer
// from b2, but nobody is left there to disagree: the others complete
// the connect, not at its timeout (60 s, beyond the test's context).
func TestCollectiveAcrossLostAgent(t *testing.T) {
	spec := collSpec()
	spec.Agent = func(c *agent.Config) {
		c.HandlerTimeout = 10 * time.Second
		c.LivenessInterval, c.LivenessTTL = e2e.LiveInterval, e2e.LiveTTL
	}
	aw := agenttest.Start(t, spec)
	w := e2e.WorldOf(t, aw)
	e2e.WaitSeen(t, w, []string{"b1", "b2"}, "b1")
	cw := watchColl(t, aw, "a2")
	info := []pmix.Info{pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(60))}
	early := slices.DeleteFunc(slices.Clone(namesBoth), func(n string) bool { return n == "A:jobA.3" || n == "B:jobB.2" })
	done := make(chan map[string]e2e.Connected, 2)
	go func() { done <- e2e.ConnectAll(t, aw, early, bothJobs, info...) }()
	lostCtx, lostGone := context.WithCancel(t.Context()) // B:jobB.2's: it waits with its agent gone
	lostDone := make(chan struct{})
	go func() {
		defer close(lostDone)
		_, _, _ = w.Client("B:jobB.2").C.Connect(lostCtx, bothJobs("B:jobB.2"), info)
	}()
	cw.contributed(t, "a1", "b1", "b2")
	aw.Agent("b2").NATS().Close()
	lostGone()
	<-lostDone
	go func() { done <- e2e.ConnectAll(t, aw, []string{"A:jobA.3"}, bothJobs, info...) }()
	res := <-done
	maps.Copy(res, <-done)
	nspace := res["A:jobA.0"].Nspace
	for _, n := range namesBoth {
		if c := res[n]; n != "B:jobB.2" && (c.Err != nil || c.Nspace != nspace || nspace == "") {
			t.Errorf("%s: %q, %v; want it connected, as A:jobA.0 (%q)", n, c.Nspace, c.Err, nspace)
		}
	}
}

// collWatch sees, from an agent of cluster A, the contributions to the operations
// led by A's jobA (each names its agent's node) and the coordinator's
// release checks of B's agents.
type collWatch struct {
	mu     sync.Mutex
	nodes  map[string]bool
	checks int
}

func watchColl(t *testing.T, aw *agenttest.World, node string) *collWatch {
	t.Helper()
	cw := &collWatch{nodes: map[string]bool{}}
	nc := aw.Agent(node).NATS() // an agent's: it may subscribe to pmix.>
	sub, err := nc.Subscribe(collective.Prefix+".>", func(m *nats.Msg) {
		cw.mu.Lock()
		defer cw.mu.Unlock()
		switch m.Subject {
		case collective.LeadSubject("A", "jobA"):
			var f []any
			if msgpack.Unmarshal(m.Data, &f) == nil && len(f) > 6 {
				if node, ok := f[6].(string); ok {
					cw.nodes[node] = true
				}
			}
		case collective.CheckSubject("B", "b1"), collective.CheckSubject("B", "b2"):
			cw.checks++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return cw
}

// reset forgets what was seen.
func (cw *collWatch) reset() {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	clear(cw.nodes)
	cw.checks = 0
}

// contributed waits until the agents of nodes have contributed.
func (cw *collWatch) contributed(t *testing.T, nodes ...string) {
	t.Helper()
	cw.waitFor(t, func() error {
		for _, n := range nodes {
			if !cw.nodes[n] {
				return fmt.Errorf("no contribution of %s yet", n)
			}
		}
		return nil
	})
}

// checked waits until the coordinator asked one of B's agents.
func (cw *collWatch) checked(t *testing.T) {
	t.Helper()
	cw.waitFor(t, func() error {
		if cw.checks == 0 {
			return errors.New("the coordinator has not asked B's agents yet")
		}
		return nil
	})
}

func (cw *collWatch) waitFor(t *testing.T, f func() error) {
	t.Helper()
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		cw.mu.Lock()
		defer cw.mu.Unlock()
		return f()
	})
}

// TestFenceAcrossCutNode: within one cluster, a2's link to NATS is cut
// silently after its contribution to a fence and before the release,
// which a2 therefore never gets. Once a2 has found its connection dead,
// the link comes back: a2, reconnected, sends its contribution again at
// once, the coordinator (a1) sends the release again, and a2's
// participants complete as a1's did — before their timeout, not failing
// at it while the others completed.
func TestFenceAcrossCutNode(t *testing.T) {
	w, link := e2e.StartCuttable(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A", Nodes: []string{"a1", "a2"}}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "jobA", Nodes: []string{"a1", "a1", "a2", "a2"}}},
		Agent: func(c *agent.Config) {
			c.HandlerTimeout = 10 * time.Second
			c.LivenessInterval, c.LivenessTTL = e2e.LiveInterval, e2e.LiveTTL
		},
	}, "a2")
	cw := watchColl(t, w, "a1")
	info := []pmix.Info{pmix.NewInfo(pmix.KeyTimeout, pmix.Uint32(8))}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second+e2e.WaitTime)
	defer cancel()
	var mu sync.Mutex
	out := map[string]error{}
	var wg sync.WaitGroup
	join := func(names ...string) {
		for _, n := range names {
			wg.Go(func() {
				err := w.Client(n).Fence(ctx, same(jobA)(n), info)
				mu.Lock()
				out[n] = err
				mu.Unlock()
			})
		}
	}
	join("A:jobA.2", "A:jobA.3")
	cw.contributed(t, "a2")
	link.Cut()
	a2 := w.Agent("a2")
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		if a2.Stats().NATSDisconnects == 0 {
			return errors.New("a2 has not found its link dead yet")
		}
		return nil
	})
	join("A:jobA.0", "A:jobA.1") // the release goes out, a2 does not get it
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(out) < 2 {
			return errors.New("a1's participants still wait")
		}
		return nil
	})
	link.Restore()
	wg.Wait()
	for _, n := range namesA {
		if err := out[n]; err != nil {
			t.Errorf("%s: %v; want the fence completed, on both nodes", n, err)
		}
	}
}
