package events

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// TestRangesReachExactlyTheirProcs notifies from A:jobA.0 at every range and
// checks which clients' handlers ran. After each event the same source sends
// a GLOBAL fence; once every client has seen the fence, an event that was
// going to reach a client has reached it (events from one source are
// handled in order end to end), so "not delivered" is a fact, not a guess.
func TestRangesReachExactlyTheirProcs(t *testing.T) {
	w := e2e.NewWorld(t)
	for _, n := range w.Names() {
		w.Client(n).Register(t, nil, []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("all"))}, pmix.EventNoActionTaken)
	}
	var rmMu sync.Mutex
	var rmGot []pmix.Status
	if err := w.Agents["a2"].OnRMEvent(t.Context(), func(m *event.Message) {
		rmMu.Lock()
		rmGot = append(rmGot, m.Code)
		rmMu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	w.WaitSourced()
	w.WaitInterest("A", "pmix.evt.B.ns.jobB.1")
	src := w.Client("A:jobA.0")
	allA := []string{"A:jobA.0", "A:jobA.1", "A:jobA.2", "A:jobA.3", "A:jobA2.0"}
	cases := []struct {
		name  string
		rng   pmix.Range
		info  []pmix.Info
		wantC []string
	}{
		{"local", pmix.RangeLocal, nil, []string{"A:jobA.0", "A:jobA.1", "A:jobA2.0"}},
		{"namespace", pmix.RangeNamespace, nil, []string{"A:jobA.0", "A:jobA.1", "A:jobA.2", "A:jobA.3"}},
		{"session (cluster-scoped)", pmix.RangeSession, nil, allA},
		{"global", pmix.RangeGlobal, nil, w.Names()},
		{"custom across clusters", pmix.RangeCustom, []pmix.Info{pmix.NewInfo(pmix.KeyEventCustomRange,
			pmix.Procs([]pmix.Proc{{Nspace: "jobA", Rank: 2}, {Nspace: "B:jobB", Rank: 1}}))}, []string{"A:jobA.2", "B:jobB.1"}},
		{"custom wildcard", pmix.RangeCustom, []pmix.Info{pmix.NewInfo(pmix.KeyEventCustomRange,
			pmix.Procs([]pmix.Proc{{Nspace: "B:jobB", Rank: pmix.RankWildcard}}))}, []string{"B:jobB.0", "B:jobB.1", "B:jobB.2"}},
		{"rm", pmix.RangeRM, nil, nil},
		{"proc local", pmix.RangeProcLocal, nil, []string{"A:jobA.0"}},
	}
	for i, c := range cases {
		code := pmix.ExternalErrBase - pmix.Status(i+1)
		t.Run(c.name, func(t *testing.T) {
			if err := src.C.NotifyEvent(t.Context(), code, c.rng, c.info); err != nil {
				t.Fatal(err)
			}
			if err := src.C.NotifyEvent(t.Context(), e2e.FenceCode, pmix.RangeGlobal, nil); err != nil {
				t.Fatal(err)
			}
			for _, n := range w.Names() {
				w.Client(n).Rec.WaitCount(t, e2e.FenceCode, i+1)
			}
			var got []string
			for _, n := range w.Names() {
				ds := w.Client(n).Rec.Of(code)
				if len(ds) > 1 {
					t.Errorf("%s got the event %d times", n, len(ds))
				}
				if len(ds) > 0 {
					got = append(got, n)
					if ds[0].Source != (pmix.Proc{Nspace: sourceName(n), Rank: 0}) {
						t.Errorf("%s saw source %v", n, ds[0].Source)
					}
				}
			}
			want := slices.Clone(c.wantC)
			sort.Strings(want)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("delivered to %v, want %v", got, want)
			}
		})
	}
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		rmMu.Lock()
		defer rmMu.Unlock()
		if !slices.Contains(rmGot, pmix.ExternalErrBase-7) {
			return fmt.Errorf("RM saw %v", rmGot)
		}
		return nil
	})
}

