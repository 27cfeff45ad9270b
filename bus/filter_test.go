package bus

import (
	"fmt"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

func TestLevelFilter(t *testing.T) {
	jobL := pmix.NewInfo(pmix.KeyEventJobLevel, pmix.Bool(true))
	envL := pmix.NewInfo(pmix.KeyEventEnviroLevel, pmix.Bool(true))
	cases := []struct {
		name     string
		cs       []pmix.Status
		attrs    []pmix.Info
		job, env bool // does it run for a job / environment event with codeA?
	}{
		{"single, neither", codes(codeA), nil, true, true},
		{"multi, neither", codes(codeA, codeB), nil, true, true},
		{"default, neither", nil, nil, true, false},
		{"single, JOB_LEVEL", codes(codeA), []pmix.Info{jobL}, true, false},
		{"default, JOB_LEVEL", nil, []pmix.Info{jobL}, true, false},
		{"single, ENVIRO_LEVEL", codes(codeA), []pmix.Info{envL}, false, true},
		{"multi, ENVIRO_LEVEL", codes(codeA, codeB), []pmix.Info{envL}, false, true},
		{"default, ENVIRO_LEVEL", nil, []pmix.Info{envL}, false, true},
		{"single, both", codes(codeA), []pmix.Info{jobL, envL}, true, true},
		{"default, both", nil, []pmix.Info{jobL, envL}, true, true},
		{"default, both false", nil, []pmix.Info{pmix.NewInfo(pmix.KeyEventJobLevel, pmix.Bool(false)), pmix.NewInfo(pmix.KeyEventEnviroLevel, pmix.Bool(false))}, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRegistry(t)
			id := mustRegister(t, r, c.cs, "h", nil, c.attrs...)
			g, _ := r.Lookup(id)
			for _, env := range []bool{false, true} {
				want := c.job
				if env {
					want = c.env
				}
				ev := Event{Code: codeA, Environment: env}
				if got := len(run(t, r, ev).Ran) == 1; got != want {
					t.Errorf("environment=%v: ran %v, want %v", env, got, want)
				}
				if got := r.Wants(ev); got != want {
					t.Errorf("environment=%v: Wants %v, want %v", env, got, want)
				}
				if got := g.Accepts(ev, selfOrigin); got != want {
					t.Errorf("environment=%v: Accepts %v, want %v", env, got, want)
				}
			}
			if g.WantsJob() != c.job || g.WantsEnvironment(codeA) != c.env {
				t.Errorf("WantsJob %v WantsEnvironment(A) %v, want %v %v", g.WantsJob(), g.WantsEnvironment(codeA), c.job, c.env)
			}
			if g.WantsEnvironment(codeC) != (c.env && c.cs == nil) {
				t.Errorf("WantsEnvironment(C) = %v for codes %v", g.WantsEnvironment(codeC), c.cs)
			}
		})
	}
}

