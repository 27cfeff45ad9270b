package jobs

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
)

// spawnedNspace is the nspace rank 0 of testprog -spawn printed.
var spawnedNspace = regexp.MustCompile(`0: spawned (\S+)`)

// TestSpawn: a rank spawns a job through the agents; its children get
// PMIX_PARENT_ID and PMIX_SPAWNED, their output is the launcher's as the
// parent's is, and the run ends once both jobs have.
func TestSpawn(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{{N: 2, App: launch.App{Path: p, Args: []string{"-spawn", "2"}}}}})
	if res.ExitCode != 0 || len(res.Jobs) != 2 {
		t.Fatalf("result %+v\n%s", res, out)
	}
	parent, child := res.Jobs[0], res.Jobs[1]
	m := spawnedNspace.FindStringSubmatch(out.String())
	if m == nil || m[1] != child.Nspace || child.Nspace == parent.Nspace || len(child.Ends) != 2 || child.Cluster != "A" {
		t.Fatalf("parent %+v child %+v\n%s", parent, child, out)
	}
	for r := range 2 {
		for _, want := range []string{
			fmt.Sprintf("%d: get %s = %s.0 (type %d) err=<nil>", r, pmix.KeyParentID, parent.Nspace, pmix.TypeProc),
			fmt.Sprintf("%d: get %s = true (type %d) err=<nil>", r, pmix.KeySpawned, pmix.TypeBool),
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("no %q in the output:\n%s", want, out)
			}
		}
	}
	checkNoOrphans(t, p)
}

// TestSpawnAcrossClusters: PMIXBUS_SPAWN_CLUSTER starts the new job on
// another cluster (leaf-linked, a JetStream domain each): the job grows
// across clusters, and its output still reaches the parent's launcher.
func TestSpawnAcrossClusters(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{{N: 1, App: launch.App{Path: p,
		Args: []string{"-spawn", "3", "-spawn-info", pmix.KeySpawnCluster + "=B," + pmix.KeyMapBy + "=node"}}}}})
	if res.ExitCode != 0 || len(res.Jobs) != 2 {
		t.Fatalf("result %+v\n%s", res, out)
	}
	child := res.Jobs[1]
	nodes := map[string]int{}
	for _, e := range child.Ends {
		nodes[e.Node]++
	}
	if child.Cluster != "B" || len(child.Ends) != 3 || nodes["b1"] != 2 || nodes["b2"] != 1 {
		t.Fatalf("child %+v (nodes %v)\n%s", child, nodes, out)
	}
	want := fmt.Sprintf("2: get %s = %s.0", pmix.KeyParentID, res.Jobs[0].Nspace)
	if !strings.Contains(out.String(), want) {
		t.Errorf("no %q in the output:\n%s", want, out)
	}
	checkNoOrphans(t, p)
}

// TestSpawnFailures: a spawn that cannot start reaches the caller as a
// PMIx status and a message, at once, and the parent job runs on.
func TestSpawnFailures(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"bad executable", []string{"-spawn", "1", "-spawn-cmd", "/nonexistent/prog"}, fmt.Sprintf("spawn failed: %d ", pmix.ErrJobFailedToLaunch)},
		{"no slots", []string{"-spawn", "9"}, fmt.Sprintf("spawn failed: %d ", pmix.ErrOutOfResource)},
		{"unknown host", []string{"-spawn", "1", "-spawn-info", pmix.KeyHost + "=nowhere"}, fmt.Sprintf("spawn failed: %d ", pmix.ErrOutOfResource)},
		{"unknown cluster", []string{"-spawn", "1", "-spawn-info", pmix.KeySpawnCluster + "=Z"}, "spawn failed: "},
		{"bad map-by", []string{"-spawn", "1", "-spawn-info", pmix.KeyMapBy + "=ppr:1:node"}, fmt.Sprintf("spawn failed: %d ", pmix.ErrBadParam)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// ElectionWait: no cluster Z answers, asked again up to it.
			res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), ElectionWait: time.Second, Jobs: []launch.JobSpec{{N: 1, App: launch.App{Path: p, Args: tt.args}}}})
			if res.ExitCode != 0 || len(res.Jobs) != 1 || !strings.Contains(out.String(), tt.want) {
				t.Fatalf("want %q; result %+v\n%s", tt.want, res, out)
			}
		})
	}
	checkNoOrphans(t, p)
}

