package collective

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
)

// raised is one event a service raised through Config.Raise.
type raised struct {
	node    string
	id      string
	code    pmix.Status
	targets []pmix.Proc
	about   pmix.Proc
	// nonDefault: PMIX_EVENT_NON_DEFAULT, default handlers left out
	nonDefault bool
}

// raises records the events the services of a world raise.
type raises struct {
	mu  sync.Mutex
	got []raised
}

func (r *raises) config(c *Config) {
	node := c.Node
	c.Raise = func(_ context.Context, id string, code pmix.Status, info []pmix.Info) error {
		e := raised{node: node, id: id, code: code}
		if v, ok := pmix.LookupValue(info, pmix.KeyEventCustomRange); ok {
			e.targets, _ = v.Procs()
		}
		if v, ok := pmix.LookupValue(info, pmix.KeyEventAffectedProc); ok {
			if ps, ok := v.Procs(); ok && len(ps) == 1 {
				e.about = ps[0]
			}
		}
		e.nonDefault = pmix.Flag(info, pmix.KeyEventNonDefault)
		r.mu.Lock()
		r.got = append(r.got, e)
		r.mu.Unlock()
		return nil
	}
}

func (r *raises) of(code pmix.Status) []raised {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []raised
	for _, e := range r.got {
		if e.code == code {
			out = append(out, e)
		}
	}
	return out
}

func (r *raises) waitCount(t *testing.T, code pmix.Status, n int) []raised {
	t.Helper()
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if got := len(r.of(code)); got != n {
			return fmt.Errorf("%d %v events raised, want %d", got, code, n)
		}
		return nil
	})
	return r.of(code)
}

func jp(r pmix.Rank) pmix.Proc { return pmix.Proc{Nspace: "A:job", Rank: r} }

// waitCoordinating waits until the coordinator (rank 0's agent) heard of
// an operation, and NATS knows its subscriptions.
func (w *world) waitCoordinating() {
	w.t.Helper()
	s := w.svc(0)
	clustertest.WaitFor(w.t, 10*time.Second, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.coord) == 0 {
			return errors.New("the coordinator has no contribution yet")
		}
		return nil
	})
	if err := s.cfg.Conn.Flush(); err != nil {
		w.t.Fatal(err)
	}
}

