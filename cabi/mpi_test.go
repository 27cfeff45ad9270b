package cabi

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/launch"
)

// TestLaunchedMPI runs an MPI program built with mpicc, unchanged, under
// the launch service: Open MPI 4.1 takes the agents' environment for a
// launch by a PMIx server (not a singleton), reads the job info it
// requires with the types it requires, registers its session directory
// for cleanup, exchanges its business cards with a fence, and the
// Allreduce adds every rank. Skipped where mpicc is not on PATH (CI
// machines have Go and gcc only).
//
// On one node the ranks talk through shared memory (the vader BTL). Over
// the world's two nodes, which are one machine, they use TCP only: vader
// names its segment files by the machine's hostname, the job and the local
// rank, so local rank 0 of a1 and of a2 would share one file here.
func TestLaunchedMPI(t *testing.T) {
	bin := buildMPIHello(t)
	for _, tc := range []struct {
		name string
		n    int
		env  map[string]string
	}{
		{"one node", 2, nil},
		{"two nodes", 4, map[string]string{"OMPI_MCA_btl": "self,tcp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := launchWorld(t)
			tmp := t.TempDir() // Open MPI's session directories
			env := map[string]string{"TMPDIR": tmp}
			for k, v := range tc.env {
				env[k] = v
			}
			res, out := launchJob(t, w, launch.Config{}, launch.JobSpec{N: tc.n, App: launch.App{Path: bin, Env: env}})
			if res.ExitCode != 0 || res.First != nil {
				t.Fatalf("result %+v, first %+v\noutput:\n%s", res, res.First, out)
			}
			sum := tc.n * (tc.n - 1) / 2
			for r := range tc.n {
				if want := fmt.Sprintf("hello from %d of %d, appnum 0, sum %d\n", r, tc.n, sum); !strings.Contains(out, want) {
					t.Errorf("no %q in:\n%s", want, out)
				}
			}
			// Each rank removed its job's session directory at
			// PMIx_Finalize, as it asked with PMIx_Job_control: no file is
			// left.
			filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					t.Errorf("left after the job: %s", path)
				}
				return nil
			})
		})
	}
}

// TestLaunchedMPIMPMD runs `-n 2 mpihello : -n 2 mpihello`, as the issue
// put it to mpirun: one MPI_COMM_WORLD of 4, MPI_APPNUM 0 for ranks 0-1
// and 1 for 2-3, an Allreduce over all four — on one cluster's agents,
// and with each app context on a cluster of its own (one job across
// clusters: its fence, the business cards Open MPI exchanges in it, span
// both). Skipped where mpicc is not on PATH.
func TestLaunchedMPIMPMD(t *testing.T) {
	bin := buildMPIHello(t)
	for _, tc := range []struct {
		name     string
		clusters []agenttest.Cluster
		second   cluster.ID // the second app context's cluster
	}{
		{"one cluster", []agenttest.Cluster{{ID: "A", Nodes: []string{"a1", "a2"}}}, ""},
		{"two clusters", []agenttest.Cluster{{ID: "A", Nodes: []string{"a1"}}, {ID: "B", Nodes: []string{"b1"}}}, "B"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := launchClusters(t, tc.clusters...)
			// TCP between the nodes, which are one machine here (see
			// TestLaunchedMPI).
			env := map[string]string{"TMPDIR": t.TempDir(), "OMPI_MCA_btl": "self,tcp"}
			res, out := launchJob(t, w, launch.Config{},
				launch.JobSpec{N: 2, App: launch.App{Path: bin, Env: env}},
				launch.JobSpec{N: 2, Cluster: tc.second, App: launch.App{Path: bin, Env: env}})
			if res.ExitCode != 0 || res.First != nil || len(res.Jobs) != 1 {
				t.Fatalf("result %+v, first %+v\noutput:\n%s", res, res.First, out)
			}
			for r := range 4 {
				if want := fmt.Sprintf("hello from %d of 4, appnum %d, sum 6\n", r, r/2); !strings.Contains(out, want) {
					t.Errorf("no %q in:\n%s", want, out)
				}
			}
			if tc.second != "" && (res.Jobs[0].Ends[1].Cluster != "A" || res.Jobs[0].Ends[2].Cluster != "B") {
				t.Errorf("ranks ran on %+v", res.Jobs[0].Ends)
			}
		})
	}
}

// buildMPIHello compiles testdata/mpihello.c with mpicc, or skips t where
// there is none.
func buildMPIHello(t *testing.T) string { return buildMPI(t, "mpihello") }