// TestSpawnWithoutLauncher: a process a host RM registered (no pmixbus
// run) has no launcher to start a job: Spawn is PMIX_ERR_NOT_SUPPORTED at
// once, saying why; bad arguments are PMIX_ERR_BAD_PARAM.
func TestSpawnWithoutLauncher(t *testing.T) {
	w := e2e.NewWorld(t)
	c := w.Client("A:jobA.0").C
	_, err := c.Spawn(t.Context(), nil, []client.App{{Cmd: "/bin/true", MaxProcs: 1}})
	if !errors.Is(err, pmix.ErrNotSupported) || !strings.Contains(err.Error(), "no launcher") {
		t.Fatalf("spawn from a host RM's job: %v", err)
	}
	for _, apps := range [][]client.App{nil, {{Cmd: "/bin/true"}}, {{MaxProcs: 1}}} {
		if _, err := c.Spawn(t.Context(), nil, apps); !errors.Is(err, pmix.ErrBadParam) {
			t.Errorf("spawn of %+v: %v", apps, err)
		}
	}
	_, err = c.Spawn(t.Context(), []pmix.Info{pmix.NewInfo(pmix.KeyHost, pmix.Int32(3))}, []client.App{{Cmd: "/bin/true", MaxProcs: 1}})
	if !errors.Is(err, pmix.ErrBadParam) {
		t.Errorf("a PMIX_HOST that is no string: %v", err)
	}
}

// TestSpawnAgentGone: the agent of the node a spawn names is cut off
// (its liveness key not yet expired, or expired): the spawn fails with
// PMIX_ERR_UNREACH naming the node, or PMIX_ERR_OUT_OF_RESOURCE naming
// the live agents — at once, never a hang — and nothing of it runs.
func TestSpawnAgentGone(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	w.Agent("a2").NATS().Close()
	// ElectionWait: a2, listed up, is asked again up to it.
	res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), ElectionWait: time.Second, Jobs: []launch.JobSpec{{N: 1, Hosts: []launch.Node{{Name: "a1"}}, App: launch.App{Path: p,
		Args: []string{"-spawn", "1", "-spawn-info", pmix.KeyHost + "=a2"}}}}})
	unreach := fmt.Sprintf("0: spawn failed: %d ", pmix.ErrUnreach)
	noSlot := fmt.Sprintf("0: spawn failed: %d ", pmix.ErrOutOfResource)
	if res.ExitCode != 0 || len(res.Jobs) != 1 || !(strings.Contains(out.String(), unreach) && strings.Contains(out.String(), "a2")) && !strings.Contains(out.String(), noSlot) {
		t.Fatalf("result %+v\n%s", res, out)
	}
}

// TestSpawnFromAJobAcrossClusters: the parent job runs on A and B (one
// job, MPMD); its rank on B spawns an MPMD job of two apps, which runs
// on B (the caller's cluster), its ranks numbered across the apps, and
// the launcher of the parent shows its output.
func TestSpawnFromAJobAcrossClusters(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	args := []string{"-spawn", "1", "-spawn-rank", "1", "-spawn-apps", "2", "-spawn-args", "-get pmix.parent,pmix.appnum"}
	res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{
		{N: 1, App: launch.App{Path: p, Args: args}},
		{N: 1, Cluster: "B", App: launch.App{Path: p, Args: args}},
	}})
	if res.ExitCode != 0 || len(res.Jobs) != 2 {
		t.Fatalf("result %+v\n%s", res, out)
	}
	parent, child := res.Jobs[0], res.Jobs[1]
	if child.Cluster != "B" || len(child.Ends) != 2 || child.Ends[0].App != 0 || child.Ends[1].App != 1 {
		t.Fatalf("child %+v\n%s", child, out)
	}
	for r := range 2 {
		for _, want := range []string{
			fmt.Sprintf("%d: get %s = %s.1 ", r, pmix.KeyParentID, parent.Nspace),
			fmt.Sprintf("%d: get %s = %d ", r, pmix.KeyAppNum, r),
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("no %q in the output:\n%s", want, out)
			}
		}
	}
	if !strings.Contains(out.String(), "1: spawned "+child.Nspace) {
		t.Errorf("rank 1 did not print the child's nspace:\n%s", out)
	}
	checkNoOrphans(t, p)
}
