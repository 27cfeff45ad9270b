package exchange

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/query"
)

// groupEvents records the group events a client's handler saw.
type groupEvents struct {
	mu  sync.Mutex
	got map[pmix.Status][]*bus.Call
}

func watchGroupEvents(t *testing.T, c *client.Client) *groupEvents {
	t.Helper()
	g := &groupEvents{got: map[pmix.Status][]*bus.Call{}}
	codes := []pmix.Status{pmix.GroupInvited, pmix.GroupLeft, pmix.GroupInviteAccepted, pmix.GroupInviteDeclined,
		pmix.GroupMemberFailed, pmix.GroupConstructDone}
	_, err := c.RegisterEventHandler(t.Context(), codes, nil, func(call *bus.Call, done bus.Done) {
		g.mu.Lock()
		g.got[call.Code] = append(g.got[call.Code], call)
		g.mu.Unlock()
		done(pmix.EventNoActionTaken, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// wait waits for an event of code and returns the first.
func (g *groupEvents) wait(t *testing.T, who string, code pmix.Status) *bus.Call {
	t.Helper()
	var c *bus.Call
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.got[code]) == 0 {
			return fmt.Errorf("%s has no %v event", who, code)
		}
		c = g.got[code][0]
		return nil
	})
	return c
}

func groupAffected(c *bus.Call) pmix.Proc {
	v, _ := pmix.LookupValue(c.Info, pmix.KeyEventAffectedProc)
	p, _ := v.Proc()
	return p
}

// TestGroupAcrossClusters: a PMIx group of two ranks of cluster A and two
// of cluster B (each its own JetStream domain, linked as leaf nodes),
// through real agents: the construct gives every member the same context
// id and membership, the members' committed data reads through the
// group's name from the other cluster; a member that leaves raises
// PMIX_GROUP_LEFT; an invitation that one accepts and one declines makes a
// group of the leader and the one that accepted; a construct with an
// absent member times out alike at the members that came; a member's
// termination raises PMIX_GROUP_MEMBER_FAILED on both clusters
// (PMIX_GROUP_NOTIFY_TERMINATION); and the destruct goes on without the
// departed and the dead.
func TestGroupAcrossClusters(t *testing.T) {
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}, {ID: "B"}},
		Jobs: []agenttest.Job{
			{Cluster: "A", Nspace: "ja", Nodes: []string{"a1", "a2"}},
			{Cluster: "B", Nspace: "jb", Nodes: []string{"b1", "b2"}},
		},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*e2e.WaitTime)
	defer cancel()
	names := []string{"A:ja.0", "A:ja.1", "B:jb.0", "B:jb.1"}
	evs := map[string]*groupEvents{}
	for i, n := range names {
		c := w.Client(n)
		evs[n] = watchGroupEvents(t, c)
		if err := c.Put(pmix.ScopeGlobal, "ep", pmix.Uint32(uint32(100+i))); err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	procs := []pmix.Proc{{Nspace: "A:ja", Rank: pmix.RankWildcard}, {Nspace: "B:jb", Rank: pmix.RankWildcard}}
	info := []pmix.Info{pmix.NewInfo(pmix.KeyGroupAssignCtxID, pmix.Bool(true)), pmix.NewInfo(pmix.KeyGroupNotifyTerm, pmix.Bool(true))}
	groups := make([]client.Group, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() { groups[i], errs[i] = w.Client(n).GroupConstruct(ctx, "xgrp", procs, info) })
	}
	wg.Wait()
	for i := range names {
		if errs[i] != nil || groups[i].ContextID == 0 || groups[i].ContextID != groups[0].ContextID || len(groups[i].Members) != 4 {
			t.Fatalf("%s: %+v, %v; want 4 members and the context id of the others", names[i], groups[i], errs[i])
		}
	}
	// Group rank 2 is B:jb.0 (members sorted by cluster:nspace, rank).
	checkGet(t, w.Client("A:ja.0"), pmix.Proc{Nspace: "xgrp", Rank: 2}, "ep", pmix.Uint32(102))
	checkGet(t, w.Client("B:jb.1"), pmix.Proc{Nspace: "xgrp", Rank: 1}, "ep", pmix.Uint32(101))
	// The group is a process set to PMIx_Query_info, on either cluster.
	for _, n := range []string{"A:ja.1", "B:jb.0"} {
		got, err := w.Client(n).Query(ctx, []query.Query{{Keys: []string{pmix.KeyQueryPsetNames}},
			{Keys: []string{pmix.KeyQueryPsetMembership}, Qualifiers: []pmix.Info{pmix.NewInfo(pmix.KeyPsetName, pmix.String("xgrp"))}}})
		if err != nil || len(got) != 2 {
			t.Fatalf("%s: pset query: %v, %v", n, got, err)
		}
		if v, _ := got[0].Value.Str(); !strings.Contains(v, "xgrp") {
			t.Errorf("%s: pset names %q", n, v)
		}
		if ms, _ := got[1].Value.Procs(); len(ms) != 4 {
			t.Errorf("%s: xgrp's members %v", n, ms)
		}
	}

	// B:jb.1 leaves.
	if err := w.Client("B:jb.1").GroupLeave(ctx, "xgrp", nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"A:ja.0", "A:ja.1", "B:jb.0"} {
		if got := groupAffected(evs[n].wait(t, n, pmix.GroupLeft)); got != (pmix.Proc{Nspace: "B:jb", Rank: 1}) {
			t.Errorf("%s: PMIX_GROUP_LEFT about %v", n, got)
		}
	}

	// A:ja.0 invites B:jb.0, who accepts, and B:jb.1, who declines.
	var lead client.Group
	var lerr error
	led := make(chan struct{})
	go func() {
		defer close(led)
		lead, lerr = w.Client("A:ja.0").GroupInvite(ctx, "inv", []pmix.Proc{{Nspace: "B:jb", Rank: 0}, {Nspace: "B:jb", Rank: 1}}, nil)
	}()
	if inv := evs["B:jb.1"].wait(t, "B:jb.1", pmix.GroupInvited); inv.Source != (pmix.Proc{Nspace: "A:ja", Rank: 0}) {
		t.Errorf("PMIX_GROUP_INVITED from %v, want the leader A:ja.0 (OpenPMIx's invitees join the source)", inv.Source)
	}
	if _, err := w.Client("B:jb.1").GroupJoin(ctx, "inv", pmix.Proc{Nspace: "A:ja", Rank: 0}, false, nil); err != nil {
		t.Fatal(err)
	}
	joined, err := w.Client("B:jb.0").GroupJoin(ctx, "inv", pmix.Proc{Nspace: "A:ja", Rank: 0}, true, nil)
	<-led
	want := []pmix.Proc{{Nspace: "A:ja", Rank: 0}, {Nspace: "B:jb", Rank: 0}}
	if err != nil || lerr != nil || !slices.Equal(joined.Members, want) || !slices.Equal(lead.Members, want) {
		t.Errorf("invitation: joiner %+v, %v; leader %+v, %v; want members %v", joined, err, lead, lerr, want)
	}
	evs["A:ja.0"].wait(t, "A:ja.0", pmix.GroupInviteAccepted)
	evs["A:ja.0"].wait(t, "A:ja.0", pmix.GroupInviteDeclined)
	evs["B:jb.0"].wait(t, "B:jb.0", pmix.GroupConstructDone)
	if _, err := w.Client("B:jb.0").GroupJoin(ctx, "none", pmix.Proc{Nspace: "A:ja", Rank: 0}, true, nil); !errors.Is(err, pmix.ErrNotFound) {
		t.Errorf("join of an invitation not out: %v, want PMIX_ERR_NOT_FOUND", err)
	}

	// An absent member: both that came time out.
	two := []pmix.Proc{{Nspace: "A:ja", Rank: 1}, {Nspace: "B:jb", Rank: 0}, {Nspace: "B:jb", Rank: 1}}
	tmo := []pmix.Info{pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(1))}
	for _, n := range []string{"A:ja.1", "B:jb.0"} {
		wg.Go(func() {
			if _, err := w.Client(n).GroupConstruct(ctx, "absent", two, tmo); !errors.Is(err, pmix.ErrTimeout) {
				t.Errorf("%s: construct with an absent member: %v, want PMIX_ERR_TIMEOUT", n, err)
			}
		})
	}
	wg.Wait()

	// A:ja.1 terminates: the others hear it, on both clusters.
	if err := w.Agent("a2").ProcTerminated(ctx, pmix.Proc{Nspace: "ja", Rank: 1}, true); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"A:ja.0", "B:jb.0"} {
		if got := groupAffected(evs[n].wait(t, n, pmix.GroupMemberFailed)); got != (pmix.Proc{Nspace: "A:ja", Rank: 1}) {
			t.Errorf("%s: PMIX_GROUP_MEMBER_FAILED about %v", n, got)
		}
	}
	// The destruct, without the departed and the dead.
	for _, n := range []string{"A:ja.0", "B:jb.0"} {
		wg.Go(func() {
			dctx, cancel := context.WithTimeout(ctx, e2e.WaitTime)
			defer cancel()
			if err := w.Client(n).GroupDestruct(dctx, "xgrp", nil); err != nil {
				t.Errorf("%s: destruct: %v", n, err)
			}
		})
	}
	wg.Wait()
	if err := w.Client("A:ja.0").GroupDestruct(ctx, "xgrp", nil); !errors.Is(err, pmix.ErrNotFound) {
		t.Errorf("destruct again: %v, want PMIX_ERR_NOT_FOUND", err)
	}
}

