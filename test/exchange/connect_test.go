package exchange

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/collective"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
)

// mustConnectAll connects all seven procs of collSpec's two jobs and
// returns the new nspace.
func mustConnectAll(t *testing.T, w *agenttest.World, info ...pmix.Info) string {
	t.Helper()
	res := e2e.ConnectAll(t, w, namesBoth, bothJobs, info...)
	for n, c := range res {
		if c.Err != nil {
			t.Fatalf("%s: connect: %v", n, c.Err)
		}
	}
	return res[namesBoth[0]].Nspace
}

func affectedProc(d e2e.Delivery) pmix.Proc {
	v, _ := pmix.LookupValue(d.Info, pmix.KeyEventAffectedProc)
	ps, _ := v.Procs()
	if len(ps) != 1 {
		return pmix.Proc{}
	}
	return ps[0]
}

// TestConnectedGroupIsAJob: the new nspace of a connect across two
// clusters is a job: a host's NAMESPACE event to it reaches every member
// on both clusters, and its job size is the group's.
func TestConnectedGroupIsAJob(t *testing.T) {
	aw := agenttest.Start(t, collSpec())
	w := e2e.WorldOf(t, aw)
	const code = pmix.ExternalErrBase - 7
	e2e.RegisterAll(t, w, namesBoth, code)
	group := mustConnectAll(t, aw)
	for _, node := range []string{"a2", "b1"} { // from either cluster
		if _, err := aw.Agent(node).Notify(t.Context(), code, pmix.RangeNamespace, false, []pmix.Info{pmix.NewInfo(pmix.KeyNspace, pmix.String(group))}); err != nil {
			t.Fatalf("notify from %s: %v", node, err)
		}
	}
	for _, n := range namesBoth {
		w.Client(n).Rec.WaitCount(t, code, 2)
	}
	for _, n := range []string{"A:jobA.1", "B:jobB.2"} {
		v, err := aw.Client(n).Get(t.Context(), pmix.Proc{Nspace: group, Rank: pmix.RankWildcard}, pmix.KeyJobSize, nil)
		if err != nil || !v.Equal(pmix.Uint32(7)) {
			t.Errorf("%s: job size of %s: %v, %v; want 7", n, group, v, err)
		}
	}
}

// TestConnectNotifications: PMIX_CONNECT_NOTIFY_REQ tells a participant
// that has not called yet, on another cluster, that it is asked to;
// PMIX_CONNECT_NOTIFY_EACH tells every member as each connects, and as
// each disconnects.
func TestConnectNotifications(t *testing.T) {
	aw := agenttest.Start(t, collSpec())
	w := e2e.WorldOf(t, aw)
	e2e.RegisterAll(t, w, namesBoth, pmix.ProcHasConnected, pmix.ProcHasDisconnected, pmix.ConnectRequested)
	each := pmix.NewInfo(pmix.KeyConnectNotifyEach, pmix.Bool(true))
	req := pmix.NewInfo(pmix.KeyConnectNotifyReq, pmix.Bool(true))
	first := make(chan e2e.Connected, 1)
	go func() {
		ns, r, err := aw.Client("A:jobA.0").Connect(t.Context(), bothJobs("A:jobA.0"), []pmix.Info{each, req})
		first <- e2e.Connected{Nspace: ns, Rank: r, Err: err}
	}()
	late := w.Client("B:jobB.2")
	late.Rec.WaitCount(t, pmix.ConnectRequested, 1)
	if d := late.Rec.Of(pmix.ConnectRequested)[0]; affectedProc(d) != (pmix.Proc{Nspace: "A:jobA", Rank: 0}) {
		t.Errorf("PMIX_CONNECT_REQUESTED about %v, want A:jobA.0", affectedProc(d))
	}
	res := e2e.ConnectAll(t, aw, namesBoth[1:], bothJobs, each)
	res["A:jobA.0"] = <-first
	for n, c := range res {
		if c.Err != nil {
			t.Fatalf("%s: connect: %v", n, c.Err)
		}
	}
	for _, n := range namesBoth {
		w.Client(n).Rec.WaitCount(t, pmix.ProcHasConnected, 6) // the others (and, through WILDCARD, itself)
	}
	group := res["A:jobA.0"].Nspace
	var wg sync.WaitGroup
	for _, n := range namesBoth {
		wg.Go(func() {
			if err := aw.Client(n).Disconnect(t.Context(), group, []pmix.Info{each}); err != nil {
				t.Errorf("%s: disconnect: %v", n, err)
			}
		})
	}
	wg.Wait()
	for _, n := range namesBoth {
		w.Client(n).Rec.WaitCount(t, pmix.ProcHasDisconnected, 6)
	}
}

