package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
	"github.com/pmixbus/pmixbus/subjects"
)

// checkNoOrphans fails t if a process started from prog still runs.
func checkNoOrphans(t *testing.T, prog string) {
	t.Helper()
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		out, _ := exec.Command("pgrep", "-f", prog).Output()
		if s := strings.TrimSpace(string(out)); s != "" {
			return fmt.Errorf("processes of %s still run: %s", prog, s)
		}
		return nil
	})
}

func TestLaunchAcrossAgents(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{{N: 4, App: launch.App{Path: p, Args: []string{"-say", "hello"}}}}})
	if res.ExitCode != 0 || res.First != nil {
		t.Fatalf("result %+v\n%s", res, out)
	}
	for r := range 4 {
		if !strings.Contains(out.String(), fmt.Sprintf("%d: hello\n", r)) {
			t.Errorf("no output of rank %d:\n%s", r, out)
		}
	}
	j := res.Jobs[0]
	if j.Cluster != "A" || len(j.Ends) != 4 || j.Status != pmix.Success {
		t.Fatalf("job result %+v", j)
	}
	nodes := map[string]int{}
	for _, e := range j.Ends {
		nodes[e.Node]++
	}
	if nodes["a1"] != 2 || nodes["a2"] != 2 {
		t.Errorf("placement by slot over a1, a2 (2 slots each): %v", nodes)
	}
	// A watcher that comes later reads the job's end from the cache, with
	// the read-only key.
	watch := clustertest.Connect(t, w.URL("B"), w.Keys().Option(security.RoleWatch), nats.CustomInboxPrefix(security.WatchInboxPrefix))
	var end *event.Message
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		_, m, err := launch.CachedJobEnd(t.Context(), watch, "A", j.Nspace)
		if err == nil && m == nil {
			err = errors.New("no JOB_END cached yet")
		}
		end = m
		return err
	})
	st, _ := pmix.LookupValue(end.Info, pmix.KeyJobTermStatus)
	nd, _ := pmix.LookupValue(end.Info, pmix.KeyEventNonDefault)
	aff, _ := pmix.LookupValue(end.Info, pmix.KeyEventAffectedProc)
	if s, _ := st.Status(); end.Code != pmix.EventJobEnd || s != pmix.Success || !nd.Equal(pmix.Bool(true)) || !aff.Equal(pmix.ProcValue(pmix.Proc{Nspace: j.Nspace, Rank: pmix.RankWildcard})) {
		t.Errorf("cached JOB_END %v: %s", end.Code, pmix.FormatInfos(end.Info))
	}
	checkNoOrphans(t, p)
}

func TestLaunchExitCodes(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	for _, tt := range []struct {
		fail  string
		state pmix.Status
		code  int
	}{
		{"exit:3", pmix.ErrExitNonzeroTerm, 3},
		{"signal", pmix.ErrProcAbortedBySig, 128 + int(syscall.SIGKILL)},
		{"nofinalize", pmix.ErrProcTermWOSync, 1},
		{"abort:5", pmix.ErrProcRequestedAbort, 5},
	} {
		t.Run(tt.fail, func(t *testing.T) {
			res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{{N: 3, App: launch.App{Path: p,
				Args: []string{"-sleep", "30s", "-fail-rank", "1", "-fail", tt.fail}}}}})
			if res.First == nil || res.First.Rank != 1 || res.First.State != tt.state || res.ExitCode != tt.code {
				t.Fatalf("result %+v first %+v\n%s", res, res.First, out)
			}
		})
	}
	checkNoOrphans(t, p)
}