// sourceName is how a receiver in cluster of n names A's jobA: plain in A,
// qualified elsewhere (RFC0003).
func sourceName(n string) string {
	if strings.HasPrefix(n, "A:") {
		return "jobA"
	}
	return "A:jobA"
}

// TestHandlerOrderEndToEnd registers handlers with every kind of placement on
// a client in cluster B and has a client in cluster A notify it: the chain
// runs in RFC0018 order, each handler sees the results of those before it,
// and the agent reports the outcome.
func TestHandlerOrderEndToEnd(t *testing.T) {
	w := e2e.NewWorld(t)
	rcv := w.Client("B:jobB.2")
	code := pmix.EventProcTerminated
	name := func(n string, more ...pmix.Info) []pmix.Info {
		return append([]pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String(n))}, more...)
	}
	flag := func(k string) pmix.Info { return pmix.NewInfo(k, pmix.Bool(true)) }
	rcv.Register(t, nil, name("default"), pmix.EventNoActionTaken)
	rcv.Register(t, []pmix.Status{code}, name("single-1"), pmix.EventNoActionTaken)
	rcv.Register(t, []pmix.Status{code}, name("single-2"), pmix.EventPartialActionTaken) // prepended: before single-1
	rcv.Register(t, []pmix.Status{code, pmix.EventNodeDown}, name("multi"), pmix.EventNoActionTaken)
	rcv.Register(t, nil, name("last", flag(pmix.KeyEventHdlrLast)), pmix.EventNoActionTaken)
	rcv.Register(t, []pmix.Status{code}, name("first", flag(pmix.KeyEventHdlrFirst)), pmix.EventNoActionTaken)
	rcv.Register(t, []pmix.Status{code}, name("after-1", pmix.NewInfo(pmix.KeyEventHdlrAfter, pmix.String("single-1"))), pmix.EventNoActionTaken)

	// Ordering errors come back synchronously, from the agent.
	if _, err := rcv.C.RegisterEventHandler(t.Context(), []pmix.Status{code}, name("first"), rcv.Rec.Handler(0)); !isStatus(err, pmix.ErrEventRegistration) {
		t.Fatalf("duplicate name: %v", err)
	}
	if _, err := rcv.C.RegisterEventHandler(t.Context(), nil, name("x", pmix.NewInfo(pmix.KeyEventHdlrBefore, pmix.String("single-1"))), rcv.Rec.Handler(0)); !isStatus(err, pmix.ErrEventRegistration) {
		t.Fatalf("before across categories: %v", err)
	}

	outcomes := make(chan event.OutcomeReport, 16)
	w.Agents["b2"].OnOutcome(func(r event.OutcomeReport) { outcomes <- r })
	w.WaitInterest("A", "pmix.evt.B.ns.jobB.-201")
	// An event that comes before a registration's fence is back reaches it
	// apart, after its replay, not in the chain (docs/cache.md): under load
	// the registration call can return without its fence (after 10 s).
	e2e.NoneHeld(t, w.Agents["b2"], e2e.WaitTime)
	if err := w.Client("A:jobA.1").C.NotifyEvent(t.Context(), code, pmix.RangeCustom, []pmix.Info{
		pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{{Nspace: "B:jobB", Rank: 2}})),
	}); err != nil {
		t.Fatal(err)
	}
	rcv.Rec.WaitCount(t, code, 7)
	var order []string
	for _, d := range rcv.Rec.Of(code) {
		order = append(order, d.Handler)
	}
	want := []string{"first", "single-2", "single-1", "after-1", "multi", "default", "last"}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Fatalf("order %v, want %v", order, want)
	}
	// Each handler saw one result entry per handler before it, keyed by name
	// with the status it returned.
	ds := rcv.Rec.Of(code)
	for i, d := range ds {
		if len(d.Results) != i {
			t.Fatalf("%s saw %d results, want %d", d.Handler, len(d.Results), i)
		}
	}
	if st, _ := ds[2].Results[1].Value.Status(); ds[2].Results[1].Key != "single-2" || st != pmix.EventPartialActionTaken {
		t.Fatalf("single-1 saw %v", ds[2].Results)
	}
	r := <-outcomes
	if r.Client != (pmix.Proc{Nspace: "jobB", Rank: 2}) || r.Source != (pmix.Proc{Nspace: "A:jobA", Rank: 1}) || len(r.Outcome.Ran) != 7 || r.Outcome.Completed {
		t.Fatalf("outcome %+v", r)
	}
}