// countContributions counts the contributions to jobA's coordinator.
func countContributions(t *testing.T, aw *agenttest.World) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	sub, err := aw.Agent("a2").NATS().Subscribe(collective.LeadSubject("A", "jobA"), func(*nats.Msg) { n.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := aw.Agent("a2").NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	return &n
}

// TestParticipantTerminatedBeforeConnecting: B:jobB.2, alone on b2,
// terminates while the others wait in a connect, or before any of them
// called (its agent's notice then reaches no coordinator: the coordinator,
// in cluster A, asks B's agents again as it begins to watch jobB): all
// fail with PMIX_ERR_PROC_TERM_WO_SYNC, or, with PMIX_CONNECT_OPTIONAL,
// connect without it.
func TestParticipantTerminatedBeforeConnecting(t *testing.T) {
	for _, tc := range []struct {
		optional, first bool
	}{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run(fmt.Sprintf("optional=%v,terminated first=%v", tc.optional, tc.first), func(t *testing.T) {
			aw := agenttest.Start(t, collSpec())
			contributions := countContributions(t, aw)
			info := []pmix.Info{pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(15))}
			if tc.optional {
				info = append(info, pmix.NewInfo(pmix.KeyConnectOptional, pmix.Bool(true)))
			}
			terminate := func() {
				if err := aw.Agent("b2").ProcTerminated(t.Context(), pmix.Proc{Nspace: "jobB", Rank: 2}, true); err != nil {
					t.Fatal(err)
				}
			}
			if tc.first {
				terminate()
			}
			done := make(chan map[string]e2e.Connected, 1)
			go func() { done <- e2e.ConnectAll(t, aw, namesBoth[:6], bothJobs, info...) }()
			if !tc.first {
				clustertest.WaitFor(t, e2e.WaitTime, func() error {
					if n := contributions.Load(); n < 3 {
						return fmt.Errorf("%d contributions of a1, a2, b1", n)
					}
					return nil
				})
				terminate()
			}
			checkConnectedWithout(t, <-done, tc.optional)
		})
	}
}

// checkConnectedWithout checks what the six participants other than
// B:jobB.2 got from a connect it never joined: with PMIX_CONNECT_OPTIONAL
// one group of the six, ranked 0 to 5; otherwise
// PMIX_ERR_PROC_TERM_WO_SYNC.
func checkConnectedWithout(t *testing.T, res map[string]e2e.Connected, optional bool) {
	t.Helper()
	for i, n := range namesBoth[:6] {
		c := res[n]
		switch {
		case optional && (c.Err != nil || c.Rank != pmix.Rank(i) || c.Nspace != res[namesBoth[0]].Nspace):
			t.Errorf("%s: %q rank %v, %v; want rank %d of the others' group", n, c.Nspace, c.Rank, c.Err, i)
		case !optional && !errors.Is(c.Err, pmix.ErrProcTermWOSync):
			t.Errorf("%s: %v, want PMIX_ERR_PROC_TERM_WO_SYNC", n, c.Err)
		}
	}
}

