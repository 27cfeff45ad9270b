package cabi

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
)

// The launch tests run C programs as the ranks of jobs started with
// launch.Launch, as `pmixbus run` does, by the agents of cluster A's two
// nodes (a1, a2; two slots each), and of cluster B's b1. The test process's environment does not
// name the library: the agents put its directory first on the ranks'
// LD_LIBRARY_PATH (agent.Config.PMIxLibDir), which is how a C program
// linked with -lpmix finds pmixbus's libpmix.so.2 under `pmixbus run`.

// launchWorld starts the world of the launch tests.
func launchWorld(t *testing.T) *agenttest.World {
	return launchClusters(t, agenttest.Cluster{ID: "A", Nodes: []string{"a1", "a2"}})
}

// launchClusters starts a world of clusters whose agents launch, two
// slots each, with the library's directory as their PMIxLibDir.
func launchClusters(t *testing.T, clusters ...agenttest.Cluster) *agenttest.World {
	t.Helper()
	return launchClustersWith(t, nil, clusters...)
}

// launchClustersWith is launchClusters with adjust applied to each
// agent's config too.
func launchClustersWith(t *testing.T, adjust func(*agent.Config), clusters ...agenttest.Cluster) *agenttest.World {
	t.Helper()
	dir := libDir(t)
	if strings.Contains(os.Getenv("LD_LIBRARY_PATH"), dir) {
		t.Fatalf("the test's own LD_LIBRARY_PATH names %s: the agent's would prove nothing", dir)
	}
	return agenttest.Start(t, agenttest.Spec{
		Clusters: clusters,
		Agent: func(c *agent.Config) {
			c.Slots = 2
			c.KillGrace = time.Second
			c.PMIxLibDir = dir
			if adjust != nil {
				adjust(c)
			}
		},
	})
}

// launchJob runs the job of the specs (in cluster A unless they say)
// from cluster A's server with the launcher's key, and returns how it ended and its
// output.
func launchJob(t *testing.T, w *agenttest.World, cfg launch.Config, specs ...launch.JobSpec) (launch.Result, string) {
	t.Helper()
	r, out := startJob(t, w, cfg, specs...)
	return waitJob(t, r, out)
}

// startJob launches the specs (app contexts of one job) as launchJob
// does, without waiting for its end.
func startJob(t *testing.T, w *agenttest.World, cfg launch.Config, specs ...launch.JobSpec) (*launch.Run, *clustertest.Buffer) {
	t.Helper()
	cfg.SignIn = w.SignIn(w.URL("A"))
	out := &clustertest.Buffer{}
	cfg.Stdout, cfg.Stderr = out, out
	cfg.Jobs = specs
	r, err := launch.Launch(testContext(t), cfg)
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	return r, out
}

// waitJob waits for the end of r, whose output goes to out.
func waitJob(t *testing.T, r *launch.Run, out *clustertest.Buffer) (launch.Result, string) {
	t.Helper()
	res, err := r.Wait(testContext(t))
	if err != nil {
		t.Fatalf("wait: %v\noutput:\n%s", err, out)
	}
	return res, out.String()
}

// checkNodes fails t unless the job's ranks ran on the nodes given, by
// rank.
func checkNodes(t *testing.T, j launch.JobResult, nodes ...string) {
	t.Helper()
	var got []string
	for _, e := range j.Ends {
		got = append(got, e.Node)
	}
	if strings.Join(got, " ") != strings.Join(nodes, " ") {
		t.Errorf("ranks ran on %v, want %v", got, nodes)
	}
}

// TestLaunchedKeyValueExchange launches testdata/kvs.c as three ranks,
// two on a1 and one on a2 (placement by slot), compiled against each
// header set: they put, commit, fence with PMIX_COLLECT_DATA and get each
// other's values (what TestKeyValueExchange checks of detached ranks),
// with the job size the launcher gave, and the job exits 0.
func TestLaunchedKeyValueExchange(t *testing.T) {
	for _, h := range headers(t) {
		t.Run(h.name, func(t *testing.T) {
			bin := compile(t, "kvs.c", h, true)
			w := launchWorld(t)
			res, out := launchJob(t, w, launch.Config{}, launch.JobSpec{N: 3, App: launch.App{Path: bin, Args: []string{"collect"}}})
			if res.ExitCode != 0 || res.First != nil || strings.Contains(out, "FAIL") {
				t.Fatalf("result %+v, first %+v\noutput:\n%s", res, res.First, out)
			}
			checkNodes(t, res.Jobs[0], "a1", "a1", "a2")
			for _, line := range []string{"size 3", "fence 0", "fence_nb 0", "finalize 0"} {
				if n := strings.Count(out, line+"\n"); n != 3 {
					t.Errorf("%q %d times, want once a rank:\n%s", line, n, out)
				}
			}
			for p := range 3 {
				if n := strings.Count(out, fmt.Sprintf("peer %d ok\n", p)); n != 2 {
					t.Errorf("peer %d read by %d ranks, want 2:\n%s", p, n, out)
				}
			}
		})
	}
}