// TestTerminationReachesOtherRanks: each class of abnormal end reaches
// the handlers of the job's other ranks on the other agent, with the
// right code and PMIX_EVENT_AFFECTED_PROC of type PROC; --continuous
// keeps them running.
func TestTerminationReachesOtherRanks(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	for _, tt := range []struct {
		fail string
		code pmix.Status
	}{
		{"exit:3", pmix.ErrExitNonzeroTerm},
		{"signal", pmix.ErrProcAbortedBySig},
		{"nofinalize", pmix.ErrProcTermWOSync},
	} {
		t.Run(tt.fail, func(t *testing.T) {
			out := &e2e.SyncBuffer{}
			// Rank 3 (on a2) fails; a1's ranks must hear of it. The
			// others end normally once they have (-end-on), and a
			// rank registered after the failure hears it replayed.
			r, err := launch.Launch(t.Context(), launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Continuous: true, Stdout: out, Stderr: out,
				Jobs: []launch.JobSpec{{N: 4, App: launch.App{Path: p, Args: []string{"-watch", "-sleep", "30s", "-end-on", fmt.Sprint(int(tt.code)), "-fail-rank", "3", "-fail", tt.fail}}}}})
			if err != nil {
				t.Fatal(err)
			}
			ns := r.Nspaces()[0][len("A:"):]
			want := fmt.Sprintf("0: event %d affected=%s.3", tt.code, ns)
			out.WaitFor(t, want)
			out.WaitFor(t, fmt.Sprintf("1: event %d affected=%s.3", tt.code, ns))
			res, err := r.Wait(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.First == nil || res.First.Rank != 3 || res.First.State != tt.code {
				t.Fatalf("first %+v", res.First)
			}
			for _, e := range res.Jobs[0].Ends {
				if e.Rank != 3 && e.State != pmix.Success {
					t.Errorf("--continuous: rank %d ended %v (%s), want a normal end", e.Rank, e.State, e.Text)
				}
			}
		})
	}
}

// TestAbortPolicy: by default the first abnormal end ends the others.
func TestAbortPolicy(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{{N: 4, App: launch.App{Path: p,
		Args: []string{"-sleep", "60s", "-fail-rank", "2", "-fail", "exit:7"}}}}})
	if res.ExitCode != 7 || res.First == nil || res.First.Rank != 2 {
		t.Fatalf("result %+v\n%s", res, out)
	}
	if res.Jobs[0].Status != pmix.ErrJobNonZeroTerm {
		t.Errorf("job status %v", res.Jobs[0].Status)
	}
	for _, e := range res.Jobs[0].Ends {
		if e.Rank != 2 && e.State != pmix.ErrProcKilledByCmd {
			t.Errorf("rank %d ended %v (%s), want killed by the abort", e.Rank, e.State, e.Text)
		}
	}
	checkNoOrphans(t, p)
}

// mpmdKeys are the job-level keys an MPMD test prints for each rank.
const mpmdKeys = "pmix.job.size,pmix.univ.size,pmix.job.napps,pmix.appnum,pmix.app.size,pmix.aldr,pmix.apprank,pmix.app.argv"

// checkMPMDInfo fails t unless every rank of a job whose app contexts
// have sizes printed (testprog -get mpmdKeys) what PMIx says of its app:
// ranks numbered across the app contexts, each app's size, leader and
// argv, the whole job's size.
func checkMPMDInfo(t *testing.T, out string, argv []string, sizes ...int) {
	t.Helper()
	total := 0
	for _, n := range sizes {
		total += n
	}
	rank := 0
	for app, n := range sizes {
		for i := range n {
			for _, want := range []string{
				fmt.Sprintf("%d: get pmix.job.size = %d (type %d)", rank, total, pmix.TypeUint32),
				fmt.Sprintf("%d: get pmix.univ.size = %d (type %d)", rank, total, pmix.TypeUint32),
				fmt.Sprintf("%d: get pmix.job.napps = %d (type %d)", rank, len(sizes), pmix.TypeUint32),
				fmt.Sprintf("%d: get pmix.appnum = %d (type %d)", rank, app, pmix.TypeUint32),
				fmt.Sprintf("%d: get pmix.app.size = %d (type %d)", rank, n, pmix.TypeUint32),
				fmt.Sprintf("%d: get pmix.aldr = %d (type %d)", rank, rank-i, pmix.TypeRank),
				fmt.Sprintf("%d: get pmix.apprank = %d (type %d)", rank, i, pmix.TypeRank),
				fmt.Sprintf("%d: get pmix.app.argv = %q (type %d)", rank, argv[app], pmix.TypeString),
			} {
				if !strings.Contains(out, want+" err=<nil>") {
					t.Errorf("no %q in output:\n%s", want, out)
				}
			}
			rank++
		}
	}
}

