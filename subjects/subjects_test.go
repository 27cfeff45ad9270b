package subjects

import (
	"errors"
	"strings"
	"testing"
	"unicode"

	"github.com/pmixbus/pmixbus/pmix"
)

func TestForRange(t *testing.T) {
	full := Target{Cluster: "A", Node: "n1", Nspace: "job1", Session: "s7"}
	cases := []struct {
		r    pmix.Range
		t    Target
		want string
		err  bool
	}{
		{pmix.RangeRM, full, "pmix.evt.A.rm", false},
		{pmix.RangeLocal, full, "pmix.evt.A.node.n1", false},
		{pmix.RangeNamespace, full, "pmix.evt.A.ns.job1", false},
		{pmix.RangeSession, full, "pmix.evt.A.sess.s7", false},
		{pmix.RangeCustom, full, "pmix.evt.A.agent.n1", false},
		{pmix.RangeGlobal, Target{Cluster: "A"}, "pmix.evt.global.A", false},
		{pmix.RangeGlobal, Target{Cluster: "global"}, "pmix.evt.global.=67lobal", false},
		{pmix.RangeGlobal, Target{}, "", true},
		{pmix.RangeNamespace, Target{Cluster: "c.1", Nspace: "a b"}, "pmix.evt.c=2E1.ns.a=20b", false},
		{pmix.RangeRM, Target{Cluster: "global"}, "pmix.evt.=67lobal.rm", false},
		{pmix.RangeProcLocal, full, "", true},
		{pmix.RangeUndef, full, "", true},
		{pmix.RangeInvalid, full, "", true},
		{pmix.RangeLocal, Target{Cluster: "A"}, "", true},
		{pmix.RangeNamespace, Target{Cluster: "A"}, "", true},
		{pmix.RangeSession, Target{Cluster: "A"}, "", true},
		{pmix.RangeCustom, Target{Cluster: "A"}, "", true},
		{pmix.RangeRM, Target{}, "", true},
	}
	for _, c := range cases {
		t.Run(c.r.String()+"/"+c.want, func(t *testing.T) {
			sc, err := ForRange(c.r, c.t)
			if c.err {
				if !errors.Is(err, pmix.ErrBadParam) {
					t.Fatalf("want ErrBadParam, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sc.Prefix() != c.want {
				t.Fatalf("prefix %q, want %q", sc.Prefix(), c.want)
			}
			subj := sc.Subject(pmix.EventNodeDown)
			if subj != c.want+".-231" {
				t.Fatalf("subject %q", subj)
			}
			p, err := Parse(subj)
			if err != nil {
				t.Fatal(err)
			}
			if p.Code != pmix.EventNodeDown || p.Scope.Prefix() != sc.Prefix() || p.Scope.Kind() != sc.Kind() {
				t.Fatalf("parse gave %+v", p)
			}
		})
	}
}

func TestForEventEnvironment(t *testing.T) {
	cases := []struct {
		r    pmix.Range
		t    Target
		want string
	}{
		{pmix.RangeSession, Target{Cluster: "B", Session: "s1"}, "pmix.env.B.sess.s1.-231"},
		{pmix.RangeLocal, Target{Cluster: "B", Node: "n1"}, "pmix.env.B.node.n1.-231"},
		{pmix.RangeNamespace, Target{Cluster: "B", Nspace: "j"}, "pmix.env.B.ns.j.-231"},
		{pmix.RangeRM, Target{Cluster: "B"}, "pmix.env.B.rm.-231"},
		{pmix.RangeGlobal, Target{Cluster: "B"}, "pmix.env.global.B.-231"},
	}
	for _, c := range cases {
		s, err := ForEvent(c.r, true, c.t, pmix.EventNodeDown)
		if err != nil || s != c.want {
			t.Errorf("%v: %q %v, want %q", c.r, s, err, c.want)
			continue
		}
		p, err := Parse(s)
		if err != nil || !p.Scope.IsEnvironment() || p.Scope.Subject(pmix.EventNodeDown) != s {
			t.Errorf("Parse(%q) = %+v, %v", s, p, err)
		}
	}
	if _, err := ForEvent(pmix.RangeSession, true, Target{Cluster: "B"}, 1); err == nil {
		t.Fatal("environment session event without a session accepted")
	}
	s, err := ForEvent(pmix.RangeGlobal, false, Target{Cluster: "B"}, -3001)
	if err != nil || s != "pmix.evt.global.B.-3001" {
		t.Fatalf("%q %v", s, err)
	}
	// A job scope's wildcard never matches its environment twin.
	sc := Node("B", "n1")
	if strings.HasPrefix(sc.Environment().Subject(1), strings.TrimSuffix(sc.Wildcard(), ">")) {
		t.Fatal("environment subject under the job wildcard")
	}
}

func TestPatterns(t *testing.T) {
	sc := Namespace("A", "job1")
	cases := []struct {
		name  string
		codes []pmix.Status
		want  []string
	}{
		{"single", []pmix.Status{-201}, []string{"pmix.evt.A.ns.job1.-201", "pmix.evt.A.ns.job1.-201.nc"}},
		{"set", []pmix.Status{-201, -231, -201}, []string{"pmix.evt.A.ns.job1.-201", "pmix.evt.A.ns.job1.-201.nc", "pmix.evt.A.ns.job1.-231", "pmix.evt.A.ns.job1.-231.nc"}},
		{"default", nil, []string{"pmix.evt.A.ns.job1.>"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := sc.Patterns(c.codes)
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Fatalf("got %v", got)
			}
		})
	}
	p, err := Parse(Global().Wildcard())
	if err != nil || !p.Wildcard || p.Scope.Kind() != KindGlobal {
		t.Fatalf("%+v %v", p, err)
	}
	// Every origin's GLOBAL subjects match Global's patterns; the source
	// filter of one origin matches its own alone, job and environment.
	for _, c := range []struct {
		pattern, subject string
		match            bool
	}{
		{Global().Subject(-201), GlobalFrom("A").Subject(-201), true},
		{Global().TransientSubject(-201), GlobalFrom("A").TransientSubject(-201), true},
		{Global().CachedWildcard(), GlobalFrom("A").TransientSubject(-201), false},
		{GlobalSourceFilter("A"), GlobalFrom("A").Subject(-201), true},
		{GlobalSourceFilter("A"), GlobalFrom("A").Environment().Subject(-201), true},
		{GlobalSourceFilter("A"), GlobalFrom("B").Subject(-201), false},
		{GlobalSourceFilter("A"), GlobalFrom("A").TransientSubject(-201), false},
		{GlobalSourceFilter("A"), CopySubject("A", GlobalFrom("A").Subject(-201)), false},
	} {
		if Match(c.pattern, c.subject) != c.match {
			t.Errorf("Match(%q, %q) = %v", c.pattern, c.subject, !c.match)
		}
	}
	p, err = Parse(GlobalFrom("A").Subject(-201))
	if err != nil || p.Scope.Kind() != KindGlobal || p.Scope.Target().Cluster != "A" || p.Code != -201 {
		t.Fatalf("GLOBAL from A: %+v %v", p, err)
	}
	p, err = Parse(sc.TransientSubject(-201))
	if err != nil || !p.Transient || p.Code != -201 || p.Scope.Prefix() != sc.Prefix() {
		t.Fatalf("transient: %+v %v", p, err)
	}
}

func TestParseRejects(t *testing.T) {
	for _, s := range []string{
		"", "foo.bar", "pmix.evt", "pmix.evt.A.rm", "pmix.evt.A.rm.x", "pmix.evt.A.bogus.-1",
		"pmix.evt.A.ns.-1", "pmix.evt.A.ns.a.b.-1", "pmix.evt.A.rm.extra.-1", "pmix.evt.A=ZZ.rm.-1",
		"pmix.evt.A.ns.a*b.-1", "pmix.evt.A.rm.>.nc", "pmix.evt.A.rm.nc.nc",
		"pmix.env", "pmix.env.A.env.-1", "pmix.env.A.ns.-1",
		"pmix.evt.global.-1", "pmix.evt.global.A.B.-1", "pmix.evt.global.A=ZZ.-1",
	} {
		if _, err := Parse(s); !errors.Is(err, pmix.ErrBadParam) {
			t.Errorf("Parse(%q) = %v", s, err)
		}
	}
}

func TestEscapeToken(t *testing.T) {
	cases := map[string]string{
		"":         "=",
		"plain-1_": "plain-1_",
		"a.b":      "a=2Eb",
		"*":        "=2A",
		">":        "=3E",
		"x y\tz":   "x=20y=09z",
		"A:job":    "A=3Ajob",
		"=":        "=3D",
		"é":        "=C3=A9",
	}
	for in, want := range cases {
		if got := EscapeToken(in); got != want {
			t.Errorf("EscapeToken(%q) = %q, want %q", in, got, want)
		}
		back, err := UnescapeToken(want)
		if err != nil || back != in {
			t.Errorf("UnescapeToken(%q) = %q, %v", want, back, err)
		}
	}
	for _, bad := range []string{"", "a.b", "=", "=4", "=G0", "a b", "a=", "*"} {
		if bad == "=" {
			continue // the empty name
		}
		if _, err := UnescapeToken(bad); err == nil {
			t.Errorf("UnescapeToken(%q) accepted", bad)
		}
	}
}

func validToken(tok string) bool {
	if tok == "" {
		return false
	}
	for _, r := range tok {
		if r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || r > unicode.MaxASCII {
			return false
		}
	}
	return true
}

func FuzzEscapeToken(f *testing.F) {
	for _, s := range []string{"", "a.b", "*", ">", " ", "global", "=", "x=3D", "\xff\x00", "cluster:ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		tok := EscapeToken(name)
		if !validToken(tok) {
			t.Fatalf("EscapeToken(%q) = %q is not a valid token", name, tok)
		}
		back, err := UnescapeToken(tok)
		if err != nil || back != name {
			t.Fatalf("round trip of %q gave %q, %v", name, back, err)
		}
		ct := ClusterToken(name)
		if !validToken(ct) || ct == globalToken {
			t.Fatalf("ClusterToken(%q) = %q", name, ct)
		}
		if back, err := UnescapeToken(ct); err != nil || back != name {
			t.Fatalf("cluster round trip of %q gave %q, %v", name, back, err)
		}
		// A subject built from the name parses back to it.
		if name != "" {
			p, err := Parse(Namespace(name, name).Subject(-1))
			if err != nil || p.Scope.Target().Cluster != name || p.Scope.Target().Nspace != name {
				t.Fatalf("Parse of %q: %+v %v", name, p, err)
			}
		}
	})
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pat, subj string
		want      bool
	}{
		{"a.b.c", "a.b.c", true}, {"a.*.c", "a.b.c", true}, {"a.>", "a.b.c", true}, {"a.>", "a", false},
		{"a.b", "a.b.c", false}, {"a.b.c", "a.b", false}, {"a.*", "a.b.c", false},
	} {
		if got := Match(c.pat, c.subj); got != c.want {
			t.Errorf("%s ~ %s: %v", c.pat, c.subj, got)
		}
	}
}

