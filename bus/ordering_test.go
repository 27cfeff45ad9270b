package bus

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
)

// op is one step of an ordering scenario: register a handler (named, since
// the scenarios refer to handlers by name) or deregister one by name.
type op struct {
	name  string
	codes []pmix.Status
	attrs []pmix.Info
	err   pmix.Status // the registration must fail with this status
	msg   string      // … and a message containing this
	dereg bool
}

func reg(n string, cs []pmix.Status, attrs ...pmix.Info) op {
	return op{name: n, codes: cs, attrs: attrs}
}

func fails(n string, cs []pmix.Status, status pmix.Status, msg string, attrs ...pmix.Info) op {
	return op{name: n, codes: cs, attrs: attrs, err: status, msg: msg}
}

func dereg(n string) op { return op{name: n, dereg: true} }

type orderScenario struct {
	name string
	ops  []op
	want map[pmix.Status][]string // the chain per event code
}

// applyOps runs a scenario's steps and returns the ids by name.
func applyOps(t *testing.T, r *Registry, ops []op) map[string]ID {
	t.Helper()
	ids := map[string]ID{}
	for _, o := range ops {
		if o.dereg {
			if err := r.Deregister(ids[o.name]); err != nil {
				t.Fatalf("Deregister(%s): %v", o.name, err)
			}
			delete(ids, o.name)
			continue
		}
		attrs := append([]pmix.Info{name(o.name)}, o.attrs...)
		id, err := r.Register(o.codes, attrs, noAction)
		if o.err != pmix.Success {
			wantStatus(t, err, o.err)
			if !strings.Contains(err.Error(), o.msg) {
				t.Fatalf("Register(%s): error %q does not say %q", o.name, err, o.msg)
			}
			if id != 0 {
				t.Fatalf("Register(%s) failed but returned id %d", o.name, id)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Register(%s, %v, %s): %v", o.name, o.codes, pmix.FormatInfos(o.attrs), err)
		}
		ids[o.name] = id
	}
	return ids
}

// categoryScenarios are the placement rules within one category, stated
// once and run for each of the three: cs registers in the category under
// test, other in another category.
func categoryScenarios(cs, other []pmix.Status) []orderScenario {
	A := codeA
	reg := func(n string, attrs ...pmix.Info) op { return reg(n, cs, attrs...) }
	fails := func(n string, status pmix.Status, msg string, attrs ...pmix.Info) op {
		return fails(n, cs, status, msg, attrs...)
	}
	const evreg = pmix.ErrEventRegistration
	return []orderScenario{
		{name: "default is prepend", ops: []op{reg("a"), reg("b"), reg("c")},
			want: map[pmix.Status][]string{A: {"c", "b", "a"}}},
		{name: "PREPEND", ops: []op{reg("a"), reg("b", appendAt), reg("c", prepend)},
			want: map[pmix.Status][]string{A: {"c", "a", "b"}}},
		{name: "APPEND", ops: []op{reg("a"), reg("b", appendAt), reg("c"), reg("d", appendAt)},
			want: map[pmix.Status][]string{A: {"c", "a", "b", "d"}}},
		{name: "FIRST_IN_CATEGORY stays first", ops: []op{
			reg("h", firstInCt), reg("a"), reg("b"), reg("c", prepend), reg("d", after("h")), reg("e", before("a"))},
			want: map[pmix.Status][]string{A: {"h", "d", "c", "b", "e", "a"}}},
		{name: "LAST_IN_CATEGORY stays last", ops: []op{
			reg("t", lastInCt), reg("a", appendAt), reg("b", appendAt), reg("c"), reg("d", before("t")), reg("e", after("b"))},
			want: map[pmix.Status][]string{A: {"c", "a", "b", "e", "d", "t"}}},
		{name: "PREPEND after the head, APPEND before the tail", ops: []op{
			reg("t", lastInCt), reg("h", firstInCt), reg("a", prepend), reg("b", appendAt), reg("c")},
			want: map[pmix.Status][]string{A: {"h", "c", "a", "b", "t"}}},
		{name: "BEFORE", ops: []op{reg("a"), reg("b"), reg("c", before("a")), reg("d", before("b"))},
			want: map[pmix.Status][]string{A: {"d", "b", "c", "a"}}},
		{name: "AFTER", ops: []op{reg("a"), reg("b"), reg("c", after("b")), reg("d", after("a"))},
			want: map[pmix.Status][]string{A: {"b", "c", "a", "d"}}},
		{name: "BEFORE and AFTER the same handler", ops: []op{
			reg("a"), reg("b", after("a")), reg("c", after("a")), reg("d", before("c")), reg("e", before("a"))},
			want: map[pmix.Status][]string{A: {"e", "a", "d", "c", "b"}}},
		{name: "FIRST", ops: []op{reg("a"), reg("f", first), reg("h", firstInCt), reg("b")},
			want: map[pmix.Status][]string{A: {"f", "h", "b", "a"}}},
		{name: "LAST", ops: []op{reg("l", last), reg("a"), reg("t", lastInCt), reg("b", appendAt)},
			want: map[pmix.Status][]string{A: {"a", "b", "t", "l"}}},
		{name: "AFTER the FIRST handler is the front of the category", ops: []op{
			reg("f", first), reg("h", firstInCt), reg("a"), reg("b", after("f"))},
			want: map[pmix.Status][]string{A: {"f", "h", "b", "a"}}},
		{name: "BEFORE the LAST handler is the end of the category", ops: []op{
			reg("l", last), reg("t", lastInCt), reg("a"), reg("b", before("l"))},
			want: map[pmix.Status][]string{A: {"a", "b", "t", "l"}}},
		{name: "second FIRST_IN_CATEGORY", ops: []op{
			reg("h", firstInCt), fails("h2", evreg, "already has a FIRST_IN_CATEGORY handler", firstInCt), reg("a")},
			want: map[pmix.Status][]string{A: {"h", "a"}}},
		{name: "second LAST_IN_CATEGORY", ops: []op{
			reg("t", lastInCt), fails("t2", evreg, "already has a LAST_IN_CATEGORY handler", lastInCt), reg("a")},
			want: map[pmix.Status][]string{A: {"a", "t"}}},
		{name: "second FIRST", ops: []op{
			reg("f", first), fails("f2", evreg, "a FIRST handler is already registered", first)},
			want: map[pmix.Status][]string{A: {"f"}}},
		{name: "second LAST", ops: []op{
			reg("l", last), fails("l2", evreg, "a LAST handler is already registered", last)},
			want: map[pmix.Status][]string{A: {"l"}}},
		{name: "FIRST of another category", ops: []op{
			{name: "f", codes: other, attrs: []pmix.Info{first}},
			fails("f2", evreg, "a FIRST handler is already registered", first)}},
		{name: "BEFORE an unknown name", ops: []op{
			reg("a"), fails("b", evreg, "no handler of that name", before("zz"))},
			want: map[pmix.Status][]string{A: {"a"}}},
		{name: "AFTER an unknown name", ops: []op{
			reg("a"), fails("b", evreg, "no handler of that name", after("zz"))}},
		{name: "BEFORE a handler of another category", ops: []op{
			{name: "o", codes: other}, fails("b", evreg, "category", before("o"))}},
		{name: "AFTER a handler of another category", ops: []op{
			{name: "o", codes: other}, fails("b", evreg, "category", after("o"))}},
		{name: "BEFORE the FIRST handler", ops: []op{
			reg("f", first), fails("b", evreg, "nothing can go before the FIRST handler", before("f"))}},
		{name: "AFTER the LAST handler", ops: []op{
			reg("l", last), fails("b", evreg, "nothing can go after the LAST handler", after("l"))}},
		{name: "BEFORE the FIRST_IN_CATEGORY handler", ops: []op{
			reg("h", firstInCt), fails("b", evreg, "FIRST_IN_CATEGORY", before("h"))}},
		{name: "AFTER the LAST_IN_CATEGORY handler", ops: []op{
			reg("t", lastInCt), fails("b", evreg, "LAST_IN_CATEGORY", after("t"))}},
		{name: "conflicting placements", ops: []op{
			reg("a"),
			fails("b", evreg, pmix.KeyEventHdlrFirst+" and "+pmix.KeyEventHdlrLast, first, last),
			fails("c", evreg, pmix.KeyEventHdlrBefore+" and "+pmix.KeyEventHdlrAfter, before("a"), after("a")),
			fails("d", evreg, pmix.KeyEventHdlrPrepend+" and "+pmix.KeyEventHdlrAppend, prepend, appendAt),
			fails("e", evreg, pmix.KeyEventHdlrFirstInCategory+" and "+pmix.KeyEventHdlrBefore, firstInCt, before("a")),
			fails("f", evreg, pmix.KeyEventHdlrLastInCategory+" and "+pmix.KeyEventHdlrAppend, lastInCt, appendAt)},
			want: map[pmix.Status][]string{A: {"a"}}},
		{name: "false flags place nothing", ops: []op{
			reg("a"), reg("b", pmix.NewInfo(pmix.KeyEventHdlrFirst, pmix.Bool(false)), pmix.NewInfo(pmix.KeyEventHdlrAppend, pmix.Bool(false)))},
			want: map[pmix.Status][]string{A: {"b", "a"}}},
		{name: "a flag with no value is true", ops: []op{
			reg("a"), reg("b", pmix.Info{Key: pmix.KeyEventHdlrAppend})},
			want: map[pmix.Status][]string{A: {"a", "b"}}},
		{name: "deregistering frees the slots", ops: []op{
			reg("f", first), reg("l", last), reg("h", firstInCt), reg("t", lastInCt), reg("a"),
			dereg("f"), dereg("l"), dereg("h"), dereg("t"),
			reg("f2", first), reg("l2", last), reg("h2", firstInCt), reg("t2", lastInCt)},
			want: map[pmix.Status][]string{A: {"f2", "h2", "a", "t2", "l2"}}},
		{name: "deregistering frees the name", ops: []op{
			reg("a"), reg("b"), dereg("a"), reg("a", appendAt)},
			want: map[pmix.Status][]string{A: {"b", "a"}}},
		{name: "BEFORE a deregistered handler", ops: []op{
			reg("a"), reg("b"), dereg("a"), fails("c", evreg, "no handler of that name", before("a"))},
			want: map[pmix.Status][]string{A: {"b"}}},
	}
}

func TestOrderingWithinCategory(t *testing.T) {
	categories := []struct {
		cat       Category
		cs, other []pmix.Status
	}{
		{CategorySingle, codes(codeA), codes(codeA, codeB)},
		{CategoryMulti, codes(codeA, codeB), codes(codeA)},
		{CategoryDefault, nil, codes(codeA)},
	}
	for _, c := range categories {
		t.Run(c.cat.String(), func(t *testing.T) {
			for _, sc := range categoryScenarios(c.cs, c.other) {
				t.Run(sc.name, func(t *testing.T) {
					r := newTestRegistry(t)
					applyOps(t, r, sc.ops)
					for code, want := range sc.want {
						if got := ranNames(run(t, r, Event{Code: code})); !slices.Equal(got, want) {
							t.Errorf("chain for %v: %v, want %v", code, got, want)
						}
					}
					checkRegistrationsOrder(t, r)
				})
			}
		})
	}
}

func TestOrderingAcrossCategories(t *testing.T) {
	const evreg = pmix.ErrEventRegistration
	A, B, C := codeA, codeB, codeC
	scenarios := []orderScenario{
		{name: "single, multi, default", ops: []op{
			reg("d", nil), reg("m", codes(A, B)), reg("s", codes(A)), reg("d2", nil, appendAt), reg("s2", codes(A), appendAt)},
			want: map[pmix.Status][]string{A: {"s", "s2", "m", "d", "d2"}, B: {"m", "d", "d2"}, C: {"d", "d2"}}},
		{name: "FIRST and LAST of any category", ops: []op{
			reg("f", codes(A, B), first), reg("l", codes(B), last), reg("s", codes(A)), reg("d", nil)},
			want: map[pmix.Status][]string{A: {"f", "s", "d"}, B: {"f", "d", "l"}, C: {"d"}}},
		{name: "a default FIRST runs for every code", ops: []op{
			reg("f", nil, first), reg("s", codes(A)), reg("l", nil, last)},
			want: map[pmix.Status][]string{A: {"f", "s", "l"}, C: {"f", "l"}}},
		{name: "one FIRST overall", ops: []op{
			reg("f", codes(A), first), fails("g", nil, evreg, "FIRST", first), dereg("f"), reg("g", nil, first)},
			want: map[pmix.Status][]string{A: {"g"}}},
		{name: "one LAST overall", ops: []op{
			reg("l", codes(A, B), last), fails("m", codes(C), evreg, "LAST", last), dereg("l"), reg("m", codes(C), last)},
			want: map[pmix.Status][]string{C: {"m"}}},
		{name: "one FIRST_IN_CATEGORY per category", ops: []op{
			reg("hs", codes(A), firstInCt), reg("hm", codes(A, B), firstInCt), reg("hd", nil, firstInCt),
			reg("s", codes(A)), reg("m", codes(A, B)), reg("d", nil)},
			want: map[pmix.Status][]string{A: {"hs", "s", "hm", "m", "hd", "d"}}},
		{name: "one LAST_IN_CATEGORY per category", ops: []op{
			reg("ts", codes(A), lastInCt), reg("tm", codes(A, B), lastInCt), reg("td", nil, lastInCt),
			reg("s", codes(A)), reg("m", codes(A, B)), reg("d", nil)},
			want: map[pmix.Status][]string{A: {"s", "ts", "m", "tm", "d", "td"}}},
		{name: "the single category is one category across codes", ops: []op{
			reg("h", codes(A), firstInCt), fails("h2", codes(B), evreg, "FIRST_IN_CATEGORY", firstInCt), reg("s", codes(B))},
			want: map[pmix.Status][]string{A: {"h"}, B: {"s"}}},
		{name: "BEFORE and AFTER across codes of the single category", ops: []op{
			reg("s1", codes(A)), reg("s2", codes(B), before("s1")), reg("s3", codes(B), after("s1")), reg("s4", codes(A), before("s3"))},
			want: map[pmix.Status][]string{A: {"s1", "s4"}, B: {"s2", "s3"}}},
		{name: "multi-category handlers by code", ops: []op{
			reg("m1", codes(A, B)), reg("m2", codes(B, C)), reg("m3", codes(A, C)), reg("m4", codes(A, B, C), after("m2"))},
			want: map[pmix.Status][]string{A: {"m3", "m4", "m1"}, B: {"m2", "m4", "m1"}, C: {"m3", "m2", "m4"}}},
		{name: "multi-category handlers with different sets can be ordered", ops: []op{
			reg("m1", codes(A, B)), reg("m2", codes(B, C), before("m1"))},
			want: map[pmix.Status][]string{B: {"m2", "m1"}}},
		{name: "duplicate codes count once", ops: []op{
			reg("h", codes(A), firstInCt), fails("h2", codes(A, A), evreg, "single category", firstInCt), reg("s", codes(B, B))},
			want: map[pmix.Status][]string{B: {"s"}}},
		{name: "BEFORE a default handler from a single one", ops: []op{
			reg("d", nil), fails("s", codes(A), evreg, "default category", before("d"))}},
		{name: "AFTER the FIRST handler of another category", ops: []op{
			reg("f", nil, first), fails("s", codes(A), evreg, "category", after("f"))}},
		{name: "BEFORE the LAST handler of another category", ops: []op{
			reg("l", codes(A, B), last), fails("s", codes(A), evreg, "category", before("l"))}},
		{name: "deregistering in the middle", ops: []op{
			reg("a", codes(A)), reg("b", codes(A)), reg("c", codes(A)), reg("m", codes(A, B)), dereg("b"), reg("d", codes(A), after("c"))},
			want: map[pmix.Status][]string{A: {"c", "d", "a", "m"}}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			r := newTestRegistry(t)
			applyOps(t, r, sc.ops)
			for code, want := range sc.want {
				if got := ranNames(run(t, r, Event{Code: code})); !slices.Equal(got, want) {
					t.Errorf("chain for %v: %v, want %v", code, got, want)
				}
			}
			checkRegistrationsOrder(t, r)
		})
	}
}