// TestNodeDownReachesConnects: the agent of b2 dies (its NATS connection
// closed) and b1 declares the node down. B:jobB.2 on it counts as
// terminated: a connect waiting for it fails (OPTIONAL: connects
// without it), and, once connected, the other members on both clusters
// get PMIX_ERR_PROC_TERM_WO_SYNC about it, naming the group, once.
func TestNodeDownReachesConnects(t *testing.T) {
	spec := collSpec()
	spec.Agent = func(c *agent.Config) {
		c.HandlerTimeout = 10 * time.Second
		c.LivenessInterval, c.LivenessTTL = e2e.LiveInterval, e2e.LiveTTL
	}
	lost := pmix.Proc{Nspace: "B:jobB", Rank: 2}
	for _, optional := range []bool{false, true} {
		t.Run(fmt.Sprint("pending, optional=", optional), func(t *testing.T) {
			aw := agenttest.Start(t, spec)
			w := e2e.WorldOf(t, aw)
			e2e.WaitSeen(t, w, []string{"b1", "b2"}, "b1")
			contributions := countContributions(t, aw)
			info := []pmix.Info{pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(15))}
			if optional {
				info = append(info, pmix.NewInfo(pmix.KeyConnectOptional, pmix.Bool(true)))
			}
			done := make(chan map[string]e2e.Connected, 1)
			go func() { done <- e2e.ConnectAll(t, aw, namesBoth[:6], bothJobs, info...) }()
			clustertest.WaitFor(t, e2e.WaitTime, func() error {
				if n := contributions.Load(); n < 3 {
					return fmt.Errorf("%d contributions of a1, a2, b1", n)
				}
				return nil
			})
			aw.Agent("b2").NATS().Close()
			checkConnectedWithout(t, <-done, optional)
		})
	}
	t.Run("connected", func(t *testing.T) {
		aw := agenttest.Start(t, spec)
		w := e2e.WorldOf(t, aw)
		others := namesBoth[:6]
		e2e.RegisterAll(t, w, others, pmix.ErrProcTermWOSync, e2e.FenceCode)
		e2e.WaitSeen(t, w, []string{"b1", "b2"}, "b1")
		group := mustConnectAll(t, aw)
		aw.Agent("b2").NATS().Close()
		ofGroup := func(n string) []e2e.Delivery {
			var out []e2e.Delivery
			for _, d := range w.Client(n).Rec.Of(pmix.ErrProcTermWOSync) {
				if e2e.IsString(d.Info, pmix.KeyNspace, group) {
					out = append(out, d)
				}
			}
			return out
		}
		for _, n := range others {
			clustertest.WaitFor(t, e2e.WaitTime, func() error {
				if len(ofGroup(n)) == 0 {
					return fmt.Errorf("%s: no PMIX_ERR_PROC_TERM_WO_SYNC of %s", n, group)
				}
				return nil
			})
		}
		// Whatever the agents raised before their fences has arrived by
		// the fences: each member got the group's event once.
		e2e.Fence(t, w, []string{"a1", "a2", "b1"}, others, map[string]int{})
		for _, n := range others {
			got := ofGroup(n)
			if len(got) != 1 || affectedProc(got[0]) != lost {
				t.Errorf("%s: %d PMIX_ERR_PROC_TERM_WO_SYNC of the group (%+v), want one about %v", n, len(got), got, lost)
			}
		}
	})
}