// TestLaunchMPMD: two app contexts in two clusters are one job of 5
// ranks, numbered across them: one nspace, each rank's app its
// PMIX_APPNUM, each app's size and leader, the job's size; the ranks
// fence together across the clusters; the ends are told apart by rank and
// app.
func TestLaunchMPMD(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{
		{N: 2, Cluster: "A", App: launch.App{Path: p, Args: []string{"-say", "east", "-get", mpmdKeys, "-fence"}}},
		{N: 3, Cluster: "B", MapBy: launch.MapByNode, App: launch.App{Path: p, Args: []string{"-say", "west", "-get", mpmdKeys, "-fence"}}},
	}})
	if res.ExitCode != 0 || len(res.Jobs) != 1 {
		t.Fatalf("result %+v\n%s", res, out)
	}
	j := res.Jobs[0]
	if !slices.Equal(j.Clusters, []cluster.ID{"A", "B"}) || len(j.Ends) != 5 || j.Status != pmix.Success {
		t.Fatalf("job %+v", j)
	}
	for i, e := range j.Ends {
		app, c := 0, cluster.ID("A")
		if i >= 2 {
			app, c = 1, "B"
		}
		if e.Rank != pmix.Rank(i) || e.App != app || e.Cluster != c || e.Nspace != j.Nspace {
			t.Errorf("end %d: %+v", i, e)
		}
	}
	if got := []string{j.Ends[2].Node, j.Ends[3].Node, j.Ends[4].Node}; got[0] != "b1" || got[1] != "b2" || got[2] != "b1" {
		t.Errorf("map-by node on B: %v", got)
	}
	for r, word := range []string{"east", "east", "west", "west", "west"} {
		if strings.Count(out.String(), fmt.Sprintf("%d: %s\n", r, word)) != 2 {
			t.Errorf("rank %d's output:\n%s", r, out)
		}
	}
	checkMPMDInfo(t, out.String(), []string{p + " -say east -get " + mpmdKeys + " -fence", p + " -say west -get " + mpmdKeys + " -fence"}, 2, 3)
}

// TestLaunchMPMDEventsAcrossClusters: a job across two clusters hears
// its own ranks' events on both: the end of a rank in B reaches the ranks
// in A (the agents publish the job's NAMESPACE events on each of its
// clusters), after a fence of all five.
func TestLaunchMPMDEventsAcrossClusters(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	watch := []string{"-watch", "-codes", "-404", "-fence", "-await", "-404"}
	res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Continuous: true, Jobs: []launch.JobSpec{
		{N: 2, Cluster: "A", App: launch.App{Path: p, Args: watch}},
		{N: 2, Cluster: "B", App: launch.App{Path: p, Args: watch}},
		{N: 1, Cluster: "B", App: launch.App{Path: p, Args: []string{"-fence", "-fail-rank", "4", "-fail", "exit:5"}}},
	}})
	if res.ExitCode != 5 || res.First == nil || res.First.Rank != 4 || res.First.App != 2 || res.First.Cluster != "B" {
		t.Fatalf("result %+v, first %+v\n%s", res, res.First, out)
	}
	for r := range 4 {
		if want := fmt.Sprintf("%d: event -404 affected=%s.4 exit=5\n", r, res.Jobs[0].Nspace); !strings.Contains(out.String(), want) {
			t.Errorf("no %q in output:\n%s", want, out)
		}
	}
}