func TestLimits(t *testing.T) {
	if err := CheckName("nspace", strings.Repeat("n", MaxNameLen)); err != nil {
		t.Fatal(err)
	}
	err := CheckName("nspace", strings.Repeat("n", 3000))
	if !errors.Is(err, pmix.ErrBadParam) || !strings.HasPrefix(err.Error(), "nspace too long: 3000 bytes, at most 255 (") {
		t.Fatalf("long nspace: %v", err)
	}
	if len(err.Error()) > 200 {
		t.Fatalf("the message echoes the name: %d bytes", len(err.Error()))
	}
	// The longest names and key escape to subjects within the limit: every
	// byte escaped triples.
	worst := func(n int) string { return EscapeToken(strings.Repeat("\xff", n)) }
	kv := "$JS.API.DIRECT.GET.KV_PMIXBUS_PUBLISH.$KV.PMIXBUS_PUBLISH.s." + worst(MaxNameLen) + "." + worst(511)
	if err := CheckSubject(kv); err != nil {
		t.Fatalf("a KV subject of the longest session and key: %v", err)
	}
	if err := CheckSubject(strings.Repeat("x", MaxSubjectLen+1)); !errors.Is(err, pmix.ErrBadParam) {
		t.Fatalf("long subject: %v", err)
	}
}