// TestParticipantTerminatedBeforeConnecting: a participant that
// terminates before it connects fails the connect for all, whether its
// agent had begun the operation or not; with PMIX_CONNECT_OPTIONAL the
// others connect without it.
func TestParticipantTerminatedBeforeConnecting(t *testing.T) {
	for _, tc := range []struct {
		name     string
		nodes    []string
		flags    Flags
		wantRank map[pmix.Rank]pmix.Rank // nil: fails
	}{
		{"alone on its agent", []string{"n1", "n2", "n3"}, 0, nil},
		{"alone on its agent, optional", []string{"n1", "n2", "n3"}, FlagOptional, map[pmix.Rank]pmix.Rank{0: 0, 1: 1}},
		{"beside a participant", []string{"n1", "n2", "n2"}, 0, nil},
		{"beside a participant, optional", []string{"n1", "n2", "n2"}, FlagOptional, map[pmix.Rank]pmix.Rank{0: 0, 1: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.nodes, nil)
			done := make(chan struct{})
			var res map[pmix.Rank]Result
			var errs map[pmix.Rank]error
			go func() {
				defer close(done)
				res, errs = w.join([]pmix.Rank{0, 1}, Request{Kind: KindConnect, Procs: all, Timeout: 20 * time.Second, Flags: tc.flags})
			}()
			w.waitCoordinating()
			if err := w.svc(2).ProcTerminated(t.Context(), pmix.Proc{Nspace: "job", Rank: 2}, true); err != nil {
				t.Fatal(err)
			}
			<-done
			for r := range pmix.Rank(2) {
				if tc.wantRank == nil {
					if !errors.Is(errs[r], ErrParticipantTerminated) || !errors.Is(errs[r], pmix.ErrProcTermWOSync) {
						t.Errorf("rank %d: %v, want ErrParticipantTerminated", r, errs[r])
					}
					continue
				}
				if errs[r] != nil || res[r].Rank != tc.wantRank[r] || len(res[r].Members) != 2 {
					t.Errorf("rank %d: %+v, %v; want rank %d of 2", r, res[r], errs[r], tc.wantRank[r])
				}
			}
			// Reported twice: nothing more (and no panic).
			if err := w.svc(2).ProcTerminated(t.Context(), pmix.Proc{Nspace: "job", Rank: 2}, true); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestMemberTerminatedWithoutDisconnecting: a connected member that
// terminates raises PMIX_ERR_PROC_TERM_WO_SYNC at the others, once
// however often it is reported, and a later fence on the group fails;
// with PMIX_CONNECT_EARLY_TERM_ALLOWED no error is raised (with
// NOTIFY_EACH as well, PMIX_PROC_HAS_DISCONNECTED) and the fence leaves it
// out.
func TestMemberTerminatedWithoutDisconnecting(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flags    Flags
		want     pmix.Status // 0: none
		abnormal bool
	}{
		{"default", 0, pmix.ErrProcTermWOSync, false},
		{"default, abnormal end", 0, pmix.ErrProcTermWOSync, true},
		{"early term allowed", FlagEarlyTermAllowed, 0, false},
		{"early term allowed, notify each", FlagEarlyTermAllowed | FlagNotifyEach, pmix.ProcHasDisconnected, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec raises
			w := newWorld(t, []string{"n1", "n2", "n3"}, rec.config)
			res, errs := w.join([]pmix.Rank{0, 1, 2}, Request{Kind: KindConnect, Procs: all, Timeout: 20 * time.Second, Flags: tc.flags})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("connect, rank %d: %v", r, err)
				}
			}
			group := res[0].Nspace
			for range 2 {
				if err := w.svc(1).ProcTerminated(t.Context(), pmix.Proc{Nspace: "job", Rank: 1}, tc.abnormal); err != nil {
					t.Fatal(err)
				}
			}
			for _, code := range []pmix.Status{pmix.ErrProcTermWOSync, pmix.ProcHasDisconnected} {
				want := 0
				if code == tc.want {
					want = 1
				}
				got := rec.waitCount(t, code, want)
				if want == 1 && (got[0].node != "n2" || got[0].about != jp(1) || !slices.Equal(got[0].targets, []pmix.Proc{jp(0), jp(2)})) {
					t.Errorf("%v: %+v; want it raised at n2 about A:job.1 to A:job.0 and A:job.2", code, got[0])
				}
				// A normal end (it finalized) skips the default handlers:
				// Open MPI 4.1's aborts at any event.
				if want == 1 && code == pmix.ErrProcTermWOSync && got[0].nonDefault == tc.abnormal {
					t.Errorf("%v after an end abnormal %v: non-default %v", code, tc.abnormal, got[0].nonDefault)
				}
			}
			// Every member's agent heard: a fence on the group is one of
			// the other two.
			for _, n := range []string{"n1", "n3"} {
				clustertest.WaitFor(t, 10*time.Second, func() error {
					s := w.svcs[n]
					s.mu.Lock()
					defer s.mu.Unlock()
					q, _ := qualify("A", pmix.Proc{Nspace: group, Rank: pmix.RankWildcard})
					if gr := s.groups[q.Nspace]; gr == nil || !gr.gone[jp(1)] {
						return fmt.Errorf("%s does not know A:job.1 is gone", n)
					}
					return nil
				})
			}
			// A fence on the group leaves it out with EARLY_TERM_ALLOWED,
			// and fails without.
			for r, err := range w.fence([]pmix.Rank{0, 2}, Request{Kind: KindFence, Procs: []pmix.Proc{{Nspace: group, Rank: pmix.RankWildcard}}, Timeout: 20 * time.Second}) {
				if early := tc.flags&FlagEarlyTermAllowed != 0; early && err != nil || !early && !errors.Is(err, ErrParticipantTerminated) {
					t.Errorf("fence on the group, rank %d: %v", r, err)
				}
			}
		})
	}
}