// TestWantTermination: RFC0018's PMIX_EVENT_WANT_TERMINATION acts. The
// handler of rank 0 (app 0) decides the application should terminate on
// an event the RM raises to the job: the agent ends rank 0 as if it had
// called PMIx_Abort for itself (status 1, the handler named), and the
// job's policy decides for the rest: by default the run aborts the other
// ranks; with --continuous they run to their end.
func TestWantTermination(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	const code = pmix.ExternalErrBase - 30
	watch := []string{"-watch", "-codes", fmt.Sprint(int(code)), "-sleep", "4s"}
	for _, continuous := range []bool{false, true} {
		t.Run(fmt.Sprintf("continuous=%v", continuous), func(t *testing.T) {
			out := &e2e.SyncBuffer{}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			r, err := launch.Launch(ctx, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Stdout: out, Stderr: out, Continuous: continuous, Jobs: []launch.JobSpec{
				{N: 1, App: launch.App{Path: p, Args: append([]string{"-want-term"}, watch...)}},
				{N: 2, App: launch.App{Path: p, Args: watch}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			for rk := range 3 {
				out.WaitFor(t, fmt.Sprintf("%d: watching", rk))
			}
			if _, err := w.Agent("a1").Notify(t.Context(), code, pmix.RangeNamespace, false, []pmix.Info{pmix.NewInfo(pmix.KeyNspace, pmix.String(r.Nspace()))}); err != nil {
				t.Fatal(err)
			}
			res, err := r.Wait(ctx)
			if err != nil {
				t.Fatalf("wait: %v\n%s", err, out)
			}
			first := res.First
			if res.ExitCode != 1 || first == nil || first.Rank != 0 || first.State != pmix.ErrProcRequestedAbort || !strings.Contains(first.Text, "wanted termination") {
				t.Fatalf("result %+v, first %+v\n%s", res, first, out)
			}
			for _, e := range res.Jobs[0].Ends[1:] {
				want := pmix.ErrProcKilledByCmd // the policy ended them
				if continuous {
					want = pmix.Success // they ran to their end
				}
				if e.State != want {
					t.Errorf("rank %d ended %v (%s), want %v", e.Rank, e.State, e.Text, want)
				}
			}
		})
	}
	checkNoOrphans(t, p)
}

// TestLaunchMPMDFenceTermination: in a job across two clusters, a rank in
// B (not the cluster that names the job) that ends without finalizing
// fails the fence of the ranks in A, whose coordinator is in A, however
// early it ended: B's agent answers A's coordinator's ask for the job's
// terminations.
func TestLaunchMPMDFenceTermination(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Continuous: true, Jobs: []launch.JobSpec{
		// Rank 2 has ended, and its agent announced it, before the
		// others fence (before the coordinator watches the job).
		{N: 2, Cluster: "A", App: launch.App{Path: p, Args: []string{"-pause", "2s", "-fence"}}},
		{N: 1, Cluster: "B", App: launch.App{Path: p, Args: []string{"-fail-rank", "2", "-fail", "nofinalize"}}},
	}})
	ends := res.Jobs[0].Ends
	if len(ends) != 3 || ends[2].State != pmix.ErrProcTermWOSync {
		t.Fatalf("result %+v\n%s", res, out)
	}
	for _, e := range ends[:2] {
		if e.State != pmix.ErrExitNonzeroTerm || e.ExitCode != 92 {
			t.Errorf("rank %d ended %v (%s), want the fence's failure (exit 92)", e.Rank, e.State, e.Text)
		}
	}
	if !strings.Contains(out.String(), "PMIX_ERR_PROC_TERM_WO_SYNC") {
		t.Errorf("the fence failed for another reason:\n%s", out)
	}
}

// TestLaunchMPMDOneCluster: three app contexts on the agents of one
// cluster are one job; a failing rank of the second app ends the job and
// is reported by rank and app.
func TestLaunchMPMDOneCluster(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	args := func(more ...string) []string { return append([]string{"-get", mpmdKeys, "-fence"}, more...) }
	res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{
		{N: 1, App: launch.App{Path: p, Args: args()}},
		{N: 2, App: launch.App{Path: p, Args: args()}},
		{N: 1, App: launch.App{Path: p, Args: args("-say", "last")}},
	}})
	if res.ExitCode != 0 || len(res.Jobs) != 1 || len(res.Jobs[0].Ends) != 4 {
		t.Fatalf("result %+v\n%s", res, out)
	}
	a := p + " -get " + mpmdKeys + " -fence"
	checkMPMDInfo(t, out.String(), []string{a, a, a + " -say last"}, 1, 2, 1)

	res, out = e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{
		{N: 2, App: launch.App{Path: p, Args: []string{"-sleep", "30s"}}},
		{N: 2, App: launch.App{Path: p, Args: []string{"-fail-rank", "3", "-fail", "exit:7", "-sleep", "30s"}}},
	}})
	if res.ExitCode != 7 || res.First == nil || res.First.Rank != 3 || res.First.App != 1 || res.Jobs[0].Status != pmix.ErrJobNonZeroTerm {
		t.Fatalf("result %+v, first %+v\n%s", res, res.First, out)
	}
	checkNoOrphans(t, p)
}