func TestSourceRangeFilter(t *testing.T) {
	rm := Origin{Cluster: "A", Node: "n1"}
	sameNode := Origin{Cluster: "A", Node: "n1", Session: "s2", Proc: pmix.Proc{Nspace: "A:job9", Rank: 0}}
	sameNs := Origin{Cluster: "A", Node: "n2", Session: "s1", Proc: pmix.Proc{Nspace: "A:job1", Rank: 5}}
	sameSess := Origin{Cluster: "A", Node: "n3", Session: "s1", Proc: pmix.Proc{Nspace: "A:job2", Rank: 0}}
	otherCluster := Origin{Cluster: "B", Node: "n1", Session: "s1", Proc: pmix.Proc{Nspace: "A:job1", Rank: 1}}
	sources := map[string]Origin{
		"self": selfOrigin, "rm": rm, "sameNode": sameNode, "sameNs": sameNs,
		"sameSess": sameSess, "otherCluster": otherCluster,
	}
	rangeInfo := func(r pmix.Range) []pmix.Info { return []pmix.Info{pmix.NewInfo(pmix.KeyRange, pmix.RangeValue(r))} }
	custom := []pmix.Info{pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{{Nspace: "A:job2", Rank: pmix.RankWildcard}, {Nspace: "A:job9", Rank: 0}}))}
	cases := []struct {
		name   string
		attrs  []pmix.Info
		accept map[string]bool // by source; absent means false
	}{
		{"none", nil, map[string]bool{"self": true, "rm": true, "sameNode": true, "sameNs": true, "sameSess": true, "otherCluster": true}},
		{"undef", rangeInfo(pmix.RangeUndef), map[string]bool{"self": true, "rm": true, "sameNode": true, "sameNs": true, "sameSess": true, "otherCluster": true}},
		{"PROC_LOCAL", rangeInfo(pmix.RangeProcLocal), map[string]bool{"self": true}},
		{"LOCAL", rangeInfo(pmix.RangeLocal), map[string]bool{"self": true, "rm": true, "sameNode": true}},
		{"NAMESPACE", rangeInfo(pmix.RangeNamespace), map[string]bool{"self": true, "sameNs": true}},
		{"SESSION", rangeInfo(pmix.RangeSession), map[string]bool{"self": true, "sameNs": true, "sameSess": true}},
		{"GLOBAL", rangeInfo(pmix.RangeGlobal), map[string]bool{"self": true, "rm": true, "sameNode": true, "sameNs": true, "sameSess": true, "otherCluster": true}},
		{"RM", rangeInfo(pmix.RangeRM), map[string]bool{"rm": true}},
		{"CUSTOM", append(rangeInfo(pmix.RangeCustom), custom...), map[string]bool{"sameNode": true, "sameSess": true}},
		{"CUSTOM implied by the procs", custom, map[string]bool{"sameNode": true, "sameSess": true}},
		{"range as an integer", []pmix.Info{pmix.NewInfo(pmix.KeyRange, pmix.Uint8(uint8(pmix.RangeRM)))}, map[string]bool{"rm": true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRegistry(t)
			id := mustRegister(t, r, codes(codeA), "h", nil, c.attrs...)
			g, _ := r.Lookup(id)
			for src, origin := range sources {
				ev := Event{Code: codeA, Source: origin}
				got := len(run(t, r, ev).Ran) == 1
				if got != c.accept[src] {
					t.Errorf("source %s: ran %v, want %v", src, got, c.accept[src])
				}
				if r.Wants(ev) != got || g.Accepts(ev, selfOrigin) != got {
					t.Errorf("source %s: Wants/Accepts disagree with the chain", src)
				}
			}
		})
	}
}

// A registry of the host RM (zero Self.Proc) tells its own events from other
// RMs' for PROC_LOCAL.
func TestProcLocalForTheRM(t *testing.T) {
	self := Origin{Cluster: "A", Node: "n1"}
	r := newTestRegistry(t, func(c *Config) { c.Self = self })
	mustRegister(t, r, codes(codeA), "h", nil, pmix.NewInfo(pmix.KeyRange, pmix.RangeValue(pmix.RangeProcLocal)))
	for _, c := range []struct {
		src  Origin
		want bool
	}{
		{self, true},
		{Origin{Cluster: "A", Node: "n1", Proc: pmix.Proc{Rank: pmix.RankUndef}}, true},
		{Origin{Cluster: "A", Node: "n2"}, false},
		{Origin{Cluster: "B", Node: "n1"}, false},
		{Origin{Cluster: "A", Node: "n1", Proc: pmix.Proc{Nspace: "j", Rank: 0}}, false},
	} {
		if got := r.Wants(Event{Code: codeA, Source: c.src}); got != c.want {
			t.Errorf("source %+v: %v, want %v", c.src, got, c.want)
		}
	}
}

func TestAffectedProcsFilter(t *testing.T) {
	p := func(ns string, r pmix.Rank) pmix.Proc { return pmix.Proc{Nspace: ns, Rank: r} }
	one := func(pr pmix.Proc) pmix.Info { return pmix.NewInfo(pmix.KeyEventAffectedProc, pmix.ProcValue(pr)) }
	many := func(ps ...pmix.Proc) pmix.Info { return pmix.NewInfo(pmix.KeyEventAffectedProcs, pmix.Procs(ps)) }
	cases := []struct {
		name  string
		reg   []pmix.Info
		event []pmix.Info
		want  bool
	}{
		{"no filter, no procs", nil, nil, true},
		{"no filter, procs", nil, []pmix.Info{one(p("j", 1))}, true},
		{"filter, event without procs", []pmix.Info{one(p("j", 1))}, nil, false},
		{"same proc", []pmix.Info{one(p("j", 1))}, []pmix.Info{one(p("j", 1))}, true},
		{"other rank", []pmix.Info{one(p("j", 1))}, []pmix.Info{one(p("j", 2))}, false},
		{"other nspace", []pmix.Info{one(p("j", 1))}, []pmix.Info{one(p("k", 1))}, false},
		{"wildcard in the registration", []pmix.Info{one(p("j", pmix.RankWildcard))}, []pmix.Info{one(p("j", 7))}, true},
		{"wildcard in the event", []pmix.Info{many(p("j", 3))}, []pmix.Info{many(p("j", pmix.RankWildcard))}, true},
		{"lists intersect", []pmix.Info{many(p("a", 1), p("b", 2))}, []pmix.Info{many(p("c", 0), p("b", 2))}, true},
		{"lists do not", []pmix.Info{many(p("a", 1), p("b", 2))}, []pmix.Info{many(p("c", 0), p("b", 3))}, false},
		{"both keys in the registration", []pmix.Info{one(p("a", 1)), many(p("b", 2))}, []pmix.Info{one(p("b", 2))}, true},
		{"both keys in the event", []pmix.Info{one(p("b", 2))}, []pmix.Info{one(p("a", 1)), many(p("b", 2))}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRegistry(t)
			mustRegister(t, r, nil, "h", nil, c.reg...)
			if got := len(run(t, r, Event{Code: codeA, Info: c.event}).Ran) == 1; got != c.want {
				t.Errorf("ran %v, want %v", got, c.want)
			}
		})
	}
}

