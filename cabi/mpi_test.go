package cabi

import (
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
	mpicc, err := exec.LookPath("mpicc")
	if err != nil {
		t.Skip("mpicc not on PATH: no MPI to run (Debian: apt-get install libopenmpi-dev)")
	}
	bin := filepath.Join(t.TempDir(), "mpihello")
	args := []string{"testdata/mpihello.c", "-o", bin}
	if sanitize {
		// Open MPI's own leaks at exit are not this library's
		t.Skip("PMIXBUS_CABI_SANITIZE: Open MPI is not built with the sanitizers")
	}
	if b, err := exec.Command(mpicc, args...).CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v\n%s", err, b)
	}
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
				if want := fmt.Sprintf("hello from %d of %d, sum %d\n", r, tc.n, sum); !strings.Contains(out, want) {
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
