package cabi

import (
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
)

// TestLaunchedFault runs testdata/fault.c, what OpenPMIx's fault.c and
// hybrid.c ask of events, as four ranks over two agents with
// --continuous: each hears of the model it declared at Init once, after
// registering for PMIX_MODEL_DECLARED; deregistering a reference never
// handed out calls the callback with PMIX_ERR_NOT_FOUND; rank 0 exits
// with status 1 after a fence, and the three others hear of it under
// PMIX_ERR_PROC_ABORTED, finalize and end normally.
func TestLaunchedFault(t *testing.T) {
	for _, h := range headers(t) {
		t.Run(h.name, func(t *testing.T) {
			bin := compile(t, "fault.c", h, true)
			w := launchWorld(t)
			res, out := launchJob(t, w, launch.Config{Continuous: true}, launch.JobSpec{N: 4, App: launch.App{Path: bin}})
			if strings.Count(out, "survived\n") != 3 || strings.Contains(out, "FAIL") {
				t.Fatalf("result %+v\noutput:\n%s", res, out)
			}
			if res.First == nil || res.First.Rank != 0 || res.First.State != pmix.ErrExitNonzeroTerm {
				t.Errorf("first end %+v, want rank 0 exiting with status 1", res.First)
			}
			for _, e := range res.Jobs[0].Ends[1:] {
				if e.State != pmix.Success {
					t.Errorf("rank %d ended %v (%s), want a normal end", e.Rank, e.State, e.Text)
				}
			}
		})
	}
}