// TestEditedResultsEndToEnd: a handler's edits of the prior results
// (RFC0018) reach the handlers after it and the outcome, across the socket,
// and a later handler that leaves them alone keeps them (its completion
// carries no prior results).
func TestEditedResultsEndToEnd(t *testing.T) {
	w := e2e.NewWorld(t)
	rcv := w.Client("B:jobB.2")
	code := pmix.ExternalErrBase - 41
	name := func(n string) []pmix.Info { return []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String(n))} }
	register := func(n string, h bus.Handler) {
		t.Helper()
		if _, err := rcv.C.RegisterEventHandler(t.Context(), []pmix.Status{code}, name(n), h); err != nil {
			t.Fatal(err)
		}
	}
	// Later registrations go first: one, edit, keep.
	saw := make(chan []pmix.Info, 1)
	register("keep", func(c *bus.Call, done bus.Done) {
		saw <- slices.Clone(c.Results)
		done(pmix.EventNoActionTaken, nil)
	})
	register("edit", func(c *bus.Call, done bus.Done) {
		for i := range c.Results {
			switch c.Results[i].Key {
			case "k1":
				c.Results[i].Value = pmix.String("edited")
			case "k2":
				c.Results[i].Key = ""
			}
		}
		done(pmix.EventNoActionTaken, nil)
	})
	register("one", func(c *bus.Call, done bus.Done) {
		done(pmix.EventNoActionTaken, []pmix.Info{pmix.NewInfo("k1", pmix.String("v1")), pmix.NewInfo("k2", pmix.String("v2"))})
	})
	outcomes := make(chan event.OutcomeReport, 4)
	w.Agents["b2"].OnOutcome(func(r event.OutcomeReport) {
		if r.Outcome.Code == code {
			outcomes <- r
		}
	})
	e2e.NoneHeld(t, w.Agents["b2"], e2e.WaitTime)
	if _, err := w.Agents["b2"].Notify(t.Context(), code, pmix.RangeLocal, false, nil); err != nil {
		t.Fatal(err)
	}
	keys := func(in []pmix.Info) string {
		var ks []string
		for _, i := range in {
			v, _ := i.Value.Str()
			ks = append(ks, i.Key+"="+v)
		}
		return strings.Join(ks, " ")
	}
	select {
	case got := <-saw:
		if k := keys(got); k != "one= k1=edited edit=" {
			t.Fatalf("keep saw %q", k)
		}
	case <-time.After(e2e.WaitTime):
		t.Fatal("keep never ran")
	}
	select {
	case r := <-outcomes:
		if k := keys(r.Outcome.Results); k != "one= k1=edited edit= keep=" {
			t.Fatalf("outcome results %q", k)
		}
	case <-time.After(e2e.WaitTime):
		t.Fatal("no outcome")
	}
}

func isStatus(err error, s pmix.Status) bool { return pmix.StatusOf(err) == s }