// TestLaunchedEvents launches testdata/events.c as two ranks, one a node
// (map-by node): rank 1's three handlers on a2 register, the ranks fence,
// and rank 0 on a1 notifies three events to the namespace, which reach
// rank 1's chain in order.
func TestLaunchedEvents(t *testing.T) {
	bin := compile(t, "events.c", headers(t)[0], true)
	w := launchWorld(t)
	res, out := launchJob(t, w, launch.Config{}, launch.JobSpec{N: 2, MapBy: launch.MapByNode, App: launch.App{Path: bin, Args: []string{"job"}}})
	if res.ExitCode != 0 || res.First != nil || !strings.Contains(out, "notified\n") {
		t.Fatalf("result %+v, first %+v\noutput:\n%s", res, res.First, out)
	}
	checkNodes(t, res.Jobs[0], "a1", "a2")
	checkChains(t, out, res.Jobs[0].Nspace+".0", true)
}

// TestLaunchedEventsAcrossClusters launches testdata/events.c's
// listener as a job of cluster A and, once its handlers are registered
// and the clusters source each other's GLOBAL events, its notifier as a job of cluster B
// (two runs, as two `pmixbus run`): the three PMIX_RANGE_GLOBAL events
// reach the listener's chain, from B's rank.
func TestLaunchedEventsAcrossClusters(t *testing.T) {
	bin := compile(t, "events.c", headers(t)[0], true)
	w := launchClusters(t, agenttest.Cluster{ID: "A", Nodes: []string{"a1"}}, agenttest.Cluster{ID: "B", Nodes: []string{"b1"}})
	listener, out := startJob(t, w, launch.Config{}, launch.JobSpec{N: 1, App: launch.App{Path: bin, Args: []string{"listen"}}})
	clustertest.WaitFor(t, 30*time.Second, func() error {
		if !strings.Contains(out.String(), "ready\n") {
			return fmt.Errorf("the listener is not ready:\n%s", out)
		}
		return nil
	})
	if err := w.WaitSourced(testContext(t)); err != nil {
		t.Fatal(err)
	}
	res, nout := launchJob(t, w, launch.Config{}, launch.JobSpec{N: 1, Cluster: "B", App: launch.App{Path: bin, Args: []string{"notify", "global"}}})
	if res.ExitCode != 0 || !strings.Contains(nout, "notified\n") {
		t.Fatalf("notifier: result %+v\noutput:\n%s", res, nout)
	}
	lres, lout := waitJob(t, listener, out)
	if lres.ExitCode != 0 || lres.First != nil {
		t.Fatalf("listener: result %+v, first %+v\noutput:\n%s", lres, lres.First, lout)
	}
	source := res.Jobs[0].Nspace + ".0"
	if i := strings.Index(lout, "event first -3001 "); i >= 0 {
		source = strings.Fields(lout[i:])[3] // as the agent names a proc of another cluster
	}
	if !strings.HasSuffix(source, res.Jobs[0].Nspace+".0") || res.Jobs[0].Cluster != "B" {
		t.Errorf("source %q, want rank 0 of B's job %s", source, res.Jobs[0].Nspace)
	}
	t.Logf("source as the handlers see it: %s", source)
	checkChains(t, lout, source, false)
}