// TestConnectNotifications: NOTIFY_EACH raises PMIX_PROC_HAS_CONNECTED to
// the participants as each arrives and PMIX_PROC_HAS_DISCONNECTED as each
// disconnects; NOTIFY_REQ raises PMIX_CONNECT_REQUESTED once per agent to
// those that have not arrived there.
func TestConnectNotifications(t *testing.T) {
	var rec raises
	w := newWorld(t, []string{"n1", "n1", "n2"}, rec.config)
	done := make(chan error, 1)
	go func() {
		_, err := w.svc(0).Join(t.Context(), Request{Kind: KindConnect, Procs: all, Self: pmix.Proc{Nspace: "job", Rank: 0}, Timeout: 20 * time.Second, Flags: FlagNotifyEach | FlagNotifyReq})
		done <- err
	}()
	req := rec.waitCount(t, pmix.ConnectRequested, 1)
	if req[0].node != "n1" || !slices.Equal(req[0].targets, []pmix.Proc{jp(pmix.RankWildcard)}) || req[0].about != jp(0) {
		t.Errorf("PMIX_CONNECT_REQUESTED: %+v", req[0])
	}
	res, errs := w.join([]pmix.Rank{1, 2}, Request{Kind: KindConnect, Procs: all, Timeout: 20 * time.Second, Flags: FlagNotifyEach | FlagNotifyReq})
	if err := <-done; err != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("connect: %v, %v", err, errs)
	}
	rec.waitCount(t, pmix.ConnectRequested, 2) // n2's; n1 raised it already
	abouts := map[pmix.Proc]bool{}
	for _, e := range rec.waitCount(t, pmix.ProcHasConnected, 3) {
		abouts[e.about] = true
	}
	if len(abouts) != 3 {
		t.Errorf("PMIX_PROC_HAS_CONNECTED about %v; want each of the 3", abouts)
	}
	group := res[1].Nspace
	var wg sync.WaitGroup
	for r := range pmix.Rank(3) {
		wg.Go(func() {
			if err := w.svc(r).Disconnect(t.Context(), pmix.Proc{Nspace: "job", Rank: r}, group, 20*time.Second, FlagNotifyEach); err != nil {
				t.Errorf("disconnect, rank %d: %v", r, err)
			}
		})
	}
	wg.Wait()
	rec.waitCount(t, pmix.ProcHasDisconnected, 3)
}

// TestMembershipSurvivesRestart: the groups are stored where a service
// that restarts reads them again (Restore): it can disconnect, and its
// members' terminations are reported.
func TestMembershipSurvivesRestart(t *testing.T) {
	store := NewMemMemberships()
	var rec raises
	w := newWorld(t, []string{"n1", "n2"}, func(c *Config) {
		c.Memberships = store
		rec.config(c)
	})
	res, errs := w.join([]pmix.Rank{0, 1}, Request{Kind: KindConnect, Procs: all, Timeout: 20 * time.Second})
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("connect: %v", errs)
	}
	group := res[0].Nspace
	q, _ := qualify("A", pmix.Proc{Nspace: group, Rank: pmix.RankWildcard})
	clustertest.WaitFor(t, 10*time.Second, func() error {
		all, _ := store.All(t.Context())
		if m, ok := all[q.Nspace]; !ok || !slices.Equal(m.Members, []pmix.Proc{jp(0), jp(1)}) {
			return fmt.Errorf("stored: %v", all)
		}
		return nil
	})
	old := w.svcs["n2"]
	if err := old.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	restarted, err := New(old.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = restarted.Close(context.Background()) })
	if err := restarted.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := restarted.JobChanged(t.Context(), "job"); err != nil {
		t.Fatal(err)
	}
	w.svcs["n2"] = restarted
	if m, ok := restarted.Members(group); !ok || len(m) != 2 {
		t.Fatalf("members after the restart: %v, %v", m, ok)
	}
	if info, ok := restarted.GroupJobInfo(group); !ok || !slices.ContainsFunc(info, func(i pmix.Info) bool { return i.Key == pmix.KeyJobSize && i.Value.Equal(pmix.Uint32(2)) }) {
		t.Errorf("job-level info of the group: %v, %v", info, ok)
	}
	if err := restarted.ProcTerminated(t.Context(), pmix.Proc{Nspace: "job", Rank: 1}, true); err != nil {
		t.Fatal(err)
	}
	if got := rec.waitCount(t, pmix.ErrProcTermWOSync, 1); got[0].node != "n2" {
		t.Errorf("raised at %s", got[0].node)
	}
	// The survivor disconnects alone: the restarted agent told n1.
	clustertest.WaitFor(t, 10*time.Second, func() error {
		s := w.svcs["n1"]
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.groups[q.Nspace].gone[jp(1)] {
			return errors.New("n1 does not know A:job.1 is gone")
		}
		return nil
	})
	if err := w.svc(0).Disconnect(t.Context(), pmix.Proc{Nspace: "job", Rank: 0}, group, 20*time.Second, 0); err != nil {
		t.Fatalf("disconnect: %v", err)
	}
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if all, _ := store.All(t.Context()); len(all) != 0 {
			return fmt.Errorf("stored after the disconnect: %v", all)
		}
		return nil
	})
}