func TestNonDefault(t *testing.T) {
	r := newTestRegistry(t)
	mustRegister(t, r, nil, "f", nil, first)
	mustRegister(t, r, codes(codeA), "s", nil)
	mustRegister(t, r, codes(codeA, codeB), "m", nil)
	mustRegister(t, r, nil, "d", nil)
	mustRegister(t, r, codes(codeA, codeC), "l", nil, last)
	nonDef := []pmix.Info{pmix.NewInfo(pmix.KeyEventNonDefault, pmix.Bool(true))}
	for _, c := range []struct {
		code pmix.Status
		info []pmix.Info
		want string
	}{
		{codeA, nil, "[f s m d l]"},
		{codeA, nonDef, "[s m l]"}, // the default-category FIRST is a default handler
		{codeB, nonDef, "[m]"},
		{codeB, []pmix.Info{{Key: pmix.KeyEventNonDefault}}, "[m]"},
		{codeB, []pmix.Info{pmix.NewInfo(pmix.KeyEventNonDefault, pmix.Bool(false))}, "[f m d]"},
	} {
		got := fmt.Sprint(ranNames(run(t, r, Event{Code: c.code, Info: c.info})))
		if got != c.want {
			t.Errorf("%v %s: ran %s, want %s", c.code, pmix.FormatInfos(c.info), got, c.want)
		}
		if r.Wants(Event{Code: c.code, Info: c.info}) != (c.want != "[]") {
			t.Errorf("%v %s: Wants disagrees", c.code, pmix.FormatInfos(c.info))
		}
	}
	r2 := newTestRegistry(t)
	mustRegister(t, r2, nil, "d", nil)
	if r2.Wants(Event{Code: codeA, Info: nonDef}) {
		t.Error("Wants with only a default handler and NON_DEFAULT")
	}
}

func TestWantsSkipsDeregistered(t *testing.T) {
	r := newTestRegistry(t)
	if r.Wants(Event{Code: codeA}) {
		t.Error("empty registry wants")
	}
	id := mustRegister(t, r, codes(codeA), "a", nil)
	if !r.Wants(Event{Code: codeA}) || r.Wants(Event{Code: codeB}) {
		t.Error("Wants by code")
	}
	r.Deregister(id)
	if r.Wants(Event{Code: codeA}) {
		t.Error("Wants after Deregister")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"default", DefaultConfig(), true},
		{"client", Config{Self: selfOrigin}, true},
		{"negative timeout", Config{DefaultTimeout: -1}, false},
		{"wildcard self", Config{Self: Origin{Proc: pmix.Proc{Nspace: "j", Rank: pmix.RankWildcard}}}, false},
		{"long nspace", Config{Self: Origin{Proc: pmix.Proc{Nspace: string(make([]byte, 300)), Rank: 0}}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			if c.ok {
				wantStatus(t, err, pmix.Success)
			} else {
				wantStatus(t, err, pmix.ErrBadParam)
				if _, err2 := NewRegistry(c.cfg); err2 == nil {
					t.Error("NewRegistry accepted it")
				}
			}
		})
	}
	if DefaultConfig().DefaultTimeout != DefaultHandlerTimeout {
		t.Error("DefaultConfig timeout")
	}
}

func TestStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{CategorySingle.String(), "single"}, {CategoryMulti.String(), "multi"}, {CategoryDefault.String(), "default"},
		{Category(9).String(), "category(9)"},
		{PlaceFirstInCategory.String(), "first-in-category"}, {Placement(42).String(), "placement(42)"},
		{Undecided.String(), "undecided"}, {NoTermination.String(), "no-termination"}, {WantTermination.String(), "want-termination"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}