// checkRegistrationsOrder checks that Registrations lists FIRST, then the
// categories in order, then LAST.
func checkRegistrationsOrder(t *testing.T, r *Registry) {
	t.Helper()
	regs := r.Registrations()
	if len(regs) != r.Len() {
		t.Fatalf("Registrations has %d entries, Len %d", len(regs), r.Len())
	}
	inner := regs
	if len(inner) > 0 && inner[0].Placement == PlaceFirst {
		inner = inner[1:]
	}
	if len(inner) > 0 && inner[len(inner)-1].Placement == PlaceLast {
		inner = inner[:len(inner)-1]
	}
	for i, g := range inner {
		if g.Placement == PlaceFirst || g.Placement == PlaceLast {
			t.Errorf("Registrations[%d] %q (%v) is not at an end", i, g.Name, g.Placement)
		}
		if i > 0 && inner[i-1].Category > g.Category {
			t.Errorf("Registrations: %s handler %q after %s handler %q", g.Category, g.Name, inner[i-1].Category, inner[i-1].Name)
		}
	}
}

func TestDuplicateName(t *testing.T) {
	cases := []struct {
		name  string
		codes []pmix.Status
		attrs []pmix.Info
	}{
		{"plain", codes(codeA), nil},
		{"another category", nil, nil},
		{"with a malformed attribute", codes(codeA), []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrFirst, pmix.String("yes"))}},
		{"with conflicting placements", codes(codeA), []pmix.Info{first, last}},
		{"with an unknown BEFORE target", codes(codeA), []pmix.Info{before("nobody")}},
		{"with a negative timeout", codes(codeA), []pmix.Info{pmix.NewInfo(pmix.KeyEventActionTimeout, pmix.Int32(-1))}},
		{"with FIRST while a FIRST exists", codes(codeA), []pmix.Info{first}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRegistry(t)
			mustRegister(t, r, codes(codeB), "dup", nil, first)
			_, err := r.Register(c.codes, append([]pmix.Info{name("dup")}, c.attrs...), noAction)
			wantStatus(t, err, pmix.ErrEventRegistration)
			if !strings.Contains(err.Error(), `"dup" is already registered`) {
				t.Errorf("error %q does not name the duplicate", err)
			}
			if r.Len() != 1 {
				t.Errorf("Len = %d after a failed registration", r.Len())
			}
		})
	}
}

