package cabi

import (
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/launch"
)

// TestLaunchedQuery runs testdata/query.c, what OpenPMIx's abi_no_init.c,
// hello.c and bad_exit.c ask of PMIx_Query_info, as four ranks over a1
// and a2: the ABI versions before Init, process sets not found as under
// mpirun, the namespaces, job size and proc tables, an unknown key not
// found and a mix partially answered.
func TestLaunchedQuery(t *testing.T) {
	for _, h := range headers(t) {
		t.Run(h.name, func(t *testing.T) {
			bin := compile(t, "query.c", h, true)
			w := launchWorld(t)
			res, out := launchJob(t, w, launch.Config{}, launch.JobSpec{N: 4, App: launch.App{Path: bin}})
			if strings.Count(out, "queried\n") != 4 || strings.Contains(out, "FAIL") || res.ExitCode != 0 {
				t.Fatalf("result %+v\noutput:\n%s", res, out)
			}
		})
	}
}
