package collective

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

func jr(r pmix.Rank) pmix.Proc { return pmix.Proc{Nspace: "job", Rank: r} }

// construct runs Construct for ranks, concurrently.
func (w *world) construct(ranks []pmix.Rank, req GroupRequest) (map[pmix.Rank]Result, map[pmix.Rank]error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	res, errs := map[pmix.Rank]Result{}, map[pmix.Rank]error{}
	for _, r := range ranks {
		wg.Go(func() {
			rq := req
			rq.Self = jr(r)
			rq.Info = []pmix.Info{pmix.NewInfo(pmix.KeyGroupLocalCID, pmix.Uint64(1234+uint64(r)))}
			got, err := w.svc(r).Construct(w.t.Context(), rq)
			mu.Lock()
			res[r], errs[r] = got, err
			mu.Unlock()
		})
	}
	wg.Wait()
	return res, errs
}

// TestGroupConstructDestruct: three ranks of four, on three agents,
// construct a group with a context id: the same id and members at each,
// each member's PMIX_GROUP_INFO and committed data readable through the
// group's name, and the destruct forgets the name.
func TestGroupConstructDestruct(t *testing.T) {
	w := newWorld(t, []string{"n1", "n2", "n3", "n3"}, nil)
	ranks := []pmix.Rank{0, 2, 3}
	for _, r := range ranks {
		if err := w.svc(r).Commit(jr(r), []proto.Put{{Scope: pmix.ScopeGlobal, Key: "ep", Value: pmix.Uint32(uint32(r))}}); err != nil {
			t.Fatal(err)
		}
	}
	procs := []pmix.Proc{jr(0), jr(2), jr(3)}
	res, errs := w.construct(ranks, GroupRequest{Name: "ourgroup", Procs: procs, Timeout: 20 * time.Second, Flags: GroupFlagsOf([]pmix.Info{pmix.NewInfo(pmix.KeyGroupAssignCtxID, pmix.Bool(true))})})
	cid := res[0].ContextID
	for _, r := range ranks {
		if errs[r] != nil || res[r].ContextID != cid || cid == 0 || len(res[r].Members) != 3 {
			t.Fatalf("rank %d: %+v, %v; want 3 members and context id %d (not 0)", r, res[r], errs[r], cid)
		}
	}
	// Rank 1 (n2) is no member: its agent knows no such group.
	if _, ok := w.svc(1).GroupContext("ourgroup"); ok {
		t.Error("a non-member's agent knows the group")
	}
	if got, _ := w.svc(2).Members("ourgroup"); !slices.Equal(got, []pmix.Proc{jp(0), jp(2), jp(3)}) {
		t.Errorf("members at rank 2's agent: %v", got)
	}
	if got := w.svc(0).Psets(); len(got) != 1 || !slices.Equal(got["ourgroup"], []pmix.Proc{jp(0), jp(2), jp(3)}) {
		t.Errorf("psets at rank 0's agent: %v", got)
	}
	for _, r := range ranks {
		for i, m := range ranks {
			v, err := w.svc(r).Get(t.Context(), jr(r), pmix.Proc{Nspace: "ourgroup", Rank: pmix.Rank(i)}, "ep", nil)
			if n, _ := v.Int(); err != nil || n != int64(m) {
				t.Errorf("rank %d: ep of group rank %d: %v, %v; want %d", r, i, v, err, m)
			}
			v, err = w.svc(r).Get(t.Context(), jr(r), jr(m), pmix.KeyGroupLocalCID, nil)
			if n, _ := v.Int(); err != nil || n != 1234+int64(m) {
				t.Errorf("rank %d: local cid of %d: %v, %v", r, m, v, err)
			}
		}
	}
	if _, err := w.svc(0).Construct(t.Context(), GroupRequest{Name: "B:g", Procs: procs, Self: jr(0)}); !errors.Is(err, pmix.ErrBadParam) {
		t.Errorf("a name with a ':': %v, want PMIX_ERR_BAD_PARAM", err)
	}
	// A second construct gets another context id.
	res2, errs2 := w.construct(ranks, GroupRequest{Name: "second", Procs: procs, Flags: FlagAssignContextID})
	if errs2[0] != nil || res2[0].ContextID == cid || res2[0].ContextID == 0 {
		t.Errorf("second group: %+v, %v; want a context id other than %d", res2[0], errs2[0], cid)
	}
	var wg sync.WaitGroup
	derrs := make([]error, len(ranks))
	for i, r := range ranks {
		wg.Go(func() { derrs[i] = w.svc(r).Destruct(t.Context(), jr(r), "ourgroup", 20*time.Second) })
	}
	wg.Wait()
	for i, err := range derrs {
		if err != nil {
			t.Errorf("destruct at rank %d: %v", ranks[i], err)
		}
	}
	if _, ok := w.svc(0).GroupContext("ourgroup"); ok {
		t.Error("the group is known after its destruct")
	}
	if err := w.svc(0).Destruct(t.Context(), jr(0), "ourgroup", time.Second); !errors.Is(err, pmix.ErrNotFound) {
		t.Errorf("destruct of a destructed group: %v, want ErrNotFound", err)
	}
}