func TestUnnamedHandlers(t *testing.T) {
	r := newTestRegistry(t)
	u1 := mustRegister(t, r, codes(codeA), "", nil)
	u2 := mustRegister(t, r, codes(codeA), "", nil) // no name, so no duplicate
	mustRegister(t, r, codes(codeA), "n", nil, appendAt)
	_, err := r.Register(codes(codeA), []pmix.Info{before("")}, noAction)
	wantStatus(t, err, pmix.ErrBadParam) // an unnamed handler cannot be a target
	o := run(t, r, Event{Code: codeA})
	if got, want := ranNames(o), []string{"#2", "#1", "n"}; !slices.Equal(got, want) || u1 != 1 || u2 != 2 {
		t.Errorf("chain %v, ids %d %d; want %v, ids 1 2", got, u1, u2, want)
	}
}

func TestBadParameters(t *testing.T) {
	cases := []struct {
		name  string
		attrs []pmix.Info
		msg   string
	}{
		{"FIRST as a string", []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrFirst, pmix.String("true"))}, "must be a bool"},
		{"LAST_IN_CATEGORY as an int", []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrLastInCategory, pmix.Int32(1))}, "must be a bool"},
		{"PREPEND as a string", []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrPrepend, pmix.String("x"))}, "must be a bool"},
		{"BEFORE as a bool", []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrBefore, pmix.Bool(true))}, "must be a handler name"},
		{"AFTER empty", []pmix.Info{after("")}, "needs a handler name"},
		{"name as an int", []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.Int32(7))}, "must be a string"},
		{"reserved name", []pmix.Info{name(UnnamedPrefix + "1")}, "reserved prefix"},
		{"JOB_LEVEL as a string", []pmix.Info{pmix.NewInfo(pmix.KeyEventJobLevel, pmix.String("yes"))}, "must be a bool"},
		{"ENVIRO_LEVEL as an int", []pmix.Info{pmix.NewInfo(pmix.KeyEventEnviroLevel, pmix.Int32(1))}, "must be a bool"},
		{"negative integer timeout", []pmix.Info{pmix.NewInfo(pmix.KeyEventActionTimeout, pmix.Int32(-5))}, "not a duration"},
		{"negative float timeout", []pmix.Info{pmix.NewInfo(pmix.KeyEventActionTimeout, pmix.Float64(-0.5))}, "not a duration"},
		{"NaN timeout", []pmix.Info{pmix.NewInfo(pmix.KeyEventActionTimeout, pmix.Float64(math.NaN()))}, "not a duration"},
		{"huge timeout", []pmix.Info{pmix.NewInfo(pmix.KeyEventActionTimeout, pmix.Uint64(math.MaxUint64))}, "not a duration"},
		{"timeout as a string", []pmix.Info{pmix.NewInfo(pmix.KeyEventActionTimeout, pmix.String("5s"))}, "number of seconds"},
		{"range out of bounds", []pmix.Info{pmix.NewInfo(pmix.KeyRange, pmix.RangeValue(pmix.RangeInvalid))}, "not a range"},
		{"range as a string", []pmix.Info{pmix.NewInfo(pmix.KeyRange, pmix.String("session"))}, "must be a range"},
		{"custom range without procs", []pmix.Info{pmix.NewInfo(pmix.KeyRange, pmix.RangeValue(pmix.RangeCustom))}, pmix.KeyEventCustomRange},
		{"procs with another range", []pmix.Info{
			pmix.NewInfo(pmix.KeyRange, pmix.RangeValue(pmix.RangeGlobal)),
			pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{{Nspace: "j", Rank: 0}}))}, "goes with"},
		{"empty custom range", []pmix.Info{pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs(nil))}, "empty list"},
		{"custom proc without nspace", []pmix.Info{pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{{Rank: 1}}))}, "no nspace"},
		{"affected procs as a string", []pmix.Info{pmix.NewInfo(pmix.KeyEventAffectedProcs, pmix.String("j.1"))}, "proc"},
		{"an attribute twice", []pmix.Info{first, first}, "given twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRegistry(t)
			_, err := r.Register(codes(codeA), c.attrs, noAction)
			wantStatus(t, err, pmix.ErrBadParam)
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q does not say %q", err, c.msg)
			}
		})
	}
	t.Run("nil handler", func(t *testing.T) {
		_, err := newTestRegistry(t).Register(nil, nil, nil)
		wantStatus(t, err, pmix.ErrBadParam)
	})
}

