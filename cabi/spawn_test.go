package cabi

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
)

// TestLaunchedSpawn runs testdata/spawn.c under the launch service, built
// against each header set: rank 0's PMIx_Spawn starts two children
// (PMIX_SPAWNED, PMIX_PARENT_ID its proc) whose output the launcher shows
// with the parents'; in another cluster with PMIXBUS_SPAWN_CLUSTER; a
// PMIx_Spawn_nb of a missing program calls back with
// PMIX_ERR_JOB_FAILED_TO_LAUNCH, and bad arguments are refused at once.
func TestLaunchedSpawn(t *testing.T) {
	for _, h := range headers(t) {
		t.Run(h.name, func(t *testing.T) {
			bin := compile(t, "spawn.c", h, true)
			w := launchClusters(t, agenttest.Cluster{ID: "A", Nodes: []string{"a1", "a2"}}, agenttest.Cluster{ID: "B", Nodes: []string{"b1"}})
			for _, tc := range []struct {
				name, cluster string
			}{{"same cluster", ""}, {"cluster B", "B"}} {
				t.Run(tc.name, func(t *testing.T) {
					args := []string{"2"}
					if tc.cluster != "" {
						args = append(args, tc.cluster)
					}
					res, out := launchJob(t, w, launch.Config{Continuous: true}, launch.JobSpec{N: 2, Oversubscribe: true, App: launch.App{Path: bin, Args: args}})
					if res.ExitCode != 0 || len(res.Jobs) != 2 || strings.Contains(out, "FAIL") {
						t.Fatalf("result %+v\noutput:\n%s", res, out)
					}
					parent, child := res.Jobs[0], res.Jobs[1]
					want := []string{
						"spawn 0\n", "spawned " + child.Nspace + "\n", "child job size: 0 2\n",
						fmt.Sprintf("spawn_nb %d nspace \"\"\n", pmix.ErrJobFailedToLaunch),
						fmt.Sprintf("maxprocs 0: %d\n", pmix.ErrBadParam), fmt.Sprintf("no apps: %d\n", pmix.ErrBadParam),
						fmt.Sprintf("nb without callback: %d\n", pmix.ErrBadParam),
					}
					for r := range 2 {
						want = append(want, fmt.Sprintf("child %d: spawned 1 parent %s.0\n", r, parent.Nspace))
					}
					for _, w := range want {
						if !strings.Contains(out, w) {
							t.Errorf("no %q in:\n%s", w, out)
						}
					}
					if c := string(child.Cluster); c != tc.cluster && !(tc.cluster == "" && c == "A") {
						t.Errorf("child ran on cluster %s", c)
					}
				})
			}
		})
	}
}

