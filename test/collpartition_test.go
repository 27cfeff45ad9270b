package test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/collective"
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
	// What the coordinator (a1, jobA's rank 0) is sent and asks, seen from
	// cluster A: the contributions name their agent's node.
	var mu sync.Mutex
	contributed := map[string]bool{}
	checks := 0
	nc := w.Agent("a2").NATS() // an agent's: it may subscribe to pmix.>
	sub, err := nc.Subscribe(collective.Prefix+".>", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if m.Subject == collective.LeadSubject("A", "jobA") {
			var f []any
			if msgpack.Unmarshal(m.Data, &f) == nil && len(f) > 6 {
				if node, ok := f[6].(string); ok {
					contributed[node] = true
				}
			}
		}
		if m.Subject == collective.CheckSubject("B", "b1") || m.Subject == collective.CheckSubject("B", "b2") {
			checks++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
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
			mu.Lock()
			clear(contributed)
			checks = 0
			mu.Unlock()
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
			ctx, cancel := context.WithTimeout(t.Context(), time.Duration(tc.timeout)*time.Second+waitTime)
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
			clustertest.WaitFor(t, waitTime, func() error {
				mu.Lock()
				defer mu.Unlock()
				for _, node := range []string{"a1", "b1", "b2"} {
					if !contributed[node] {
						return fmt.Errorf("no contribution of %s yet", node)
					}
				}
				return nil
			})
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
				clustertest.WaitFor(t, waitTime, func() error {
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
				// The coordinator holds the release, asking B's agents.
				clustertest.WaitFor(t, waitTime, func() error {
					mu.Lock()
					defer mu.Unlock()
					if checks == 0 {
						return errors.New("the coordinator has not asked B's agents yet")
					}
					return nil
				})
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