// TestActionCompleteStopsChain: the handler that returns ACTION_COMPLETE is
// the last to run, and the outcome says so.
func TestActionCompleteStopsChain(t *testing.T) {
	w := e2e.NewWorld(t)
	rcv := w.Client("A:jobA.3")
	code := pmix.EventNodeDown
	rcv.Register(t, nil, []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("default"))}, pmix.EventNoActionTaken)
	rcv.Register(t, []pmix.Status{code}, []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("fixer"))}, pmix.EventActionComplete)
	outcomes := make(chan event.OutcomeReport, 4)
	w.Agents["a2"].OnOutcome(func(r event.OutcomeReport) { outcomes <- r })
	if err := w.Client("A:jobA.0").C.NotifyEvent(t.Context(), code, pmix.RangeNamespace, nil); err != nil {
		t.Fatal(err)
	}
	var r event.OutcomeReport
	for r = range outcomes {
		if r.Client.Rank == 3 {
			break
		}
	}
	if !r.Outcome.Completed || len(r.Outcome.Ran) != 1 || r.Outcome.Ran[0].Name != "fixer" {
		t.Fatalf("outcome %+v", r.Outcome)
	}
	if got := rcv.Rec.Of(code); len(got) != 1 {
		t.Fatalf("handlers ran: %+v", got)
	}
}

