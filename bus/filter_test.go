package bus

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

// levelAttr is how a registration gives PMIX_EVENT_JOB_LEVEL or
// PMIX_EVENT_ENVIRO_LEVEL.
type levelAttr int

const (
	absent  levelAttr = iota
	givenT            // given true
	givenF            // given false
	noValue           // given without a value, which PMIx reads as true
)

func (a levelAttr) String() string { return [...]string{"absent", "true", "false", "no-value"}[a] }

func (a levelAttr) info(key string) []pmix.Info {
	switch a {
	case givenT:
		return []pmix.Info{pmix.NewInfo(key, pmix.Bool(true))}
	case givenF:
		return []pmix.Info{pmix.NewInfo(key, pmix.Bool(false))}
	case noValue:
		return []pmix.Info{{Key: key}}
	}
	return nil
}

// rfcLevels is RFC0002's text on the two attributes, as a truth table
// written out by hand rather than computed, keyed by (JOB_LEVEL,
// ENVIRO_LEVEL) as given: does the handler take job events, environment
// events? A registration missing from the table takes neither and must be
// refused. The sentences it follows:
//
//   - JOB_LEVEL: "whether or not job-specific events are to be delivered to
//     this handler. Job-specific events will be delivered to a registered
//     handler by default."
//   - ENVIRO_LEVEL: "whether or not environmental events are to be delivered
//     to this handler. Default: false"
//   - "register solely for environment events of a given type by include
//     the PMIX_EVENT_ENVIRO_LEVEL key": ENVIRO_LEVEL true alone drops the
//     job default.
var rfcLevels = map[[2]levelAttr][2]bool{
	{absent, absent}: {true, false}, // both defaults
	{absent, givenT}: {false, true}, // "solely for environment events"
	{absent, givenF}: {true, false}, // environment explicitly refused; job by default
	{givenT, absent}: {true, false}, // "solely for job-specific events"
	{givenT, givenT}: {true, true},  // both asked for
	{givenT, givenF}: {true, false},
	{givenF, givenT}: {false, true},
	// {givenF, absent} and {givenF, givenF}: nothing at all.
}

func (a levelAttr) given() levelAttr {
	if a == noValue {
		return givenT
	}
	return a
}