// TestGroupConstructMemberAbsentTimesOut: a member that never calls fails
// the construct with a timeout for every member, naming it; one that
// terminates fails it at once, or with PMIX_GROUP_OPTIONAL is left out.
func TestGroupConstructMemberAbsentTimesOut(t *testing.T) {
	w := newWorld(t, []string{"n1", "n2", "n3"}, nil)
	procs := []pmix.Proc{jr(0), jr(1), jr(2)}
	_, errs := w.construct([]pmix.Rank{0, 1}, GroupRequest{Name: "g", Procs: procs, Timeout: 300 * time.Millisecond})
	for r := range pmix.Rank(2) {
		if !errors.Is(errs[r], pmix.ErrTimeout) {
			t.Errorf("rank %d: %v, want a timeout", r, errs[r])
		}
	}
	for _, optional := range []bool{false, true} {
		w := newWorld(t, []string{"n1", "n2", "n3"}, nil)
		name := "dead"
		var flags Flags
		if optional {
			name, flags = "dead-optional", FlagOptional
		}
		done := make(chan struct{})
		var res map[pmix.Rank]Result
		go func() {
			defer close(done)
			res, errs = w.construct([]pmix.Rank{0, 1}, GroupRequest{Name: name, Procs: procs, Timeout: 20 * time.Second, Flags: flags})
		}()
		w.waitCoordinating()
		if err := w.svc(2).ProcTerminated(t.Context(), jr(2), true); err != nil {
			t.Fatal(err)
		}
		<-done
		for r := range pmix.Rank(2) {
			switch {
			case optional && (errs[r] != nil || len(res[r].Members) != 2):
				t.Errorf("optional, rank %d: %+v, %v; want the two others", r, res[r], errs[r])
			case !optional && (!errors.Is(errs[r], ErrParticipantTerminated) || pmix.StatusOf(errs[r]) != pmix.GroupConstructAbort):
				t.Errorf("rank %d: %v, want PMIX_GROUP_CONSTRUCT_ABORT", r, errs[r])
			}
		}
	}
}