// TestJobAndEnvironmentEvents: environment events reach only registrations
// that want them, and an agent subscribes to environment subjects only when
// one of its clients registered for them.
func TestJobAndEnvironmentEvents(t *testing.T) {
	w := e2e.NewWorld(t)
	code := pmix.EventNodeDown
	jobOnly := w.Client("A:jobA.0")
	envOnly := w.Client("A:jobA.2")
	named := w.Client("A:jobA.3")
	dflt := w.Client("A:jobA.1")
	jobOnly.Register(t, []pmix.Status{code}, []pmix.Info{pmix.NewInfo(pmix.KeyEventJobLevel, pmix.Bool(true))}, pmix.EventNoActionTaken)
	envOnly.Register(t, nil, []pmix.Info{pmix.NewInfo(pmix.KeyEventEnviroLevel, pmix.Bool(true))}, pmix.EventNoActionTaken)
	named.Register(t, []pmix.Status{code}, nil, pmix.EventNoActionTaken)
	dflt.Register(t, nil, nil, pmix.EventNoActionTaken)

	for _, node := range []string{"a1"} {
		for _, s := range w.Agents[node].Subjects() {
			if strings.HasPrefix(s, "pmix.env.") {
				t.Fatalf("agent %s subscribed to %s though no client there wants environment events", node, s)
			}
		}
	}
	if !slices.Contains(w.Agents["a2"].Subjects(), "pmix.env.A.node.a2.*.nc") { // transient; cached ones come as copies
		t.Fatalf("a2 subscriptions %v", w.Agents["a2"].Subjects())
	}

	// An environment event from the RM, then a job event, then a fence.
	if _, err := w.Agents["a1"].Notify(t.Context(), code, pmix.RangeSession, true, []pmix.Info{pmix.NewInfo(pmix.KeySessionID, pmix.String("s1"))}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Agents["a1"].Notify(t.Context(), code, pmix.RangeNamespace, false, []pmix.Info{pmix.NewInfo(pmix.KeyNspace, pmix.String("jobA"))}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*e2e.Client{jobOnly, envOnly, named, dflt} {
		c.Register(t, []pmix.Status{e2e.FenceCode}, nil, pmix.EventNoActionTaken)
	}
	if _, err := w.Agents["a1"].Notify(t.Context(), e2e.FenceCode, pmix.RangeGlobal, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*e2e.Client{jobOnly, envOnly, named, dflt} {
		c.Rec.WaitCount(t, e2e.FenceCode, 1)
	}
	// Naming a code does not bring its environment events: ENVIRO_LEVEL
	// defaults to false (RFC0002; package bus, Filters).
	count := func(c *e2e.Client) int { return len(c.Rec.Of(code)) }
	if count(jobOnly) != 1 || count(envOnly) != 1 || count(named) != 1 || count(dflt) != 1 {
		t.Fatalf("deliveries: job-level %d, enviro-level %d, named %d, default %d; want 1 1 1 1",
			count(jobOnly), count(envOnly), count(named), count(dflt))
	}
	if d := jobOnly.Rec.Of(code)[0]; !d.Source.IsZero() {
		t.Fatalf("RM event has source %v", d.Source)
	}
}

// TestReceiverFilters: a registration's source range and affected-procs
// filters decide whether its handler runs.
func TestReceiverFilters(t *testing.T) {
	w := e2e.NewWorld(t)
	rcv := w.Client("A:jobA.1")
	code := pmix.ExternalErrBase - 50
	rng := func(r pmix.Range) pmix.Info { return pmix.NewInfo(pmix.KeyRange, pmix.RangeValue(r)) }
	name := func(n string) pmix.Info { return pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String(n)) }
	// Registered first, so (handlers are prepended) it runs last.
	rcv.Register(t, []pmix.Status{code}, []pmix.Info{name("unfiltered")}, pmix.EventNoActionTaken)
	rcv.Register(t, []pmix.Status{code}, []pmix.Info{name("from-my-node"), rng(pmix.RangeLocal)}, pmix.EventNoActionTaken)
	rcv.Register(t, []pmix.Status{code}, []pmix.Info{name("from-my-nspace"), rng(pmix.RangeNamespace)}, pmix.EventNoActionTaken)
	rcv.Register(t, []pmix.Status{code}, []pmix.Info{name("from-jobB.1"), rng(pmix.RangeCustom),
		pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{{Nspace: "B:jobB", Rank: 1}}))}, pmix.EventNoActionTaken)
	rcv.Register(t, []pmix.Status{code}, []pmix.Info{name("about-jobA.3"),
		pmix.NewInfo(pmix.KeyEventAffectedProc, pmix.ProcValue(pmix.Proc{Nspace: "jobA", Rank: 3}))}, pmix.EventNoActionTaken)
	rcv.Register(t, []pmix.Status{code}, []pmix.Info{name("mine-only"), rng(pmix.RangeProcLocal)}, pmix.EventNoActionTaken)

	custom := func(info ...pmix.Info) []pmix.Info {
		return append([]pmix.Info{pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{{Nspace: "A:jobA", Rank: 1}}))}, info...)
	}
	w.WaitInterest("B", subjects.Namespace("A", "jobA").Subject(code))
	affected3 := pmix.NewInfo(pmix.KeyEventAffectedProc, pmix.ProcValue(pmix.Proc{Nspace: "jobA", Rank: 3}))
	cases := []struct {
		from string
		info []pmix.Info
		want []string
	}{
		{"A:jobA2.0", custom(), []string{"from-my-node", "unfiltered"}},
		{"A:jobA.2", custom(affected3), []string{"from-my-nspace", "about-jobA.3", "unfiltered"}},
		{"B:jobB.1", custom(), []string{"from-jobB.1", "unfiltered"}},
		{"A:jobA.1", custom(), []string{"from-my-node", "from-my-nspace", "mine-only", "unfiltered"}},
	}
	seen := 0
	for _, c := range cases {
		t.Run(c.from, func(t *testing.T) {
			if err := w.Client(c.from).C.NotifyEvent(t.Context(), code, pmix.RangeCustom, c.info); err != nil {
				t.Fatal(err)
			}
			// "unfiltered" runs last, so its delivery ends the chain.
			var got []string
			clustertest.WaitFor(t, e2e.WaitTime, func() error {
				ds := rcv.Rec.Of(code)[seen:]
				got = got[:0]
				for _, d := range ds {
					got = append(got, d.Handler)
				}
				if len(got) == 0 || got[len(got)-1] != "unfiltered" {
					return fmt.Errorf("ran so far: %v", got)
				}
				return nil
			})
			seen += len(got)
			gs, ws := slices.Clone(got), slices.Clone(c.want)
			sort.Strings(gs)
			sort.Strings(ws)
			if strings.Join(gs, " ") != strings.Join(ws, " ") {
				t.Fatalf("ran %v, want %v", got, c.want)
			}
		})
	}
}