// TestMemberTerminatedWithoutDisconnecting: a connected member that
// terminates raises PMIX_ERR_PROC_TERM_WO_SYNC at every other member, on
// both clusters — also when its agent restarted since the connect (the
// membership is in JetStream KV); with PMIX_CONNECT_EARLY_TERM_ALLOWED it
// raises nothing, and the survivors fence on the group without it.
func TestMemberTerminatedWithoutDisconnecting(t *testing.T) {
	for _, tc := range []struct {
		name      string
		earlyTerm bool
		restart   bool
	}{{"default", false, false}, {"after its agent restarted", false, true}, {"early term allowed", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			aw := agenttest.Start(t, collSpec())
			w := e2e.WorldOf(t, aw)
			others := namesBoth[:6]
			e2e.RegisterAll(t, w, others, pmix.ErrProcTermWOSync)
			var info []pmix.Info
			if tc.earlyTerm {
				info = append(info, pmix.NewInfo(pmix.KeyConnectEarlyTermAllowed, pmix.Bool(true)))
			}
			group := mustConnectAll(t, aw, info...)
			b2 := aw.Agent("b2")
			if tc.restart {
				ctx, cancel := context.WithTimeout(t.Context(), e2e.WaitTime)
				defer cancel()
				if err := b2.Shutdown(ctx); err != nil {
					t.Fatal(err)
				}
				var err error
				if b2, err = aw.StartAgent(ctx, "b2"); err != nil {
					t.Fatal(err)
				}
			}
			if err := b2.ProcTerminated(t.Context(), pmix.Proc{Nspace: "jobB", Rank: 2}, false); err != nil {
				t.Fatal(err)
			}
			if tc.earlyTerm {
				mustFence(t, aw, others, same(pmix.Proc{Nspace: group, Rank: pmix.RankWildcard}))
				for _, n := range others {
					if got := w.Client(n).Rec.Of(pmix.ErrProcTermWOSync); len(got) != 0 {
						t.Errorf("%s: %d PMIX_ERR_PROC_TERM_WO_SYNC, want none", n, len(got))
					}
				}
				return
			}
			for _, n := range others {
				w.Client(n).Rec.WaitCount(t, pmix.ErrProcTermWOSync, 1)
				d := w.Client(n).Rec.Of(pmix.ErrProcTermWOSync)[0]
				if p := affectedProc(d); p.Rank != 2 || !slices.Contains([]string{"B:jobB", "jobB"}, p.Nspace) {
					t.Errorf("%s: affected %v, want B:jobB.2", n, p)
				}
			}
		})
	}
}

// launchConnected launches job A (3 ranks on cluster A) and job B (2 ranks
// on cluster B), each through its own cluster's launcher, running testprog
// with RFC0003's rendezvous and connect (-rendezvous) and extra args; it
// waits until every rank connected and returns the runs, their outputs and
// the new nspace, checking that every rank got it and a distinct rank.
func launchConnected(t *testing.T, w *agenttest.World, extra ...string) (runs [2]*launch.Run, outs [2]*e2e.SyncBuffer, group string) {
	t.Helper()
	p := e2e.Prog(t)
	sides := []struct {
		cluster     cluster.ID
		n           int
		mine, other string
	}{{"A", 3, "rv.A", "rv.B"}, {"B", 2, "rv.B", "rv.A"}}
	for i, s := range sides {
		outs[i] = &e2e.SyncBuffer{}
		args := append([]string{"-rendezvous", s.mine + "," + s.other}, extra...)
		r, err := launch.Launch(t.Context(), launch.Config{SignIn: w.SignIn(w.URL(s.cluster)), Stdout: outs[i], Stderr: outs[i],
			Jobs: []launch.JobSpec{{N: s.n, MapBy: launch.MapByNode, App: launch.App{Path: p, Args: args}}}})
		if err != nil {
			t.Fatalf("launch on %s: %v", s.cluster, err)
		}
		runs[i] = r
		t.Cleanup(func() { r.Terminate(true) })
	}
	ranks := map[pmix.Rank]string{}
	for i, s := range sides {
		for rk := range s.n {
			var line string
			clustertest.WaitFor(t, e2e.WaitTime, func() error {
				for l := range strings.Lines(outs[i].String()) {
					if strings.HasPrefix(l, fmt.Sprintf("%d: connected ", rk)) {
						line = l
						return nil
					}
				}
				return fmt.Errorf("rank %d of %s has not connected:\n%s", rk, s.cluster, outs[i])
			})
			var ns string
			var newRank pmix.Rank
			if _, err := fmt.Sscanf(line, "%d: connected %s rank %d", new(int), &ns, &newRank); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if group == "" {
				group = ns
			}
			if ns != group {
				t.Errorf("%s rank %d connected to %s, others to %s", s.cluster, rk, ns, group)
			}
			if prev, dup := ranks[newRank]; dup {
				t.Errorf("new rank %d given to %s rank %d and to %s", newRank, s.cluster, rk, prev)
			}
			ranks[newRank] = fmt.Sprintf("%s rank %d", s.cluster, rk)
		}
	}
	for r := range pmix.Rank(5) {
		if _, ok := ranks[r]; !ok {
			t.Errorf("no member got new rank %d: %v", r, ranks)
		}
	}
	if c, _, ok := cluster.Split(group); !ok || c != "A" {
		t.Errorf("new nspace %q: want one qualified with the coordinator's cluster A", group)
	}
	return runs, outs, group
}

