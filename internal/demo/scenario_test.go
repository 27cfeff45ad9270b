package demo

import (
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/internal/trace"
	"github.com/pmixbus/pmixbus/pmix"
)

// TestExpectations checks the declarations against facts the demo is
// meant to show, so that a change to them cannot quietly make it show less.
func TestExpectations(t *testing.T) {
	o, err := newOracle()
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	got := map[string]map[string]string{} // event → client → chain
	for _, ev := range demoEvents {
		want, _, err := o.expect(t.Context(), ev)
		if err != nil {
			t.Fatal(err)
		}
		got[ev.name] = map[string]string{}
		for _, w := range want {
			got[ev.name][w.client.key()] = trace.Chain(w.outcome)
		}
	}
	keys := func(m map[string]string) string {
		var ks []string
		for _, c := range demoClients {
			if _, ok := m[c.key()]; ok {
				ks = append(ks, c.key())
			}
		}
		return strings.Join(ks, " ")
	}
	for ev, want := range map[string]string{
		"local":       "east:sim.0 east:sim.1",
		"namespace":   "east:sim.0 east:sim.1 east:sim.2",
		"session":     "east:sim.0 east:sim.1 east:sim.2 east:viz.0",
		"custom":      "east:sim.2 west:post.0",
		"global":      "east:sim.0 east:sim.1 east:sim.2 east:viz.0 west:post.0 west:post.1",
		"rm":          "",
		"environment": "east:viz.0",
		"proc-local":  "west:post.0",
	} {
		if k := keys(got[ev]); k != want {
			t.Errorf("%s event reaches %q, want %q", ev, k, want)
		}
	}
	for _, c := range []struct{ ev, client, chain string }{
		{"session", "east:sim.0", "first:no-action > stats:no-action > trace:no-action > log:no-action > metrics:no-action > audit:no-action > last:no-action"},
		{"namespace", "east:sim.1", "fixer:COMPLETE => completed"},
		{"namespace", "east:sim.2", "mine:no-action > any:no-action"},
		{"session", "east:sim.2", "from-rm:no-action > any:no-action"},
		{"global", "west:post.0", "checkpoint:partial > policy:no-action > hopeful:no-action > all:no-action => want-termination (required, by policy)"},
		{"environment", "east:viz.0", "env-watch:partial"},
		{"session", "east:viz.0", "job:no-action"},
	} {
		if got := got[c.ev][c.client]; got != c.chain {
			t.Errorf("%s event at %s: %s, want %s", c.ev, c.client, got, c.chain)
		}
	}
	// Every range is sent, and the RM event from a client.
	ranges := map[pmix.Range]bool{}
	for _, ev := range demoEvents {
		ranges[ev.rng] = true
	}
	for r := pmix.RangeRM; r <= pmix.RangeProcLocal; r++ {
		if !ranges[r] {
			t.Errorf("no demo event of range %v", r)
		}
	}
}