func TestRegistrationAttributes(t *testing.T) {
	r := newTestRegistry(t)
	procs := []pmix.Proc{{Nspace: "A:job1", Rank: pmix.RankWildcard}}
	affected := []pmix.Proc{{Nspace: "A:job2", Rank: 4}}
	mustRegister(t, r, codes(codeA, codeC), "y", nil)
	id := mustRegister(t, r, codes(codeB, codeA, codeB), "x", nil,
		before("y"),
		pmix.NewInfo(pmix.KeyEventJobLevel, pmix.Bool(true)),
		pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs(procs)),
		pmix.NewInfo(pmix.KeyEventAffectedProc, pmix.ProcValue(affected[0])),
		pmix.NewInfo(pmix.KeyEventActionTimeout, pmix.Float64(0.25)),
		pmix.NewInfo("some.other.key", pmix.String("ignored")),
	)
	g, ok := r.Lookup(id)
	if !ok {
		t.Fatal("Lookup: not found")
	}
	want := Registration{
		ID: id, Name: "x", Codes: codes(codeB, codeA), Category: CategoryMulti, // sorted: codeB < codeA
		Placement: PlaceBefore, Target: "y", JobLevel: true,
		SourceRange: pmix.RangeCustom, SourceProcs: procs, AffectedProcs: affected,
		Timeout: 250 * time.Millisecond,
	}
	if g.ID != want.ID || g.Name != want.Name || !slices.Equal(g.Codes, want.Codes) || g.Category != want.Category ||
		g.Placement != want.Placement || g.Target != want.Target || g.JobLevel != want.JobLevel || g.EnviroLevel ||
		g.SourceRange != want.SourceRange || !slices.Equal(g.SourceProcs, want.SourceProcs) ||
		!slices.Equal(g.AffectedProcs, want.AffectedProcs) || g.Timeout != want.Timeout {
		t.Errorf("Lookup = %+v\nwant       %+v", g, want)
	}
	g.SourceProcs[0].Rank = 9 // a copy
	if g2, _ := r.Lookup(id); g2.SourceProcs[0].Rank != pmix.RankWildcard {
		t.Error("Registration shares its slices with the registry")
	}
	if _, ok := r.Lookup(999); ok {
		t.Error("Lookup(999) found something")
	}
	for _, tc := range []struct {
		v    pmix.Value
		want time.Duration
	}{
		{pmix.Int32(3), 3 * time.Second}, {pmix.Uint8(1), time.Second}, {pmix.Int64(0), 0},
		{pmix.Float64(0.05), 50 * time.Millisecond},
	} {
		d, err := timeoutValue(pmix.NewInfo(pmix.KeyEventActionTimeout, tc.v))
		if err != nil || d != tc.want {
			t.Errorf("timeout %v = %v, %v; want %v", tc.v, d, err, tc.want)
		}
	}
}

func TestIDs(t *testing.T) {
	r := newTestRegistry(t)
	a := mustRegister(t, r, codes(codeA), "a", nil)
	b := mustRegister(t, r, nil, "", nil)
	if a != 1 || b != 2 {
		t.Fatalf("ids %d, %d; want 1, 2", a, b)
	}
	if _, err := r.Register(codes(codeA), []pmix.Info{name("a")}, noAction); err == nil {
		t.Fatal("duplicate accepted")
	}
	if err := r.Deregister(a); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, r.Deregister(a), pmix.ErrNotFound)
	wantStatus(t, r.Deregister(0), pmix.ErrNotFound)
	wantStatus(t, r.Deregister(77), pmix.ErrNotFound)
	c := mustRegister(t, r, codes(codeA), "a", nil)
	if c != 3 {
		t.Errorf("id after a failed registration and a deregistration = %d, want 3 (never reused)", c)
	}
	err := r.Deregister(77)
	if !errors.Is(err, pmix.ErrNotFound) || !strings.Contains(err.Error(), "77") {
		t.Errorf("Deregister(77) = %v", err)
	}
}