// TestConcurrentConnectsAndLatecomer: connects of the same participants
// at once, told apart by PMIX_CONNECT_ID, each complete with a new nspace
// of their own; a participant that calls a connect that failed without it
// gets ErrFinished, not a hang.
func TestConcurrentConnectsAndLatecomer(t *testing.T) {
	w := newWorld(t, []string{"n1", "n2"}, nil)
	var mu sync.Mutex
	nspaces := map[string]string{}
	var wg sync.WaitGroup
	for _, id := range []string{"x", "y"} {
		wg.Go(func() {
			res, errs := w.join([]pmix.Rank{0, 1}, Request{Kind: KindConnect, ID: id, Procs: all, Timeout: 20 * time.Second})
			if errs[0] != nil || errs[1] != nil || res[0].Nspace != res[1].Nspace {
				t.Errorf("connect %s: %+v, %v", id, res, errs)
			}
			mu.Lock()
			nspaces[id] = res[0].Nspace
			mu.Unlock()
		})
	}
	wg.Wait()
	if nspaces["x"] == nspaces["y"] {
		t.Errorf("both connects named %q", nspaces["x"])
	}
	_, errs := w.join([]pmix.Rank{0}, Request{Kind: KindConnect, ID: "late", Procs: all, Timeout: time.Second})
	if !errors.Is(errs[0], ErrTimeout) {
		t.Fatalf("connect without rank 1: %v, want ErrTimeout", errs[0])
	}
	_, errs = w.join([]pmix.Rank{1}, Request{Kind: KindConnect, ID: "late", Procs: all, Timeout: time.Second})
	if !errors.Is(errs[1], ErrFinished) {
		t.Fatalf("latecomer: %v, want ErrFinished", errs[1])
	}
}

// TestTerminatedBeforeTheCoordinatorHeard: a participant alone on its
// agent that terminated before any agent contributed — its notice went
// out with nobody subscribed — still fails the connect for the others
// (or, OPTIONAL, is left out): the coordinator asks as it subscribes, and
// the participant's agent announces it again.
func TestTerminatedBeforeTheCoordinatorHeard(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags Flags
	}{{"default", 0}, {"optional", FlagOptional}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, []string{"n1", "n2", "n3"}, nil)
			if err := w.svc(2).ProcTerminated(t.Context(), pmix.Proc{Nspace: "job", Rank: 2}, true); err != nil {
				t.Fatal(err)
			}
			res, errs := w.join([]pmix.Rank{0, 1}, Request{Kind: KindConnect, Procs: all, Timeout: 20 * time.Second, Flags: tc.flags})
			for r := range pmix.Rank(2) {
				switch {
				case tc.flags == 0 && !errors.Is(errs[r], ErrParticipantTerminated):
					t.Errorf("rank %d: %v, want ErrParticipantTerminated", r, errs[r])
				case tc.flags != 0 && (errs[r] != nil || res[r].Rank != r || len(res[r].Members) != 2):
					t.Errorf("rank %d: %+v, %v; want rank %d of 2", r, res[r], errs[r], r)
				}
			}
		})
	}
}

