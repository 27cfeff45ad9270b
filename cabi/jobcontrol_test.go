package cabi

import (
	"os"
	"path/filepath"
	"testing"
)

// TestJobControlCleanup: PMIx_Job_control (+_nb) takes the cleanup
// requests of the caller for itself, blocking, with a callback and
// without one (as Open MPI 4.1 sends them), and the last PMIx_Finalize
// removes what they name, recursively where asked; a request for the
// whole job, any other request, and a call before PMIx_Init are refused.
func TestJobControlCleanup(t *testing.T) {
	for _, h := range headers(t) {
		t.Run(h.name, func(t *testing.T) {
			bin := compile(t, "cleanup.c", h, true)
			dir := t.TempDir()
			got := lines(run(t, t.Context(), bin, nil, dir))
			want := map[string]string{
				"null_bool": "1", "before_init": "-31", "init": "-25", "job_scope": "-47",
				"blocking": "0", "nb": "0", "nb_nocb": "0", "kill": "-47", "present": "1", "finalize": "0",
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