// TestLaunchedAbort launches testdata/abort.c as four ranks over a1 and
// a2, every one registered for PMIX_ERR_PROC_REQUESTED_ABORT, and has rank
// 3 (on a2) end:
//   - self: PMIx_Abort(5, "bye") naming only itself, the job continuous:
//     the agent kills it, the other three (on both nodes) see -8 from it
//     with the abort's text and finish normally, and the run exits 5;
//   - all: PMIx_Abort(6, "bye", NULL, 0): the whole job ends, the run
//     exits 6 with rank 3's REQUESTED_ABORT first and the others killed;
//   - exit: a plain exit 7 after Finalize: the run exits 7.
//
// Rank 0 prints PMIx_Get_version: pmixbus's library, found on the
// LD_LIBRARY_PATH the agent set.
func TestLaunchedAbort(t *testing.T) {
	bin := compile(t, "abort.c", headers(t)[0], true)
	w := launchWorld(t)
	for _, tc := range []struct {
		how        string
		status     int
		continuous bool
		state      pmix.Status
	}{
		{how: "self", status: 5, continuous: true, state: pmix.ErrProcRequestedAbort},
		{how: "all", status: 6, state: pmix.ErrProcRequestedAbort},
		{how: "exit", status: 7, state: pmix.ErrExitNonzeroTerm},
	} {
		t.Run(tc.how, func(t *testing.T) {
			res, out := launchJob(t, w, launch.Config{Continuous: tc.continuous}, launch.JobSpec{N: 4,
				App: launch.App{Path: bin, Args: []string{"job", "3", fmt.Sprint(tc.status), tc.how}}})
			if res.ExitCode != tc.status || res.First == nil || res.First.Rank != 3 || res.First.State != tc.state {
				t.Fatalf("result %+v, first %+v; want exit code %d, rank 3 first with %v\noutput:\n%s", res, res.First, tc.status, tc.state, out)
			}
			checkNodes(t, res.Jobs[0], "a1", "a1", "a2", "a2")
			if !strings.Contains(out, "library pmixbus ") {
				t.Errorf("rank 0 did not run on pmixbus's library:\n%s", out)
			}
			if strings.Contains(out, "PMIx_Abort returned") {
				t.Errorf("PMIx_Abort returned to its caller:\n%s", out)
			}
			if tc.how != "self" {
				return
			}
			seen := fmt.Sprintf("event -8 from %s.3 text=", res.Jobs[0].Nspace)
			var events []string
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, seen) && strings.Contains(line, "bye") {
					events = append(events, line)
				}
			}
			if len(events) != 3 || strings.Contains(out, "FAIL") {
				t.Errorf("%d ranks saw %q with the message, want 3:\n%s", len(events), seen, out)
			}
			for _, e := range res.Jobs[0].Ends[:3] {
				if e.State != pmix.Success {
					t.Errorf("rank %d ended %v (%s), want a normal end", e.Rank, e.State, e.Text)
				}
			}
		})
	}
}

// TestLaunchedExample runs README's C example, example/hello.c, as
// `pmixbus run -n 4 ./hello` does: four ranks over two nodes, each
// printing its right neighbour's greeting; built against pmixbus's
// header, and as a user of Debian's libpmix-dev builds it (linked against
// OpenPMIx's library with a RUNPATH): the agent's LD_LIBRARY_PATH gives
// that binary pmixbus's library unrebuilt.
func TestLaunchedExample(t *testing.T) {
	t.Run("pmixbus", func(t *testing.T) {
		checkHello(t, compile(t, "../example/hello.c", headers(t)[0], true))
	})
	t.Run("openpmix-linked", func(t *testing.T) {
		checkHello(t, compileAsOpenPMIxUser(t, "../example/hello.c"))
	})
}

// checkHello launches example/hello.c's binary bin as four ranks.
func checkHello(t *testing.T, bin string) {
	t.Helper()
	w := launchWorld(t)
	res, out := launchJob(t, w, launch.Config{}, launch.JobSpec{N: 4, App: launch.App{Path: bin}})
	if res.ExitCode != 0 || res.First != nil {
		t.Fatalf("result %+v, first %+v\noutput:\n%s", res, res.First, out)
	}
	for r := range 4 {
		want := fmt.Sprintf("rank %d of 4: rank %d says \"hello from rank %d on ", r, (r+1)%4, (r+1)%4)
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// TestLaunchedResolve launches testdata/resolve.c as four ranks, two on
// a1 and two on a2: PMIx_Resolve_nodes gives the job's nodes and
// PMIx_Resolve_peers each node's ranks, from the job information.
func TestLaunchedResolve(t *testing.T) {
	for _, h := range headers(t) {
		t.Run(h.name, func(t *testing.T) {
			bin := compile(t, "resolve.c", h, true)
			w := launchWorld(t)
			res, out := launchJob(t, w, launch.Config{}, launch.JobSpec{N: 4, App: launch.App{Path: bin}})
			if res.ExitCode != 0 || res.First != nil || strings.Count(out, "resolved\n") != 4 || strings.Contains(out, "FAIL") {
				t.Fatalf("result %+v, first %+v\noutput:\n%s", res, res.First, out)
			}
			checkNodes(t, res.Jobs[0], "a1", "a1", "a2", "a2")
		})
	}
}