// TestGroupMemberFailedAndLeave: with PMIX_GROUP_NOTIFY_TERMINATION a
// member's termination raises PMIX_GROUP_MEMBER_FAILED at the others; a
// member that leaves raises PMIX_GROUP_LEFT and the destruct goes on
// without it.
func TestGroupMemberFailedAndLeave(t *testing.T) {
	var rs raises
	w := newWorld(t, []string{"n1", "n2", "n3", "n4"}, rs.config)
	procs := []pmix.Proc{jr(0), jr(1), jr(2), jr(3)}
	_, errs := w.construct([]pmix.Rank{0, 1, 2, 3}, GroupRequest{Name: "g", Procs: procs, Flags: FlagGroup | FlagNotifyTermination})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if err := w.svc(3).ProcTerminated(t.Context(), jr(3), true); err != nil {
		t.Fatal(err)
	}
	got := rs.waitCount(t, pmix.GroupMemberFailed, 1)
	if got[0].about != jp(3) || !slices.Equal(got[0].targets, []pmix.Proc{jp(0), jp(1), jp(2)}) {
		t.Errorf("member failed: %+v", got[0])
	}
	if err := w.svc(2).Leave(jr(2), "g"); err != nil {
		t.Fatal(err)
	}
	left := rs.waitCount(t, pmix.GroupLeft, 1)
	// The leaver's agent may not have heard of rank 3's death yet (its
	// notice comes from n4): the dead member may be among the targets,
	// which harms nothing; the live others must be, the leaver not.
	targets := slices.DeleteFunc(slices.Clone(left[0].targets), func(p pmix.Proc) bool { return p == jp(3) })
	if left[0].about != jp(2) || !slices.Equal(targets, []pmix.Proc{jp(0), jp(1)}) {
		t.Errorf("left: %+v", left[0])
	}
	var wg sync.WaitGroup
	derrs := make([]error, 2)
	for r := range pmix.Rank(2) {
		wg.Go(func() { derrs[r] = w.svc(r).Destruct(t.Context(), jr(r), "g", 20*time.Second) })
	}
	wg.Wait()
	for r, err := range derrs {
		if err != nil {
			t.Errorf("destruct at rank %d without the dead and the departed: %v", r, err)
		}
	}
}

// TestGroupLeaveNoticeBeforeRelease: a member's leave notice that reaches
// an agent before that agent had the group's release (the leaver's agent
// had it first, and the member left at once) still excuses the member
// from the group's destruct there. Dropped, the leader's destruct waited
// for the departed member for ever (cabi's TestGroupInvite under load).
func TestGroupLeaveNoticeBeforeRelease(t *testing.T) {
	w := newWorld(t, []string{"n1", "n2"}, nil)
	// n1 hears that rank 1 left "early" before it knows the group.
	leaver, err := w.svc(0).qualify(jr(1))
	if err != nil {
		t.Fatal(err)
	}
	w.svc(0).memberLeft("early", leaver)
	_, errs := w.construct([]pmix.Rank{0, 1}, GroupRequest{Name: "early", Procs: []pmix.Proc{jr(0), jr(1)}, Flags: FlagGroup})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if err := w.svc(0).Destruct(t.Context(), jr(0), "early", 5*time.Second); err != nil {
		t.Errorf("destruct by the member that stayed: %v", err)
	}
}

// TestGroupInviteJoinDecline: the leader invites three; one accepts, one
// declines, one terminates: the group is the leader and the one that
// accepted, the leader heard each answer, and a join to an invitation
// that is not out fails at once.
func TestGroupInviteJoinDecline(t *testing.T) {
	var rs raises
	w := newWorld(t, []string{"n1", "n2", "n3", "n4"}, rs.config)
	var res Result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = w.svc(0).Invite(t.Context(), GroupRequest{Name: "inv", Procs: []pmix.Proc{jr(1), jr(2), jr(3)}, Self: jr(0), Timeout: 20 * time.Second})
	}()
	inv := rs.waitCount(t, pmix.GroupInvited, 1)
	if !slices.Equal(inv[0].targets, []pmix.Proc{jp(1), jp(2), jp(3)}) || inv[0].about != jp(0) {
		t.Errorf("invited: %+v", inv[0])
	}
	var jres Result
	var jerr error
	joined := make(chan struct{})
	go func() {
		defer close(joined)
		jres, jerr = w.svc(1).JoinGroup(t.Context(), jr(1), jr(0), "inv", true, 20*time.Second)
	}()
	if _, err := w.svc(2).JoinGroup(t.Context(), jr(2), jr(0), "inv", false, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := w.svc(3).ProcTerminated(t.Context(), jr(3), true); err != nil {
		t.Fatal(err)
	}
	<-done
	<-joined
	want := []pmix.Proc{jp(0), jp(1)}
	if err != nil || !slices.Equal(res.Members, want) || jerr != nil || !slices.Equal(jres.Members, want) {
		t.Errorf("leader: %+v, %v; joiner: %+v, %v; want members %v", res, err, jres, jerr, want)
	}
	rs.waitCount(t, pmix.GroupInviteAccepted, 1)
	rs.waitCount(t, pmix.GroupInviteDeclined, 1)
	rs.waitCount(t, pmix.GroupConstructDone, 1)
	if _, err := w.svc(1).JoinGroup(t.Context(), jr(1), jr(0), "none", true, time.Second); !errors.Is(err, pmix.ErrNotFound) {
		t.Errorf("join of no invitation: %v, want ErrNotFound", err)
	}
}

