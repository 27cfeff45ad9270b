package cabi

import (
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/launch"
)

// TestLaunchedLog launches testdata/log.c as four ranks over a1 and a2,
// compiled against each header set: each sends two help messages with
// PMIx_Log and PMIx_Log_nb, as Open MPI's show_help does, and the
// launcher's Aggregator shows each once with a count of the other three;
// PMIX_LOG_ONCE is refused with PMIX_ERR_NOT_SUPPORTED and missing
// arguments with PMIX_ERR_BAD_PARAM.
func TestLaunchedLog(t *testing.T) {
	const file = "help-cabi-test.txt"
	for _, h := range headers(t) {
		t.Run(h.name, func(t *testing.T) {
			bin := compile(t, "log.c", h, true)
			w := launchWorld(t)
			help := &clustertest.Buffer{}
			// Longer than the run: the counts come at its end.
			agg := iof.NewAggregator(iof.HelpConfig{Out: help, Interval: time.Hour})
			res, out := launchJob(t, w, launch.Config{Help: agg}, launch.JobSpec{N: 4, App: launch.App{Path: bin, Args: []string{"launched"}}})
			if res.ExitCode != 0 || res.First != nil || strings.Count(out, "logged\n") != 4 || strings.Contains(out, "FAIL") {
				t.Fatalf("result %+v, first %+v\noutput:\n%s", res, res.First, out)
			}
			checkNodes(t, res.Jobs[0], "a1", "a1", "a2", "a2")
			want := "cabi test: the first help message\n" + "cabi test: the second help message\n" +
				iof.HelpCount(3, file, "first") + iof.HelpHint + iof.HelpCount(3, file, "second")
			if help.String() != want {
				t.Errorf("help output:\n%s\nwant:\n%s", help, want)
			}
		})
	}
}

// TestSingletonLog: without an agent PMIx_Log returns PMIX_ERR_UNREACH,
// as OpenPMIx does when not connected.
func TestSingletonLog(t *testing.T) {
	bin := compile(t, "log.c", headers(t)[0], true)
	if out := run(t, t.Context(), bin, nil, "singleton"); out != "logged\n" {
		t.Errorf("output:\n%s", out)
	}
}