// TestLaunchBadInput: each is a clear error, and nothing is left behind.
func TestLaunchBadInput(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	notExec := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		spec launch.JobSpec
		cfg  func(*launch.Config)
		want error
		text string
	}{
		{"unknown host", launch.JobSpec{N: 1, Hosts: []launch.Node{{Name: "zz", Slots: 1}}, App: launch.App{Path: p}}, nil, launch.ErrPlacement, "unknown host"},
		{"too many ranks", launch.JobSpec{N: 5, App: launch.App{Path: p}}, nil, launch.ErrPlacement, "4 free slots"},
		{"no such program", launch.JobSpec{N: 4, App: launch.App{Path: "/no/such/prog"}}, nil, launch.ErrNoProgram, "node a1"},
		{"not executable", launch.JobSpec{N: 2, App: launch.App{Path: notExec}}, nil, launch.ErrNoProgram, "not executable"},
		{"version", launch.JobSpec{N: 2, App: launch.App{Path: p}}, func(c *launch.Config) { c.Version = "v0.0.1-other" }, launch.ErrVersion, "v0.0.1-other"},
		// No cluster answers for Z: asked again up to ElectionWait.
		{"unknown cluster", launch.JobSpec{N: 1, Cluster: "Z", App: launch.App{Path: p}}, func(c *launch.Config) { c.ElectionWait = time.Second }, pmix.ErrUnreach, "Z"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{tt.spec}}
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			_, err := launch.Launch(ctx, cfg)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tt.want, tt.text)
			}
		})
	}
	// Every agent failed the missing program: all are named.
	_, err := launch.Launch(t.Context(), launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{{N: 4, App: launch.App{Path: "/no/such/prog"}}}})
	var merr *multierror.Error
	if !errors.As(err, &merr) || len(merr.Errors) != 2 || !strings.Contains(err.Error(), "a1") || !strings.Contains(err.Error(), "a2") {
		t.Fatalf("err = %v, want both agents' failures", err)
	}
	// Two app contexts are one job: two nspaces are an error.
	_, err = launch.Launch(t.Context(), launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{
		{N: 1, Cluster: "A", Nspace: "one", App: launch.App{Path: p}}, {N: 1, Cluster: "B", Nspace: "two", App: launch.App{Path: p}}}})
	if !errors.Is(err, pmix.ErrBadParam) || !strings.Contains(err.Error(), "app context 2") {
		t.Fatalf("two nspaces for one job: %v", err)
	}
	// A duplicate nspace.
	r, err := launch.Launch(t.Context(), launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{{N: 1, Nspace: "dup", App: launch.App{Path: p, Args: []string{"-sleep", "30s"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	// Signed in for its job: refused by the servers (dup is bound to the
	// first launcher's job key while it runs); on Conn alone, by the
	// jobs bucket.
	_, err = launch.Launch(t.Context(), launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{{N: 1, Nspace: "dup", App: launch.App{Path: p}}}})
	if !errors.Is(err, pmix.ErrNoPermissions) || !strings.Contains(err.Error(), "signing in for job dup") {
		t.Fatalf("second launch as dup: %v", err)
	}
	agentNC := clustertest.Connect(t, w.URL("A"), w.Keys().Option(security.RoleAgent))
	_, err = launch.Launch(t.Context(), launch.Config{Conn: agentNC, Jobs: []launch.JobSpec{{N: 1, Nspace: "dup", App: launch.App{Path: p}}}})
	if !errors.Is(err, launch.ErrNspaceTaken) {
		t.Fatalf("second launch as dup, as an agent: %v", err)
	}
	r.Terminate(false)
	res, err := r.Wait(t.Context())
	if err != nil || !res.Canceled || res.Jobs[0].Status != pmix.ErrJobCanceled {
		t.Fatalf("terminated run: %+v, %v", res, err)
	}
	// No agent still holds a job.
	for _, n := range w.Nodes() {
		var reply launch.JobsReply
		if err := launch.Control(t.Context(), nc, clusterOfNode(n), n, launch.OpJobs, nil, &reply); err != nil || len(reply.Jobs) != 0 {
			t.Errorf("node %s after the failures: %+v, %v", n, reply, err)
		}
	}
	checkNoOrphans(t, p)
}

func clusterOfNode(n string) cluster.ID { return cluster.ID(strings.ToUpper(n[:1])) }

// TestLaunchRefusedWithoutLauncherKey: the rm and watch keys cannot
// launch, nor the launcher key signed in itself: it only vouches for job
// credentials. The refusal comes at once, not when the request's context
// ends.
func TestLaunchRefusedWithoutLauncherKey(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	for _, role := range []security.Role{security.RoleRM, security.RoleWatch, security.RoleLauncher} {
		opts := []nats.Option{w.Keys().Option(role)}
		if role == security.RoleLauncher {
			opts = append(opts, nats.CustomInboxPrefix(security.LauncherInboxPrefix))
		}
		if role == security.RoleWatch {
			opts = append(opts, nats.CustomInboxPrefix(security.WatchInboxPrefix))
		}
		nc := clustertest.Connect(t, w.URL("A"), opts...)
		// No deadline: a refused request fails at once, it does not
		// wait for its context.
		err := launch.Control(t.Context(), nc, "A", "a1", launch.OpSpawn, launch.SpawnRequest{}, nil)
		if !errors.Is(err, pmix.ErrNoPermissions) {
			t.Errorf("%s: spawn request: %v, want PMIX_ERR_NO_PERMISSIONS", role, err)
		}
	}
}

// TestLaunchedNodeDown: the agent of a2 dies (its NATS connection closed,
// no Shutdown) while it runs ranks 2 and 3: a1's ranks get exactly one
// PMIX_EVENT_NODE_DOWN and one PMIX_ERR_PROC_TERM_WO_SYNC per lost rank,
// and the launcher counts those ranks as ended, so the run ends.
func TestLaunchedNodeDown(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	out := &e2e.SyncBuffer{}
	r, err := launch.Launch(t.Context(), launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Continuous: true, Stdout: out, Stderr: out,
		Jobs: []launch.JobSpec{{N: 4, App: launch.App{Path: p, Args: []string{"-watch", "-sleep", "8s"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	ns := r.Nspaces()[0][len("A:"):]
	for rk := range 4 {
		out.WaitFor(t, fmt.Sprintf("%d: watching", rk))
	}
	w.Agent("a2").NATS().Close()
	for _, rk := range []int{0, 1} {
		out.WaitFor(t, fmt.Sprintf("%d: event %d affected=-", rk, pmix.EventNodeDown))
		for _, lost := range []int{2, 3} {
			out.WaitFor(t, fmt.Sprintf("%d: event %d affected=%s.%d", rk, pmix.ErrProcTermWOSync, ns, lost))
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := r.Wait(ctx)
	if err != nil {
		t.Fatalf("the run did not end: %v\n%s", err, out)
	}
	for _, e := range res.Jobs[0].Ends {
		want := pmix.Success
		if e.Node == "a2" {
			want = pmix.ErrProcTermWOSync
		}
		if e.State != want {
			t.Errorf("rank %d on %s ended %v (%s), want %v", e.Rank, e.Node, e.State, e.Text, want)
		}
	}
	for _, rk := range []int{0, 1} {
		for _, lost := range []int{2, 3} {
			line := fmt.Sprintf("%d: event %d affected=%s.%d ", rk, pmix.ErrProcTermWOSync, ns, lost)
			if n := strings.Count(out.String(), line); n != 1 {
				t.Errorf("%q seen %d times", line, n)
			}
		}
		if n := strings.Count(out.String(), fmt.Sprintf("%d: event %d ", rk, pmix.EventNodeDown)); n != 1 {
			t.Errorf("rank %d saw NODE_DOWN %d times", rk, n)
		}
	}
	// What the lost node's ranks wrote before it went stays in the stream.
	var stored strings.Builder
	watch := clustertest.Connect(t, w.URL("A"), w.Keys().Option(security.RoleWatch), nats.CustomInboxPrefix(security.WatchInboxPrefix))
	if err := iof.Attach(ctx, watch, "A", ns, iof.AttachOptions{}, func(p iof.Parsed) { stored.Write(p.Data) }); err != nil {
		t.Fatal(err)
	}
	for _, lost := range []int{2, 3} {
		if !strings.Contains(stored.String(), fmt.Sprintf("%d: watching", lost)) {
			t.Errorf("rank %d's output is not in the stream:\n%s", lost, stored.String())
		}
	}
}

// TestProcTerminatedForRegistrationsThatAsk: a normal exit raises
// PMIX_EVENT_PROC_TERMINATED for a registration that names the code, but
// not for a default handler, unless the job asked (--notify-termination).
func TestProcTerminatedForRegistrationsThatAsk(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	for _, tt := range []struct {
		name   string
		notify bool
		codes  string
		want   bool
	}{
		{"named code", false, "-201", true},
		{"default handler", false, "", false},
		{"default handler, job asked", true, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Rank 1 exits once rank 0 watches (a fence orders it); rank 0
			// waits 2 s for the event.
			res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), NotifyTermination: tt.notify, Jobs: []launch.JobSpec{{N: 2, MapBy: launch.MapByNode,
				App: launch.App{Path: p, Args: []string{"-watch", "-codes", tt.codes, "-fence", "-sleep", "2s", "-fail-rank", "1", "-fail", "exit:0"}}}}})
			if res.ExitCode != 0 {
				t.Fatalf("result %+v\n%s", res, out)
			}
			got := strings.Contains(out.String(), fmt.Sprintf("0: event %d affected=%s.1 exit=0", pmix.EventProcTerminated, res.Jobs[0].Nspace))
			if got != tt.want {
				t.Errorf("rank 0 saw rank 1's PROC_TERMINATED: %v, want %v\n%s", got, tt.want, out)
			}
		})
	}
}

// TestLauncherGone: the launcher's connection closes while its job runs;
// once its key expires and the launcher grace passes, the agents end the
// job's processes: no orphans.
func TestLauncherGone(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	var nc *nats.Conn
	signIn := w.SignIn(w.URL("A"))
	r, err := launch.Launch(t.Context(), launch.Config{SignIn: func(nspace string) (*nats.Conn, error) {
		c, err := signIn(nspace)
		nc = c
		return c, err
	}, JobTTL: time.Second, Beat: 250 * time.Millisecond, LauncherGrace: 500 * time.Millisecond,
		Jobs: []launch.JobSpec{{N: 3, App: launch.App{Path: p, Args: []string{"-sleep", "60s"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	res, err := r.Wait(t.Context())
	if err != nil || !res.Lost || res.ExitCode == 0 {
		t.Fatalf("run after its connection closed: %+v, %v", res, err)
	}
	other := e2e.LauncherConn(t, w, "A")
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		for _, n := range []string{"a1", "a2"} {
			var reply launch.JobsReply
			if err := launch.Control(t.Context(), other, "A", n, launch.OpJobs, nil, &reply); err != nil {
				return err
			}
			if len(reply.Jobs) != 0 {
				return fmt.Errorf("node %s still runs %+v", n, reply.Jobs)
			}
		}
		return nil
	})
	checkNoOrphans(t, p)
}

// The ranks get the variables Open MPI's mpirun sets besides PMIx's, which
// scripts read: their rank, the job's size, their rank and count on the
// node; and Open MPI hears that the launcher applied its binding policy
// (none), unless the rank's environment asks Open MPI to bind itself.
func TestLaunchMPIRunEnvironment(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	nc := e2e.LauncherConn(t, w, "A")
	script := `echo "r=$OMPI_COMM_WORLD_RANK/$OMPI_COMM_WORLD_SIZE local=$OMPI_COMM_WORLD_LOCAL_RANK/$OMPI_COMM_WORLD_LOCAL_SIZE pmix=$PMIX_RANK bound=$OMPI_MCA_orte_bound_at_launch"`
	res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{{N: 4, App: launch.App{Path: "/bin/sh", Args: []string{"-c", script}}}}})
	if res.ExitCode != 0 {
		t.Fatalf("result %+v\n%s", res, out)
	}
	for r := range 4 { // by slot: 0, 1 on a1 and 2, 3 on a2
		if want := fmt.Sprintf("r=%d/4 local=%d/2 pmix=%d bound=1\n", r, r%2, r); !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	res, out = e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{{N: 1, App: launch.App{Path: "/bin/sh", Args: []string{"-c", script},
		Env: map[string]string{"OMPI_MCA_hwloc_base_binding_policy": "core"}}}}})
	if res.ExitCode != 0 || !strings.Contains(out.String(), "r=0/1 local=0/1 pmix=0 bound=\n") {
		t.Errorf("a rank whose environment asks Open MPI to bind: %+v\n%s", res, out)
	}
}

// A finished run leaves nothing in the jobs bucket for good: its key is
// purged with a marker that expires (a delete's marker stayed, one
// message per run: 2000 after 2000 runs).
func TestFinishedJobKeyExpires(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	nc := e2e.LauncherConn(t, w, "A")
	res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{{N: 1, App: launch.App{Path: "/bin/true"}}}})
	if res.ExitCode != 0 {
		t.Fatalf("result %+v\n%s", res, out)
	}
	js, err := natsjs.NewWithDomain(nc, cluster.ID("A").Domain())
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), security.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(t.Context(), "$KV."+launch.JobsBucket+"."+subjects.EscapeToken(res.Jobs[0].Nspace))
	if err != nil {
		t.Fatal(err)
	}
	if op, ttl := m.Header.Get("KV-Operation"), m.Header.Get("Nats-TTL"); op != "PURGE" || ttl == "" {
		t.Errorf("the finished job's key: operation %q, TTL %q; want a PURGE marker with a TTL", op, ttl)
	}
}

// TestControlSubjectNamesTheJob: an agent refuses a request for one job
// sent on another job's control subject, or on none: what NATS checked
// (a job credential publishes on its own job's subjects only) is what
// the agent acts on.
func TestControlSubjectNamesTheJob(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	nc := clustertest.Connect(t, w.URL("A"), w.Keys().Option(security.RoleAgent))
	for _, subj := range []string{launch.JobControlSubject("A", "a1", launch.OpKill, "jobX"), launch.ControlSubject("A", "a1", launch.OpKill)} {
		m, err := nc.Request(subj, []byte(`{"nspace":"jobY"}`), e2e.WaitTime)
		if err != nil {
			t.Fatal(err)
		}
		var reply launch.Reply
		if err := json.Unmarshal(m.Data, &reply); err != nil {
			t.Fatal(err)
		}
		if err := reply.Err(); !errors.Is(err, pmix.ErrNoPermissions) {
			t.Errorf("a kill of jobY on %s: %v, want PMIX_ERR_NO_PERMISSIONS", subj, err)
		}
	}
}