// TestLaunchedMPISpawn runs testdata/mpispawn.c, built with mpicc, under
// the launch service: MPI_Comm_spawn from 1 and from 4 parents (root 0;
// the other parents call no PMIx, they wait in Open MPI's own collective),
// the children connect back over PMIx publish/lookup and connect, and
// parents and children reduce over the intercommunicator. A spawn of a
// missing program ends the run with the error rather than a hang: Open
// MPI 4.1.4's parents other than the root would wait for the root's
// broadcast for ever; the launcher's PMIX_ERR_JOB_FAILED_TO_LAUNCH event
// aborts them, as mpirun ends such a job. Skipped where mpicc is not on
// PATH.
func TestLaunchedMPISpawn(t *testing.T) {
	bin := buildMPI(t, "mpispawn")
	w := launchWorld(t)
	env := map[string]string{"TMPDIR": t.TempDir(), "OMPI_MCA_btl": "self,tcp"}
	for _, tc := range []struct{ parents, children int }{{1, 2}, {4, 3}} {
		t.Run(fmt.Sprintf("%d parents", tc.parents), func(t *testing.T) {
			res, out := launchJob(t, w, launch.Config{}, launch.JobSpec{N: tc.parents, Oversubscribe: true, App: launch.App{Path: bin, Args: []string{fmt.Sprint(tc.children)}, Env: env}})
			if res.ExitCode != 0 || len(res.Jobs) != 2 {
				t.Fatalf("result %+v\noutput:\n%s", res, out)
			}
			psum, csum := tc.parents*(tc.parents-1)/2, tc.children*(tc.children-1)/2
			for r := range tc.parents {
				if want := fmt.Sprintf("parent %d of %d: %d children, their ranks sum %d\n", r, tc.parents, tc.children, csum); !strings.Contains(out, want) {
					t.Errorf("no %q in:\n%s", want, out)
				}
			}
			for r := range tc.children {
				if want := fmt.Sprintf("child %d of %d: %d parents, their ranks sum %d\n", r, tc.children, tc.parents, psum); !strings.Contains(out, want) {
					t.Errorf("no %q in:\n%s", want, out)
				}
			}
		})
	}
	t.Run("missing program", func(t *testing.T) {
		res, out := launchJob(t, w, launch.Config{}, launch.JobSpec{N: 4, Oversubscribe: true, App: launch.App{Path: bin, Args: []string{"2", "bad"}, Env: env}})
		if res.ExitCode == 0 || res.First == nil || !strings.Contains(out, "the spawn of "+res.Jobs[0].Nspace+".0 failed: ") || !strings.Contains(out, "/nonexistent/mpispawn-child") {
			t.Fatalf("result %+v first %+v\noutput:\n%s", res, res.First, out)
		}
	})
}

// buildMPI compiles testdata/<name>.c with mpicc, or skips t where there
// is none.
func buildMPI(t *testing.T, name string) string {
	t.Helper()
	mpicc, err := exec.LookPath("mpicc")
	if err != nil {
		t.Skip("mpicc not on PATH: no MPI to run (Debian: apt-get install libopenmpi-dev)")
	}
	if sanitize {
		t.Skip("PMIXBUS_CABI_SANITIZE: Open MPI is not built with the sanitizers")
	}
	bin := filepath.Join(t.TempDir(), name)
	if b, err := exec.Command(mpicc, "testdata/"+name+".c", "-o", bin).CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v\n%s", err, b)
	}
	return bin
}

// TestMPI4PySpawn runs testdata/spawn4py.py, mpi4py's spawn cases, as 2
// ranks (oversubscribed: the children share the node's slots, as under
// mpirun --oversubscribe): Spawn from COMM_WORLD and from COMM_SELF,
// Spawn_multiple, Spawn with errcodes. Each child disconnects, then ends:
// its connect with the parents stays (Open MPI 4.1's MPI_Comm_disconnect
// is a fence, not PMIx_Disconnect), and its normal end must not reach the
// parents' default handler, which would abort them in MPI_Finalize
// (collective's TERM_WO_SYNC is non-default for a normal end). Skipped
// without Debian's python3-mpi4py.
func TestMPI4PySpawn(t *testing.T) {
	python := "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import mpi4py").Run(); err != nil {
		t.Skip("no mpi4py for /usr/bin/python3 (Debian: apt-get install python3-mpi4py)")
	}
	if sanitize {
		t.Skip("a Python interpreter under the sanitizers' library: not this test's subject")
	}
	script, err := filepath.Abs("testdata/spawn4py.py")
	if err != nil {
		t.Fatal(err)
	}
	w := launchWorld(t)
	env := map[string]string{"TMPDIR": t.TempDir(), "OMPI_MCA_btl": "self,tcp"}
	for _, c := range []string{"world", "self", "multiple", "errcodes"} {
		t.Run(c, func(t *testing.T) {
			res, out := launchJob(t, w, launch.Config{}, launch.JobSpec{N: 2, Oversubscribe: true, App: launch.App{Path: python, Args: []string{script, c}, Env: env}})
			if res.ExitCode != 0 {
				t.Fatalf("result %+v first %+v\noutput:\n%s", res, res.First, out)
			}
			for r := range 2 {
				if want := fmt.Sprintf("rank %d %s ok\n", r, c); !strings.Contains(out, want) {
					t.Errorf("no %q in:\n%s", want, out)
				}
			}
		})
	}
}
