package cabi

import (
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/agent/agenttest"
)

// TestGroups runs testdata/groups.c (what OpenPMIx 4.2's group.c,
// group_dmodex.c and group_lcl_cid.c do) on 4 ranks on two nodes: the
// constructs assign a context id, every member reads the others' keys
// put after the construct and their PMIX_GROUP_INFO, and each destruct
// succeeds.
func TestGroups(t *testing.T) {
	forEachHeader(t, "groups.c", agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "jg", Nodes: []string{"n1", "n2", "n1", "n2"}, Detached: true}},
	}, func(t *testing.T, bin string, w *agenttest.World) {
		ctx := testContext(t)
		var procs []*started
		for _, r := range []string{"0", "1", "2", "3"} {
			procs = append(procs, start(t, ctx, bin, w.Env("A:jg."+r), "ready"))
		}
		for i, p := range procs {
			out := p.wait(t)
			got := lines(out)
			want := map[string]string{"fence": "0", "construct-all": "0", "put": "0", "destruct-all": "0", "gets": "ok", "finalize": "0"}
			if i != 1 {
				want["construct"], want["cid"], want["destruct"] = "0", "set", "0"
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("rank %d: %s = %q, want %q\n%s", i, k, got[k], v, out)
				}
			}
			if strings.Contains(out, "FAIL") {
				t.Errorf("rank %d:\n%s", i, out)
			}
		}
	})
}

// TestGroupInvite runs testdata/groups.c invite on 4 ranks on two nodes:
// an invitation (the _nb form) that rank 1 accepts and rank 2 declines
// after PMIX_GROUP_INVITED reached them, the leader's answers as events,
// a leave that the leader sees, its destruct alone, and a construct with
// an absent member that times out at both members that came.
func TestGroupInvite(t *testing.T) {
	forEachHeader(t, "groups.c", agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "ji", Nodes: []string{"n1", "n2", "n1", "n2"}, Detached: true}},
	}, func(t *testing.T, bin string, w *agenttest.World) {
		ctx := testContext(t)
		var procs []*started
		for _, r := range []string{"0", "1", "2", "3"} {
			procs = append(procs, start(t, ctx, bin, w.Env("A:ji."+r), "ready", "invite"))
		}
		want := []map[string]string{
			{"invite_nb": "0", "invite": "0", "members": "2", "left": "seen", "destruct": "0", "absent": "-24"},
			{"join": "0", "leave": "0"},
			{"join": "0"},
			{"absent": "-24"},
		}
		for i, p := range procs {
			out := p.wait(t)
			got := lines(out)
			want[i]["register"], want[i]["fence"], want[i]["fence-end"], want[i]["finalize"] = "ok", "0", "0", "0"
			for k, v := range want[i] {
				if got[k] != v {
					t.Errorf("rank %d: %s = %q, want %q\n%s", i, k, got[k], v, out)
				}
			}
		}
	})
}

// TestGroupAddMembers runs testdata/groups.c add on 4 ranks on two nodes:
// ranks 0 and 2 construct a group, rank 0 adding ranks 1 and 3
// (PMIX_GROUP_ADD_MEMBERS), which construct it with no procs; each gets
// the group of four and its context id, and all destruct it.
func TestGroupAddMembers(t *testing.T) {
	forEachHeader(t, "groups.c", agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "ja", Nodes: []string{"n1", "n2", "n1", "n2"}, Detached: true}},
	}, func(t *testing.T, bin string, w *agenttest.World) {
		ctx := testContext(t)
		var procs []*started
		for _, r := range []string{"0", "1", "2", "3"} {
			procs = append(procs, start(t, ctx, bin, w.Env("A:ja."+r), "ready", "add"))
		}
		want := map[string]string{"construct": "0", "cid": "set", "members": "4", "destruct": "0", "finalize": "0"}
		for i, p := range procs {
			out := p.wait(t)
			got := lines(out)
			for k, v := range want {
				if got[k] != v {
					t.Errorf("rank %d: %s = %q, want %q\n%s", i, k, got[k], v, out)
				}
			}
		}
	})
}

// TestGroupAcrossClusters runs testdata/groups.c across: two ranks of
// cluster A and one of cluster B (a JetStream domain each, leaf links)
// construct one group with a context id: the same id and three members at
// each, and each reads every member's value by the group's name.
func TestGroupAcrossClusters(t *testing.T) {
	bin := compile(t, "groups.c", headers(t)[0], true)
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}, {ID: "B"}},
		Jobs: []agenttest.Job{
			{Cluster: "A", Nspace: "ga", Nodes: []string{"a1", "a2"}, Detached: true},
			{Cluster: "B", Nspace: "gb", Nodes: []string{"b1"}, Detached: true},
		},
	})
	ctx := testContext(t)
	var procs []*started
	for _, n := range []string{"A:ga.0", "A:ga.1", "B:gb.0"} {
		procs = append(procs, start(t, ctx, bin, w.Env(n), "ready", "across", "A:ga", "B:gb"))
	}
	cids := map[string]bool{}
	for i, p := range procs {
		out := p.wait(t)
		got := lines(out)
		for k, v := range map[string]string{"put": "0", "construct": "0", "members": "3", "eps": "100,101,110", "destruct": "0", "finalize": "0"} {
			if got[k] != v {
				t.Errorf("proc %d: %s = %q, want %q\n%s", i, k, got[k], v, out)
			}
		}
		cids[got["cid"]] = true
	}
	if len(cids) != 1 || cids["0"] || cids[""] {
		t.Errorf("context ids %v: want one, not 0", cids)
	}
}
