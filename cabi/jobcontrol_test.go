package cabi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
)

// TestJobControlCleanup: PMIx_Job_control (+_nb) takes the cleanup
// requests of the caller for itself, blocking, with a callback and
// without one (as Open MPI 4.1 sends them), and the last PMIx_Finalize
// removes what they name, recursively where asked; a cleanup request for
// the whole job is refused, a kill goes to the agent (a singleton has
// none: PMIX_ERR_UNREACH), and a call before PMIx_Init is PMIX_ERR_INIT.
func TestJobControlCleanup(t *testing.T) {
	for _, h := range headers(t) {
		t.Run(h.name, func(t *testing.T) {
			bin := compile(t, "cleanup.c", h, true)
			dir := t.TempDir()
			got := lines(run(t, t.Context(), bin, nil, dir))
			want := map[string]string{
				"null_bool": "1", "before_init": "-31", "init": "-25", "job_scope": "-47",
				"blocking": "0", "nb": "0", "nb_nocb": "0", "kill": "-25", "present": "1", "finalize": "0",
			}
			checkLines(t, got, want)
			for _, name := range []string{"session", "lone"} {
				if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
					t.Errorf("%s: %v, want removed", name, err)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "kept")); err != nil {
				t.Errorf("kept, not registered: %v", err)
			}
		})
	}
}

// TestLaunchedJobControl runs testdata/jobctl.c, what OpenPMIx's jctrl.c
// and simpjctrl.c ask of PMIx_Job_control, as four ranks over a1 and a2:
// an informational request succeeds; rank 0 signals rank 3 on a2, kills
// rank 2 on a2 and terminates rank 1 on a1, which end
// PMIX_ERR_PROC_KILLED_BY_CMD without aborting the job; bad requests get
// their errors.
func TestLaunchedJobControl(t *testing.T) {
	for _, h := range headers(t) {
		t.Run(h.name, func(t *testing.T) {
			bin := compile(t, "jobctl.c", h, true)
			w := launchWorld(t)
			res, out := launchJob(t, w, launch.Config{}, launch.JobSpec{N: 4, App: launch.App{Path: bin}})
			if strings.Count(out, "controlled\n") != 2 || strings.Contains(out, "FAIL") || res.ExitCode != 0 {
				t.Fatalf("result %+v\noutput:\n%s", res, out)
			}
			checkNodes(t, res.Jobs[0], "a1", "a1", "a2", "a2")
			for _, e := range res.Jobs[0].Ends {
				want := pmix.Success
				if e.Rank == 1 || e.Rank == 2 {
					want = pmix.ErrProcKilledByCmd
				}
				if e.State != want {
					t.Errorf("rank %d ended %v (%s), want %v", e.Rank, e.State, e.Text, want)
				}
			}
		})
	}
}