// TestConnectLaunchedJobs is RFC0003's example end to end with real
// processes, as `pmixbus run` starts them: two jobs on two clusters
// rendezvous by publish/lookup and connect; all five ranks get one new
// nspace and the ranks 0 to 4, and each reads the other job's size (its
// job-level info, which the connect brought); a NAMESPACE event to the
// new nspace reaches every member on both clusters, which then
// disconnect and end cleanly.
func TestConnectLaunchedJobs(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	const code = pmix.ExternalErrBase - 15
	runs, outs, group := launchConnected(t, w, "-watch", "-codes", fmt.Sprint(int(code)), "-await", fmt.Sprint(int(code)))
	if _, err := w.Agent("a1").Notify(t.Context(), code, pmix.RangeNamespace, false, []pmix.Info{pmix.NewInfo(pmix.KeyNspace, pmix.String(group))}); err != nil {
		t.Fatal(err)
	}
	nspaces := [2]string{runs[0].Nspaces()[0], runs[1].Nspaces()[0]}
	for i, n := range []int{3, 2} {
		for rk := range n {
			other, size := nspaces[1-i], 5-n
			outs[i].WaitFor(t, fmt.Sprintf("%d: get %s of %s = %d err=<nil>", rk, pmix.KeyJobSize, other, size))
			outs[i].WaitFor(t, fmt.Sprintf("%d: event %d ", rk, int(code)))
			outs[i].WaitFor(t, fmt.Sprintf("%d: disconnected", rk))
		}
		ctx, cancel := context.WithTimeout(t.Context(), e2e.WaitTime)
		res, err := runs[i].Wait(ctx)
		cancel()
		if err != nil || res.ExitCode != 0 {
			t.Errorf("run %d: %+v, %v\n%s", i, res, err, outs[i])
		}
	}
}

// TestClientNotifiesGroup: a member addresses the group by its new nspace
// (RFC0003): a CUSTOM event to <new nspace>.WILDCARD reaches every member
// on both clusters, itself included; to <new nspace>.5 only the member
// ranked 5 (B:jobB.1); a rank the group does not have is
// PMIX_ERR_BAD_PARAM.
func TestClientNotifiesGroup(t *testing.T) {
	aw := agenttest.Start(t, collSpec())
	w := e2e.WorldOf(t, aw)
	const all, one = pmix.ExternalErrBase - 21, pmix.ExternalErrBase - 22
	e2e.RegisterAll(t, w, namesBoth, all, one)
	group := mustConnectAll(t, aw)
	sender := aw.Client("A:jobA.1")
	to := func(r pmix.Rank) []pmix.Info {
		return []pmix.Info{pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{{Nspace: group, Rank: r}}))}
	}
	if err := sender.NotifyEvent(t.Context(), one, pmix.RangeCustom, to(5)); err != nil {
		t.Fatal(err)
	}
	if err := sender.NotifyEvent(t.Context(), all, pmix.RangeCustom, to(pmix.RankWildcard)); err != nil {
		t.Fatal(err)
	}
	for _, n := range namesBoth {
		w.Client(n).Rec.WaitCount(t, all, 1)
	}
	w.Client("B:jobB.1").Rec.WaitCount(t, one, 1)
	// Events from one agent arrive in order: the first has arrived
	// wherever it went.
	for _, n := range namesBoth {
		want := 0
		if n == "B:jobB.1" {
			want = 1
		}
		if got := len(w.Client(n).Rec.Of(one)); got != want {
			t.Errorf("%s got the event to %s.5 %d times, want %d", n, group, got, want)
		}
	}
	if err := sender.NotifyEvent(t.Context(), one, pmix.RangeCustom, to(7)); !errors.Is(err, pmix.ErrBadParam) {
		t.Errorf("to %s.7 of 7 members: %v, want PMIX_ERR_BAD_PARAM", group, err)
	}
}