func TestCovers(t *testing.T) {
	for _, c := range []struct {
		client, published Scope
		want              bool
	}{
		{Global(), GlobalFrom("west"), true},
		{Global().Environment(), GlobalFrom("west").Environment(), true},
		{Global(), GlobalFrom("west").Environment(), false},
		{Namespace("A", "job"), Namespace("A", "job"), true},
		{Namespace("A", "job"), Namespace("B", "job"), false},
		{GlobalFrom("west"), Global(), false},
	} {
		if got := c.client.Covers(c.published); got != c.want {
			t.Errorf("%s covers %s: %v, want %v", c.client, c.published, got, c.want)
		}
	}
}

// A cluster's events stream captures its own GLOBAL events alone (the
// others' are sourced), job and environment; the job-events stream the
// copies of every origin's.
func TestCacheSubjectsGlobal(t *testing.T) {
	all, jobs := CacheSubjects("A")
	captures := func(patterns []string, subj string) bool {
		for _, p := range patterns {
			if Match(p, subj) {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		subj string
		want bool
	}{
		{GlobalFrom("A").Subject(-201), true},
		{GlobalFrom("A").Environment().Subject(-201), true},
		{GlobalFrom("B").Subject(-201), false},
		{GlobalFrom("B").Environment().Subject(-201), false},
		{GlobalFrom("A").TransientSubject(-201), false},
		{Namespace("A", "job").Subject(-201), true},
		{Namespace("B", "job").Subject(-201), false},
	} {
		if got := captures(all, c.subj); got != c.want {
			t.Errorf("events stream captures %s: %v, want %v", c.subj, got, c.want)
		}
	}
	if !captures(jobs, CopySubject("A", GlobalFrom("B").Subject(-201))) {
		t.Errorf("job-events stream %v does not capture the copy of B's GLOBAL event", jobs)
	}
}