// TestGroupLeaderFailed: a leader that terminates after its invitation
// went out is left out of the group its invitees accepted, and they hear
// of it (PMIX_GROUP_LEADER_FAILED).
func TestGroupLeaderFailed(t *testing.T) {
	var rs raises
	w := newWorld(t, []string{"n1", "n2", "n3", "n4"}, rs.config)
	go func() {
		_, _ = w.svc(0).Invite(w.t.Context(), GroupRequest{Name: "lf", Procs: []pmix.Proc{jr(1), jr(2), jr(3)}, Self: jr(0), Timeout: 20 * time.Second})
	}()
	rs.waitCount(t, pmix.GroupInvited, 1)
	var wg sync.WaitGroup
	res := make([]Result, 3)
	errs := make([]error, 3)
	for _, r := range []pmix.Rank{1, 2} {
		wg.Go(func() { res[r], errs[r] = w.svc(r).JoinGroup(t.Context(), jr(r), jr(0), "lf", true, 20*time.Second) })
	}
	rs.waitCount(t, pmix.GroupInviteAccepted, 2)
	if err := w.svc(0).ProcTerminated(t.Context(), jr(0), true); err != nil {
		t.Fatal(err)
	}
	// The last invitee answers after the leader's end.
	clustertest.WaitFor(t, 10*time.Second, func() error {
		w.svc(1).mu.Lock()
		defer w.svc(1).mu.Unlock()
		if !w.svc(1).deadLocked(jp(0)) {
			return errors.New("rank 1's agent has not heard of the leader's end")
		}
		return nil
	})
	if _, err := w.svc(3).JoinGroup(t.Context(), jr(3), jr(0), "lf", false, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, r := range []pmix.Rank{1, 2} {
		if errs[r] != nil || !slices.Contains(res[r].Members, jp(1)) || !slices.Contains(res[r].Members, jp(2)) {
			t.Errorf("rank %d: %+v, %v; want a group of 1 and 2 (the leader, which took part, gone)", r, res[r], errs[r])
		}
	}
	for _, e := range rs.waitCount(t, pmix.GroupLeaderFailed, 2) {
		if e.about != jp(0) {
			t.Errorf("leader failed about %v", e.about)
		}
	}
	if _, err := w.svc(1).JoinGroup(t.Context(), jr(1), pmix.Proc{}, "lf", true, time.Second); !errors.Is(err, pmix.ErrBadParam) {
		t.Errorf("join naming no leader: %v, want PMIX_ERR_BAD_PARAM", err)
	}
}

// TestGroupFTCollective: with PMIX_GROUP_FT_COLLECTIVE a construct that
// loses a member completes on the survivors, each told by
// PMIX_GROUP_MEMBER_FAILED.
func TestGroupFTCollective(t *testing.T) {
	var rs raises
	w := newWorld(t, []string{"n1", "n2", "n3"}, rs.config)
	done := make(chan struct{})
	var res map[pmix.Rank]Result
	var errs map[pmix.Rank]error
	go func() {
		defer close(done)
		res, errs = w.construct([]pmix.Rank{0, 1}, GroupRequest{Name: "ft", Procs: all, Timeout: 20 * time.Second,
			Flags: GroupFlagsOf([]pmix.Info{pmix.NewInfo(pmix.KeyGroupFTCollective, pmix.Bool(true))})})
	}()
	w.waitCoordinating()
	if err := w.svc(2).ProcTerminated(t.Context(), jr(2), true); err != nil {
		t.Fatal(err)
	}
	<-done
	for r := range pmix.Rank(2) {
		if errs[r] != nil || len(res[r].Members) != 2 {
			t.Errorf("rank %d: %+v, %v; want the two survivors", r, res[r], errs[r])
		}
	}
	got := rs.waitCount(t, pmix.GroupMemberFailed, 2)
	for _, e := range got {
		if e.about != jp(2) || len(e.targets) != 1 {
			t.Errorf("member failed: %+v", e)
		}
	}
}

// TestGroupAddMembers: ranks 0 and 2 construct a group naming each other,
// rank 0 adding ranks 1 and 3 (PMIX_GROUP_ADD_MEMBERS), which call
// Construct with no procs, one before the leaders and one after: all four
// get the group of four, one context id, each other's PMIX_GROUP_INFO;
// the added members are invited by rank 0. An added member no leader
// adds times out; one naming added members itself is refused.
func TestGroupAddMembers(t *testing.T) {
	var rs raises
	w := newWorld(t, []string{"n1", "n2", "n3", "n3"}, rs.config)
	var mu sync.Mutex
	var wg sync.WaitGroup
	res, errs := map[pmix.Rank]Result{}, map[pmix.Rank]error{}
	run := func(r pmix.Rank, req GroupRequest) {
		wg.Go(func() {
			req.Name, req.Self, req.Timeout = "grown", jr(r), 20*time.Second
			req.Flags = GroupFlagsOf([]pmix.Info{pmix.NewInfo(pmix.KeyGroupAssignCtxID, pmix.Bool(true))})
			req.Info = []pmix.Info{pmix.NewInfo(pmix.KeyGroupLocalCID, pmix.Uint64(1234+uint64(r)))}
			got, err := w.svc(r).Construct(t.Context(), req)
			mu.Lock()
			res[r], errs[r] = got, err
			mu.Unlock()
		})
	}
	leaders := []pmix.Proc{jr(0), jr(2)}
	run(1, GroupRequest{}) // before the leaders: it asks until they answer
	run(0, GroupRequest{Procs: leaders, Add: []pmix.Proc{jr(1), jr(3)}})
	run(2, GroupRequest{Procs: leaders})
	inv := rs.waitCount(t, pmix.GroupInvited, 1)
	if !slices.Equal(inv[0].targets, []pmix.Proc{jp(1), jp(3)}) || inv[0].about != jp(0) {
		t.Errorf("invited: %+v", inv[0])
	}
	run(3, GroupRequest{}) // after the invitation
	wg.Wait()
	all := []pmix.Proc{jp(0), jp(1), jp(2), jp(3)}
	cid := res[0].ContextID
	for r := range pmix.Rank(4) {
		if errs[r] != nil || !slices.Equal(res[r].Members, all) || res[r].ContextID != cid || cid == 0 {
			t.Fatalf("rank %d: %+v, %v; want members %v and context id %d", r, res[r], errs[r], all, cid)
		}
	}
	for _, r := range []pmix.Rank{0, 3} {
		for m := range pmix.Rank(4) {
			v, err := w.svc(r).Get(t.Context(), jr(r), jr(m), pmix.KeyGroupLocalCID, nil)
			if n, _ := v.Int(); err != nil || n != 1234+int64(m) {
				t.Errorf("rank %d: local cid of %d: %v, %v", r, m, v, err)
			}
		}
	}
	if got, _ := w.svc(1).Members("grown"); !slices.Equal(got, all) {
		t.Errorf("members at rank 1's agent: %v", got)
	}
	_, err := w.svc(1).Construct(t.Context(), GroupRequest{Name: "nobody", Self: jr(1), Timeout: 300 * time.Millisecond})
	if !errors.Is(err, pmix.ErrTimeout) {
		t.Errorf("an added member no leader adds: %v, want PMIX_ERR_TIMEOUT", err)
	}
	_, err = w.svc(1).Construct(t.Context(), GroupRequest{Name: "bad", Self: jr(1), Add: []pmix.Proc{jr(3)}})
	if !errors.Is(err, pmix.ErrBadParam) {
		t.Errorf("an added member adding: %v, want PMIX_ERR_BAD_PARAM", err)
	}
}
