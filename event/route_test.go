package event

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// jobTable is a Jobs for tests: rank → node per nspace.
type jobTable map[string]map[pmix.Rank]string

func (t jobTable) Nodes(nspace string, rank pmix.Rank) ([]string, bool) {
	j, ok := t[nspace]
	if !ok {
		return nil, false
	}
	if rank == pmix.RankWildcard {
		var out []string
		for _, n := range j {
			out = append(out, n)
		}
		slices.Sort(out)
		return slices.Compact(out), true
	}
	if n, ok := j[rank]; ok {
		return []string{n}, true
	}
	return nil, true
}

func info(kv ...any) []pmix.Info {
	var out []pmix.Info
	for i := 0; i < len(kv); i += 2 {
		out = append(out, pmix.NewInfo(kv[i].(string), kv[i+1].(pmix.Value)))
	}
	return out
}

// TestScopes: every range, from a client and from the host RM, job and
// environment events alike.
func TestScopes(t *testing.T) {
	at := Place{Cluster: "A", Node: "n1"}
	long := strings.Repeat("x", 3000)
	jobs := jobTable{"job1": {0: "n1", 1: "n2", 2: "n2"}}
	client := &Sender{Proc: pmix.Proc{Nspace: "job1", Rank: 0}, Session: "s1"}
	p := func(ns string, r pmix.Rank) pmix.Proc { return pmix.Proc{Nspace: ns, Rank: r} }
	cases := []struct {
		name  string
		rng   pmix.Range
		from  *Sender
		info  []pmix.Info
		want  []string // subjects for code 1, job form
		err   bool
		tgets int
	}{
		{name: "rm", rng: pmix.RangeRM, want: []string{"pmix.evt.A.rm.1"}},
		{name: "global", rng: pmix.RangeGlobal, want: []string{"pmix.evt.global.A.1"}},
		{name: "local host", rng: pmix.RangeLocal, want: []string{"pmix.evt.A.node.n1.1"}},
		{name: "local host names node", rng: pmix.RangeLocal, info: info(pmix.KeyHostname, pmix.String("n2")), want: []string{"pmix.evt.A.node.n2.1"}},
		{name: "local client ignores hostname", rng: pmix.RangeLocal, from: client, info: info(pmix.KeyHostname, pmix.String("n2")), want: []string{"pmix.evt.A.node.n1.1"}},
		{name: "namespace client", rng: pmix.RangeNamespace, from: client, want: []string{"pmix.evt.A.ns.job1.1"}},
		{name: "namespace host", rng: pmix.RangeNamespace, info: info(pmix.KeyNspace, pmix.String("job9")), want: []string{"pmix.evt.A.ns.job9.1"}},
		{name: "namespace host other cluster", rng: pmix.RangeNamespace, info: info(pmix.KeyNspace, pmix.String("B:job9")), want: []string{"pmix.evt.B.ns.job9.1"}},
		{name: "namespace host affected", rng: pmix.RangeNamespace, info: info(pmix.KeyEventAffectedProcs, pmix.Procs([]pmix.Proc{p("j", 1), p("j", 2)})), want: []string{"pmix.evt.A.ns.j.1"}},
		{name: "namespace host two nspaces", rng: pmix.RangeNamespace, info: info(pmix.KeyEventAffectedProcs, pmix.Procs([]pmix.Proc{p("j", 1), p("k", 2)})), err: true},
		{name: "namespace host none", rng: pmix.RangeNamespace, err: true},
		{name: "session client", rng: pmix.RangeSession, from: client, want: []string{"pmix.evt.A.sess.s1.1"}},
		{name: "session client without one", rng: pmix.RangeSession, from: &Sender{Proc: p("job1", 0)}, err: true},
		{name: "session host", rng: pmix.RangeSession, info: info(pmix.KeySessionID, pmix.Uint32(7)), want: []string{"pmix.evt.A.sess.7.1"}},
		{name: "session host none", rng: pmix.RangeSession, err: true},
		{name: "custom", rng: pmix.RangeCustom, info: info(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{p("job1", 1), p("job1", 2), p("A:job1", 0)})),
			want: []string{"pmix.evt.A.agent.n2.1", "pmix.evt.A.agent.n1.1"}, tgets: 3},
		{name: "custom wildcard", rng: pmix.RangeCustom, info: info(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{p("job1", pmix.RankWildcard)})),
			want: []string{"pmix.evt.A.agent.n1.1", "pmix.evt.A.agent.n2.1"}, tgets: 1},
		{name: "custom unknown and other cluster", rng: pmix.RangeCustom, info: info(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{p("job7", 1), p("B:job1", 1)})),
			want: []string{"pmix.evt.A.ns.job7.1", "pmix.evt.B.ns.job1.1"}, tgets: 2},
		{name: "custom no such rank", rng: pmix.RangeCustom, info: info(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{p("job1", 9)})), err: true},
		{name: "custom no targets", rng: pmix.RangeCustom, info: info(pmix.KeyEventCustomRange, pmix.Procs(nil)), err: true},
		{name: "proc local", rng: pmix.RangeProcLocal, err: true},
		// Names too long for a subject token are refused before NATS sees
		// them ("maximum control line exceeded" drops the connection).
		{name: "namespace host long nspace", rng: pmix.RangeNamespace, info: info(pmix.KeyNspace, pmix.String(long)), err: true},
		{name: "namespace host long qualified nspace", rng: pmix.RangeNamespace, info: info(pmix.KeyNspace, pmix.String("B:"+long)), err: true},
		{name: "namespace host longest nspace", rng: pmix.RangeNamespace, info: info(pmix.KeyNspace, pmix.String("B:"+long[:subjects.MaxNameLen])),
			want: []string{"pmix.evt.B.ns." + long[:subjects.MaxNameLen] + ".1"}},
		{name: "session host long", rng: pmix.RangeSession, info: info(pmix.KeySessionID, pmix.String(long)), err: true},
		{name: "local host long hostname", rng: pmix.RangeLocal, info: info(pmix.KeyHostname, pmix.String(long)), err: true},
		{name: "custom long nspace", rng: pmix.RangeCustom, from: client, info: info(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{p(long, 0)})), err: true},
		{name: "invalid", rng: pmix.Range(42), err: true},
	}
	for _, c := range cases {
		for _, env := range []bool{false, true} {
			name := c.name
			if env {
				name += "/env"
			}
			t.Run(name, func(t *testing.T) {
				m := &Message{Code: 1, Range: c.rng, Environment: env, Info: c.info}
				scopes, err := Scopes(at, m, c.from, jobs)
				if c.err {
					if !errors.Is(err, pmix.ErrBadParam) {
						t.Fatalf("want ErrBadParam, got %v %v", scopes, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, sc := range scopes {
					if sc.IsEnvironment() != env {
						t.Fatalf("scope %v: environment %v", sc, sc.IsEnvironment())
					}
					got = append(got, sc.Subject(1))
				}
				want := slices.Clone(c.want)
				if env {
					for i, s := range want {
						want[i] = subjects.EnvPrefix + strings.TrimPrefix(s, subjects.Prefix)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("got %v, want %v", got, want)
				}
				if len(m.Targets) != c.tgets {
					t.Fatalf("targets %v", m.Targets)
				}
			})
		}
	}
}

// sent records what Publish sends.
type sent []string

func (s *sent) PublishMsg(m *nats.Msg) error {
	*s = append(*s, m.Subject)
	return nil
}

// TestPublishChecksSubjects: a subject a NATS server would refuse (and
// drop the connection for) fails Publish before any of the event's
// subjects is sent.
func TestPublishChecksSubjects(t *testing.T) {
	ok := subjects.Namespace("A", "job")
	tooLong := subjects.Namespace("A", strings.Repeat("\xff", subjects.MaxSubjectLen/3+1)) // escaped: 3 bytes each
	m := &Message{ID: "e1", Code: 1, Range: pmix.RangeNamespace}
	var got sent
	err := Publish(&got, m, []subjects.Scope{ok, tooLong})
	if !errors.Is(err, pmix.ErrBadParam) || !strings.Contains(err.Error(), "subject too long") || len(err.Error()) > 200 {
		t.Fatalf("Publish to a long subject: %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("sent %d subjects before refusing", len(got))
	}
	if err := Publish(&got, m, []subjects.Scope{ok}); err != nil || len(got) != 1 { // once: the cache copies it
		t.Fatalf("Publish: %v, sent %v", err, got)
	}
}

// TestFor: which local clients an arriving event is for, by scope.
func TestFor(t *testing.T) {
	at := Place{Cluster: "A", Node: "n1"}
	me := pmix.Proc{Nspace: "job1", Rank: 3}
	other := pmix.Proc{Nspace: "job2", Rank: 0}
	cases := []struct {
		name    string
		sc      subjects.Scope
		targets []pmix.Proc
		me, oth bool
	}{
		{"node", subjects.Node("A", "n1"), nil, true, true},
		{"global", subjects.Global(), nil, true, true},
		{"nspace", subjects.Namespace("A", "job1"), nil, true, false},
		{"session", subjects.Session("A", "s1"), nil, true, false},
		{"rm", subjects.RM("A"), nil, false, false},
		{"custom rank", subjects.Agent("A", "n1"), []pmix.Proc{{Nspace: "job1", Rank: 3}}, true, false},
		{"custom qualified", subjects.Agent("A", "n1"), []pmix.Proc{{Nspace: cluster.Qualify("A", "job2"), Rank: 0}}, false, true},
		{"custom wildcard", subjects.Agent("A", "n1"), []pmix.Proc{{Nspace: "job1", Rank: pmix.RankWildcard}}, true, false},
		{"custom other cluster", subjects.Namespace("A", "job1"), []pmix.Proc{{Nspace: "B:job1", Rank: 3}}, false, false},
	}
	for _, c := range cases {
		for _, env := range []bool{false, true} {
			sc := c.sc
			if env {
				sc = sc.Environment()
			}
			rng := pmix.RangeLocal
			if c.targets != nil {
				rng = pmix.RangeCustom
			}
			m := &Message{Code: 1, Range: rng, Environment: env, Targets: c.targets}
			if got := For(at, sc, m, me, "s1"); got != c.me {
				t.Errorf("%s env=%v: for me %v, want %v", c.name, env, got, c.me)
			}
			if got := For(at, sc, m, other, "s2"); got != c.oth {
				t.Errorf("%s env=%v: for other %v, want %v", c.name, env, got, c.oth)
			}
		}
	}
}

func TestBusEventQualifiesForeignSources(t *testing.T) {
	m := &Message{Code: 1}
	m.Source.Cluster, m.Source.Proc = "B", pmix.Proc{Nspace: "job", Rank: 1}
	if ev := m.BusEvent("A"); ev.Source.Proc.Nspace != "B:job" {
		t.Fatalf("foreign source %v", ev.Source.Proc)
	}
	if ev := m.BusEvent("B"); ev.Source.Proc.Nspace != "job" {
		t.Fatalf("own source %v", ev.Source.Proc)
	}
}