// TestConnectJobAcrossClusters: a job across two clusters (an MPMD run,
// ranks 0-1 on A, 2 on B) connects with a job of cluster B by RFC0003's
// rendezvous: its ranks on both clusters name it alike (its cluster:
// A's, whichever cluster they run on), so all five meet in one connect
// and get one new nspace and the ranks 0 to 4; a NAMESPACE event to the
// new nspace reaches every member, which then disconnect and end.
func TestConnectJobAcrossClusters(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	const code = pmix.ExternalErrBase - 16
	watch := []string{"-watch", "-codes", fmt.Sprint(int(code)), "-await", fmt.Sprint(int(code))}
	outX, outY := &e2e.SyncBuffer{}, &e2e.SyncBuffer{}
	argsX := append([]string{"-rendezvous", "rvx.X,rvx.Y"}, watch...)
	rx, err := launch.Launch(t.Context(), launch.Config{SignIn: w.SignIn(w.URL("A")), Stdout: outX, Stderr: outX, Jobs: []launch.JobSpec{
		{N: 2, Cluster: "A", App: launch.App{Path: p, Args: argsX}},
		{N: 1, Cluster: "B", App: launch.App{Path: p, Args: argsX}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rx.Terminate(true) })
	ry, err := launch.Launch(t.Context(), launch.Config{SignIn: w.SignIn(w.URL("B")), Stdout: outY, Stderr: outY, Jobs: []launch.JobSpec{
		{N: 2, App: launch.App{Path: p, Args: append([]string{"-rendezvous", "rvx.Y,rvx.X"}, watch...)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ry.Terminate(true) })
	group := ""
	ranks := map[pmix.Rank]bool{}
	for _, side := range []struct {
		out *e2e.SyncBuffer
		n   int
	}{{outX, 3}, {outY, 2}} {
		for rk := range side.n {
			side.out.WaitFor(t, fmt.Sprintf("%d: connected ", rk))
			for l := range strings.Lines(side.out.String()) {
				var ns string
				var newRank pmix.Rank
				if _, err := fmt.Sscanf(l, fmt.Sprintf("%d: connected %%s rank %%d", rk), &ns, &newRank); err == nil {
					if group == "" {
						group = ns
					}
					if ns != group || ranks[newRank] {
						t.Errorf("rank %d connected to %s rank %d; group %s, ranks given %v", rk, ns, newRank, group, ranks)
					}
					ranks[newRank] = true
				}
			}
		}
	}
	if len(ranks) != 5 {
		t.Fatalf("new ranks %v\nX:\n%s\nY:\n%s", ranks, outX, outY)
	}
	if _, err := w.Agent("a1").Notify(t.Context(), code, pmix.RangeNamespace, false, []pmix.Info{pmix.NewInfo(pmix.KeyNspace, pmix.String(group))}); err != nil {
		t.Fatal(err)
	}
	for i, r := range []*launch.Run{rx, ry} {
		ctx, cancel := context.WithTimeout(t.Context(), e2e.WaitTime)
		res, err := r.Wait(ctx)
		cancel()
		if err != nil || res.ExitCode != 0 {
			t.Errorf("run %d: %+v, %v\nX:\n%s\nY:\n%s", i, res, err, outX, outY)
		}
	}
	for _, side := range []struct {
		out   *e2e.SyncBuffer
		n     int
		other string
		size  int
	}{{outX, 3, "B:" + ry.Nspace(), 2}, {outY, 2, "A:" + rx.Nspace(), 3}} {
		for rk := range side.n {
			// The connect brought the other job's info, the job across
			// clusters' known by its name on A to the agents of B too.
			side.out.WaitFor(t, fmt.Sprintf("%d: get %s of %s = %d err=<nil>", rk, pmix.KeyJobSize, side.other, side.size))
			side.out.WaitFor(t, fmt.Sprintf("%d: event %d ", rk, int(code)))
			side.out.WaitFor(t, fmt.Sprintf("%d: disconnected", rk))
		}
	}
}