// TestNodeDown: the agents that declare a node down (NodeDown, the same
// cause at each) count its processes as terminated: a member of a group
// raises PMIX_ERR_PROC_TERM_WO_SYNC at the others from every agent
// holding the group, with one id, so that each member runs it once (none
// with EARLY_TERM_ALLOWED); a participant of a pending connect fails it,
// or, OPTIONAL, is left out.
func TestNodeDown(t *testing.T) {
	lost := []pmix.Proc{{Nspace: "job", Rank: 2}}
	declare := func(w *world) {
		for _, r := range []pmix.Rank{0, 1} {
			if err := w.svc(r).NodeDown(t.Context(), "A/n3/7", lost); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("connected", func(t *testing.T) {
		for _, flags := range []Flags{0, FlagEarlyTermAllowed} {
			var rec raises
			w := newWorld(t, []string{"n1", "n2", "n3"}, rec.config)
			res, errs := w.join([]pmix.Rank{0, 1, 2}, Request{Kind: KindConnect, Procs: all, Timeout: 20 * time.Second, Flags: flags})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("connect, rank %d: %v", r, err)
				}
			}
			declare(w)
			if flags != 0 {
				// A fence on the group leaves the lost member out: both
				// agents took it for terminated.
				group := []pmix.Proc{{Nspace: res[0].Nspace, Rank: pmix.RankWildcard}}
				for r, err := range w.fence([]pmix.Rank{0, 1}, Request{Kind: KindFence, Procs: group, Timeout: 20 * time.Second}) {
					if err != nil {
						t.Errorf("fence on the group, rank %d: %v", r, err)
					}
				}
				if got := rec.of(pmix.ErrProcTermWOSync); len(got) != 0 {
					t.Errorf("EARLY_TERM_ALLOWED: %+v raised", got)
				}
				continue
			}
			// Every agent holding the group raises it (n3's too: its
			// service runs on here), all with one id.
			got := rec.waitCount(t, pmix.ErrProcTermWOSync, 3)
			if got[0].id == "" || got[0].id != got[1].id || got[0].id != got[2].id {
				t.Errorf("raised %+v; want one id", got)
			}
			for _, e := range got {
				if e.about != jp(2) || !slices.Equal(e.targets, []pmix.Proc{jp(0), jp(1)}) {
					t.Errorf("%+v; want it about A:job.2 to A:job.0 and A:job.1", e)
				}
			}
		}
	})
	for _, flags := range []Flags{0, FlagOptional} {
		t.Run(fmt.Sprint("pending, flags ", flags), func(t *testing.T) {
			w := newWorld(t, []string{"n1", "n2", "n3"}, nil)
			done := make(chan struct{})
			var res map[pmix.Rank]Result
			var errs map[pmix.Rank]error
			go func() {
				defer close(done)
				res, errs = w.join([]pmix.Rank{0, 1}, Request{Kind: KindConnect, Procs: all, Timeout: 20 * time.Second, Flags: flags})
			}()
			w.waitCoordinating()
			declare(w)
			<-done
			for r := range pmix.Rank(2) {
				switch {
				case flags == 0 && !errors.Is(errs[r], ErrParticipantTerminated):
					t.Errorf("rank %d: %v, want ErrParticipantTerminated", r, errs[r])
				case flags != 0 && (errs[r] != nil || len(res[r].Members) != 2):
					t.Errorf("rank %d: %+v, %v; want a group of 2", r, res[r], errs[r])
				}
			}
		})
	}
	t.Run("bad input", func(t *testing.T) {
		w := newWorld(t, []string{"n1"}, nil)
		if err := w.svc(0).NodeDown(t.Context(), "", lost); !errors.Is(err, pmix.ErrBadParam) {
			t.Errorf("no cause: %v", err)
		}
		if err := w.svc(0).NodeDown(t.Context(), "A/n3/7", []pmix.Proc{{Nspace: "job", Rank: pmix.RankWildcard}}); !errors.Is(err, pmix.ErrBadParam) {
			t.Errorf("a WILDCARD proc: %v", err)
		}
	})
}

// TestTerminatedAfterArriving: a participant that terminates after it
// arrived, while the others have not, is a member of the group the
// connect forms, gone at once: its agent raises
// PMIX_ERR_PROC_TERM_WO_SYNC at the others as the release reaches it.
func TestTerminatedAfterArriving(t *testing.T) {
	var rec raises
	w := newWorld(t, []string{"n1", "n2", "n3"}, rec.config)
	done := make(chan map[pmix.Rank]error, 1)
	req := Request{Kind: KindConnect, Procs: all, Timeout: 20 * time.Second}
	go func() {
		_, errs := w.join([]pmix.Rank{0, 2}, req)
		done <- errs
	}()
	coord := w.svc(0)
	clustertest.WaitFor(t, 10*time.Second, func() error {
		coord.mu.Lock()
		defer coord.mu.Unlock()
		for _, co := range coord.coord {
			if co.covered[jp(2)] {
				return nil
			}
		}
		return errors.New("rank 2 has not arrived at the coordinator")
	})
	if err := w.svc(2).ProcTerminated(t.Context(), pmix.Proc{Nspace: "job", Rank: 2}, true); err != nil {
		t.Fatal(err)
	}
	res, errs := w.join([]pmix.Rank{1}, req)
	if errs[1] != nil || len(res[1].Members) != 3 {
		t.Fatalf("rank 1: %+v, %v; want a group of 3", res[1], errs[1])
	}
	for r, err := range <-done {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	got := rec.waitCount(t, pmix.ErrProcTermWOSync, 1)
	if got[0].node != "n3" || got[0].about != jp(2) || !slices.Equal(got[0].targets, []pmix.Proc{jp(0), jp(1)}) {
		t.Errorf("raised %+v; want it at n3 about A:job.2 to A:job.0 and A:job.1", got[0])
	}
}
