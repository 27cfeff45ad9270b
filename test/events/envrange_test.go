package events

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
)

// TestEnvironmentEventsObeyRange: an environment event reaches exactly the
// clients its data range names, as a job event does (RFC0018: delivery is
// governed by the range the generator gave), and only their
// environment-level handlers; RM-range environment events reach the host RM
// and no client. The expectations are written out by hand from the range
// definitions, not computed by the code under test.
func TestEnvironmentEventsObeyRange(t *testing.T) {
	w := e2e.NewWorld(t)
	envLevel := []pmix.Info{pmix.NewInfo(pmix.KeyEventEnviroLevel, pmix.Bool(true))}
	for _, n := range w.Names() {
		c := w.Client(n)
		c.Register(t, nil, envLevel, pmix.EventNoActionTaken)
		c.Register(t, nil, nil, pmix.EventNoActionTaken) // job events only
		c.Register(t, []pmix.Status{e2e.FenceCode}, nil, pmix.EventNoActionTaken)
	}
	var rmMu sync.Mutex
	var rmGot []pmix.Status
	if err := w.Agents["a1"].OnRMEvent(t.Context(), func(m *event.Message) {
		rmMu.Lock()
		defer rmMu.Unlock()
		if m.Environment {
			rmGot = append(rmGot, m.Code)
		}
	}); err != nil {
		t.Fatal(err)
	}

	str := func(k, v string) pmix.Info { return pmix.NewInfo(k, pmix.String(v)) }
	cases := []struct {
		name  string
		via   string // the agent whose host RM notifies
		rng   pmix.Range
		info  []pmix.Info
		reach []string
	}{
		{"local", "a1", pmix.RangeLocal, nil, []string{"A:jobA.0", "A:jobA.1", "A:jobA2.0"}},
		{"local other node", "a2", pmix.RangeLocal, []pmix.Info{str(pmix.KeyHostname, "a1")}, []string{"A:jobA.0", "A:jobA.1", "A:jobA2.0"}},
		{"local own node", "a2", pmix.RangeLocal, nil, []string{"A:jobA.2", "A:jobA.3"}},
		{"namespace", "a1", pmix.RangeNamespace, []pmix.Info{str(pmix.KeyNspace, "jobA2")}, []string{"A:jobA2.0"}},
		{"namespace other cluster", "a1", pmix.RangeNamespace, []pmix.Info{str(pmix.KeyNspace, "B:jobB")}, []string{"B:jobB.0", "B:jobB.1", "B:jobB.2"}},
		{"session", "b2", pmix.RangeSession, []pmix.Info{str(pmix.KeySessionID, "s1")}, []string{"B:jobB.0", "B:jobB.1", "B:jobB.2"}},
		{"custom", "a1", pmix.RangeCustom, []pmix.Info{pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{
			{Nspace: "jobA", Rank: 3}, {Nspace: "B:jobB", Rank: 1}}))}, []string{"A:jobA.3", "B:jobB.1"}},
		{"global", "b1", pmix.RangeGlobal, nil, w.Names()},
		{"rm", "a1", pmix.RangeRM, nil, nil},
	}
	// Interest from the other cluster reaches a server over the leaf links
	// a moment after the registration.
	w.WaitInterest("A", "pmix.env.B.ns.jobB.1")
	w.WaitInterest("A", "pmix.env.B.agent.b1.1")
	w.WaitSourced() // the global case, from b1

	for i, c := range cases {
		code := pmix.ExternalErrBase - 100 - pmix.Status(i)
		if _, err := w.Agents[c.via].Notify(t.Context(), code, c.rng, true, c.info); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	// Wait for what must arrive (events crossing a leaf link are not
	// ordered behind the fence), then fence what must not.
	for i, c := range cases {
		code := pmix.ExternalErrBase - 100 - pmix.Status(i)
		for _, n := range c.reach {
			w.Client(n).Rec.WaitCount(t, code, 1)
		}
	}
	if _, err := w.Agents["a1"].Notify(t.Context(), e2e.FenceCode, pmix.RangeGlobal, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range w.Names() {
		w.Client(n).Rec.WaitCount(t, e2e.FenceCode, 1)
	}
	for i, c := range cases {
		code := pmix.ExternalErrBase - 100 - pmix.Status(i)
		var got []string
		for _, n := range w.Names() {
			ds := w.Client(n).Rec.Of(code)
			if len(ds) > 1 {
				t.Errorf("%s: %s ran %d handlers (%v); only its environment-level handler should", c.name, n, len(ds), ds)
			}
			if len(ds) > 0 {
				got = append(got, n)
			}
		}
		if !slices.Equal(got, c.reach) {
			t.Errorf("%s: reached %v, want %v", c.name, got, c.reach)
		}
	}
	rmMu.Lock()
	defer rmMu.Unlock()
	if want := pmix.ExternalErrBase - 100 - pmix.Status(len(cases)-1); !slices.Contains(rmGot, want) {
		t.Errorf("the host RM did not get the RM-range environment event: %v", rmGot)
	}
}

// TestEnvironmentSubscriptionsFollowInterest: an agent subscribes to
// environment subjects only while one of its clients wants environment
// events, and then only to its clients' scopes for the codes they want:
// the transient ones (PMIX_EVENT_DO_NOT_CACHE), the cached ones coming
// from the events stream's copies (docs/cache.md).
func TestEnvironmentSubscriptionsFollowInterest(t *testing.T) {
	w := e2e.NewWorld(t)
	w.Client("A:jobA.0").Register(t, nil, nil, pmix.EventNoActionTaken)
	w.Client("A:jobA.2").Register(t, []pmix.Status{pmix.EventNodeDown}, []pmix.Info{pmix.NewInfo(pmix.KeyEventEnviroLevel, pmix.Bool(true))}, pmix.EventNoActionTaken)
	for _, s := range w.Agents["a1"].Subjects() {
		if strings.HasPrefix(s, "pmix.env.") {
			t.Fatalf("a1 subscribed to %s though no client there wants environment events", s)
		}
	}
	var env []string
	for _, s := range w.Agents["a2"].Subjects() {
		if strings.HasPrefix(s, "pmix.env.") {
			env = append(env, s)
		}
	}
	want := []string{
		"pmix.env.A.agent.a2.-231.nc",
		"pmix.env.A.node.a2.-231.nc",
		"pmix.env.A.ns.jobA.-231.nc",
		"pmix.env.A.sess.s1.-231.nc",
		"pmix.env.global.*.-231.nc",
	}
	if !slices.Equal(env, want) {
		t.Fatalf("a2's environment subscriptions %v, want %v", env, want)
	}
}
