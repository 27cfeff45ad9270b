package liveness_test

import (
	"slices"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/launch/liveness"
	"github.com/pmixbus/pmixbus/pmix"
)

// TestRemoteEvents: a lost cluster's node that hosted connected processes
// gets one NODE_DOWN, to the local members of the groups those processes
// are in, naming them once each; a node that hosted none gets nothing.
func TestRemoteEvents(t *testing.T) {
	b := func(ns string, r pmix.Rank) pmix.Proc { return pmix.Proc{Nspace: "B:" + ns, Rank: r} }
	a := func(r pmix.Rank) pmix.Proc { return pmix.Proc{Nspace: "jobA", Rank: r} }
	entries := []liveness.Entry{
		{Cluster: "B", Node: "b1", Revision: 3, Record: &liveness.Record{Jobs: []liveness.HostedJob{{Nspace: "sim", Ranks: []pmix.Rank{0, 1}}}}},
		{Cluster: "B", Node: "b2", Revision: 4, Record: &liveness.Record{Jobs: []liveness.HostedJob{{Nspace: "sim", Ranks: []pmix.Rank{2}}, {Nspace: "viz", Ranks: []pmix.Rank{0}}}}},
		{Cluster: "B", Node: "b3", Revision: 5, Record: &liveness.Record{Jobs: []liveness.HostedJob{{Nspace: "other", Ranks: []pmix.Rank{0}}}}},
		{Cluster: "B", Node: "b4", Revision: 6},
	}
	conns := []liveness.Connection{
		{Remote: []pmix.Proc{b("sim", 0), b("sim", 2)}, Local: []pmix.Proc{a(0), a(1)}},
		{Remote: []pmix.Proc{b("sim", 2), b("viz", 0)}, Local: []pmix.Proc{a(1), a(2)}},
	}
	got := liveness.RemoteEvents("B", entries, conns, time.Now())
	if len(got) != 2 {
		t.Fatalf("%d events, want one for b1 and one for b2", len(got))
	}
	for i, want := range []struct {
		node     string
		affected []pmix.Proc
		targets  []pmix.Proc
	}{
		{"b1", []pmix.Proc{b("sim", 0)}, []pmix.Proc{a(0), a(1)}},
		{"b2", []pmix.Proc{b("sim", 2), b("viz", 0)}, []pmix.Proc{a(0), a(1), a(2)}},
	} {
		m := got[i]
		host, _ := pmix.LookupValue(m.Info, pmix.KeyHostname)
		aff, _ := pmix.LookupValue(m.Info, pmix.KeyEventAffectedProcs)
		tgt, _ := pmix.LookupValue(m.Info, pmix.KeyEventCustomRange)
		affected, _ := aff.Procs()
		targets, _ := tgt.Procs()
		if h, _ := host.Str(); h != want.node || m.Code != pmix.EventNodeDown || !slices.Equal(affected, want.affected) || !slices.Equal(targets, want.targets) {
			t.Errorf("event %d: %s, affected %v to %v; want %s, %v to %v", i, pmix.FormatInfos(m.Info), affected, targets, want.node, want.affected, want.targets)
		}
	}
}