// TestGroupBadRequests: group frames with bad arguments get a PMIx status
// at once, never a hang: no name, a name with ":", no members to invite, a join
// naming no leader, a destruct or leave of no group, a join to an
// invitation not out; a construct of no procs (an added member) that no
// leader adds ends at its PMIX_TIMEOUT.
func TestGroupBadRequests(t *testing.T) {
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "ja", Nodes: []string{"a1", "a2"}}},
	})
	ctx, cancel := context.WithTimeout(t.Context(), e2e.WaitTime)
	defer cancel()
	c := w.Client("A:ja.0")
	all := []pmix.Proc{{Nspace: "ja", Rank: pmix.RankWildcard}}
	for _, tc := range []struct {
		what string
		err  error
		want pmix.Status
	}{
		{"construct without a name", func() error { _, err := c.GroupConstruct(ctx, "", all, nil); return err }(), pmix.ErrBadParam},
		{"construct named with ':'", func() error { _, err := c.GroupConstruct(ctx, "B:x", all, nil); return err }(), pmix.ErrBadParam},
		// No procs: an added member (PMIX_GROUP_ADD_MEMBERS), which no
		// leader adds here.
		{"construct of no procs, added by nobody", func() error {
			_, err := c.GroupConstruct(ctx, "g", nil, []pmix.Info{pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(1))})
			return err
		}(), pmix.ErrTimeout},
		{"invite of no procs", func() error { _, err := c.GroupInvite(ctx, "g", nil, nil); return err }(), pmix.ErrBadParam},
		{"join naming no leader", func() error { _, err := c.GroupJoin(ctx, "g", pmix.Proc{}, true, nil); return err }(), pmix.ErrBadParam},
		{"join of no invitation", func() error {
			_, err := c.GroupJoin(ctx, "g", pmix.Proc{Nspace: "ja", Rank: 1}, true, nil)
			return err
		}(), pmix.ErrNotFound},
		{"destruct of no group", c.GroupDestruct(ctx, "g", nil), pmix.ErrNotFound},
		{"leave of no group", c.GroupLeave(ctx, "g", nil), pmix.ErrNotFound},
		{"construct without the caller", func() error {
			_, err := c.GroupConstruct(ctx, "g", []pmix.Proc{{Nspace: "ja", Rank: 1}}, nil)
			return err
		}(), pmix.ErrBadParam},
	} {
		if pmix.StatusOf(tc.err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.what, tc.err, tc.want)
		}
	}
}