// TestLevelsAgainstRFC runs every combination of category, the event's
// range, job or environment event, and JOB_LEVEL / ENVIRO_LEVEL given true,
// false, without a value or absent, against rfcLevels: the chain, Wants,
// Accepts, WantsJob and WantsEnvironment must all agree with it, whatever
// the category (naming a code brings no environment events) and whatever
// the range (delivery by range happens before the registry).
func TestLevelsAgainstRFC(t *testing.T) {
	categories := map[string][]pmix.Status{"single": codes(codeA), "multi": codes(codeA, codeB), "default": nil}
	ranges := []pmix.Range{pmix.RangeRM, pmix.RangeLocal, pmix.RangeNamespace, pmix.RangeSession,
		pmix.RangeGlobal, pmix.RangeCustom, pmix.RangeProcLocal}
	attrs := []levelAttr{absent, givenT, givenF, noValue}
	for catName, cs := range categories {
		for _, job := range attrs {
			for _, env := range attrs {
				t.Run(fmt.Sprintf("%s/job=%v/enviro=%v", catName, job, env), func(t *testing.T) {
					want, registers := rfcLevels[[2]levelAttr{job.given(), env.given()}]
					r := newTestRegistry(t)
					info := append(job.info(pmix.KeyEventJobLevel), env.info(pmix.KeyEventEnviroLevel)...)
					id, err := r.Register(cs, info, noAction)
					if !registers {
						wantStatus(t, err, pmix.ErrBadParam)
						if err != nil && !strings.Contains(err.Error(), "would receive nothing") {
							t.Errorf("refusal says %q", err)
						}
						return
					}
					if err != nil {
						t.Fatalf("Register: %v", err)
					}
					g, _ := r.Lookup(id)
					if g.JobLevelGiven != (job != absent) || g.EnviroLevelGiven != (env != absent) ||
						g.JobLevel != (job.given() == givenT) || g.EnviroLevel != (env.given() == givenT) {
						t.Errorf("Registration levels %v/%v given %v/%v", g.JobLevel, g.EnviroLevel, g.JobLevelGiven, g.EnviroLevelGiven)
					}
					if g.WantsJob() != want[0] || g.WantsEnvironment(codeA) != want[1] {
						t.Errorf("WantsJob %v WantsEnvironment(A) %v, want %v %v", g.WantsJob(), g.WantsEnvironment(codeA), want[0], want[1])
					}
					if got := g.WantsEnvironment(codeC); got != (want[1] && cs == nil) {
						t.Errorf("WantsEnvironment(C) = %v for codes %v", got, cs)
					}
					for _, rng := range ranges {
						for i, environment := range []bool{false, true} {
							ev := Event{Code: codeA, Range: rng, Environment: environment, Source: selfOrigin}
							ran := len(run(t, r, ev).Ran) == 1
							if ran != want[i] || r.Wants(ev) != want[i] || g.Accepts(ev, selfOrigin) != want[i] {
								t.Errorf("range %v environment=%v: ran %v Wants %v Accepts %v, want %v",
									rng, environment, ran, r.Wants(ev), g.Accepts(ev, selfOrigin), want[i])
							}
						}
					}
				})
			}
		}
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

// TestOwnClusterQualifier: a proc of the registry's own cluster matches
// whether it is named bare ("job2", as an agent names same-cluster sources)
// or qualified ("A:job2"), on either side of a CUSTOM source filter or an
// affected-procs filter; another cluster's procs match only qualified.
func TestOwnClusterQualifier(t *testing.T) {
	self := Origin{Cluster: "A", Node: "n1", Session: "s1", Proc: pmix.Proc{Nspace: "job1", Rank: 3}}
	p := func(ns string, r pmix.Rank) pmix.Proc { return pmix.Proc{Nspace: ns, Rank: r} }
	src := func(pr pmix.Proc) Origin { return Origin{Cluster: "A", Node: "n2", Proc: pr} }
	custom := func(ps ...pmix.Proc) []pmix.Info {
		return []pmix.Info{pmix.NewInfo(pmix.KeyRange, pmix.RangeValue(pmix.RangeCustom)), pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs(ps))}
	}
	affected := func(ps ...pmix.Proc) []pmix.Info {
		return []pmix.Info{pmix.NewInfo(pmix.KeyEventAffectedProcs, pmix.Procs(ps))}
	}
	cases := []struct {
		name string
		reg  []pmix.Info
		ev   Event
		want bool
	}{
		{"custom qualified, source bare", custom(p("A:job2", pmix.RankWildcard)), Event{Source: src(p("job2", 0))}, true},
		{"custom bare, source qualified", custom(p("job2", 0)), Event{Source: src(p("A:job2", 0))}, true},
		{"custom qualified, other rank", custom(p("A:job2", 1)), Event{Source: src(p("job2", 0))}, false},
		{"custom other cluster, source bare", custom(p("B:job2", 0)), Event{Source: src(p("job2", 0))}, false},
		{"custom other cluster, source of it", custom(p("B:job2", 0)), Event{Source: Origin{Cluster: "B", Proc: p("B:job2", 0)}}, true},
		{"custom bare, source of another cluster", custom(p("job2", 0)), Event{Source: Origin{Cluster: "B", Proc: p("B:job2", 0)}}, false},
		{"a prefix is not a qualifier", custom(p("A:job2", 0)), Event{Source: src(p("AA:job2", 0))}, false},
		{"affected qualified, event bare", affected(p("A:job3", 1)), Event{Info: affected(p("job3", 1))}, true},
		{"affected bare, event qualified", affected(p("job3", pmix.RankWildcard)), Event{Info: affected(p("A:job3", 4))}, true},
		{"affected other cluster", affected(p("B:job3", 1)), Event{Info: affected(p("job3", 1))}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRegistry(t, func(cfg *Config) { cfg.Self = self })
			id := mustRegister(t, r, codes(codeA), "h", nil, c.reg...)
			g, _ := r.Lookup(id)
			c.ev.Code = codeA
			if got := len(run(t, r, c.ev).Ran) == 1; got != c.want {
				t.Errorf("ran %v, want %v", got, c.want)
			}
			if r.Wants(c.ev) != c.want || g.Accepts(c.ev, self) != c.want {
				t.Error("Wants or Accepts disagree with the chain")
			}
		})
	}
}
