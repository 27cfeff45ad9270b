package cabi

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/launch"
)

// TestLaunchedLog launches testdata/log.c as four ranks over a1 and a2,
// compiled against each header set: each sends two help messages with
// PMIx_Log and PMIx_Log_nb, as Open MPI's show_help does, and the
// launcher's Aggregator shows each once with a count of the other three,
// and so a help message in Open MPI 4.1's own form (PMIX_LOG_MSG); the
// syslog messages reach the agent's syslog, with their priority and
// time; PMIX_LOG_ONCE logs to the first channel that takes it; email is
// refused with PMIX_ERR_NOT_SUPPORTED and missing arguments with
// PMIX_ERR_BAD_PARAM.
func TestLaunchedLog(t *testing.T) {
	const file = "help-cabi-test.txt"
	for _, h := range headers(t) {
		t.Run(h.name, func(t *testing.T) {
			bin := compile(t, "log.c", h, true)
			var mu sync.Mutex
			var syslog []string
			w := launchClustersWith(t, func(c *agent.Config) {
				c.Syslog = func(pri int, msg string) error {
					mu.Lock()
					defer mu.Unlock()
					syslog = append(syslog, fmt.Sprintf("%d %s", pri, msg))
					return nil
				}
			}, agenttest.Cluster{ID: "A", Nodes: []string{"a1", "a2"}})
			help := &clustertest.Buffer{}
			// Longer than the run: the counts come at its end.
			agg := iof.NewAggregator(iof.HelpConfig{Out: help, Interval: time.Hour})
			res, out := launchJob(t, w, launch.Config{Help: agg}, launch.JobSpec{N: 4, App: launch.App{Path: bin, Args: []string{"launched"}}})
			if res.ExitCode != 0 || res.First != nil || strings.Count(out, "logged\n") != 4 || strings.Contains(out, "FAIL") {
				t.Fatalf("result %+v, first %+v\noutput:\n%s", res, res.First, out)
			}
			checkNodes(t, res.Jobs[0], "a1", "a1", "a2", "a2")
			want := "cabi test: the first help message\n" + "cabi test: the second help message\n" + "cabi test: an Open MPI help message\n" +
				iof.HelpCount(3, file, "first") + iof.HelpHint + iof.HelpCount(3, file, "second") + iof.HelpCount(3, "help-cabi-ompi.txt", "abort")
			if help.String() != want {
				t.Errorf("help output:\n%s\nwant:\n%s", help, want)
			}
			mu.Lock()
			defer mu.Unlock()
			stamped := fmt.Sprintf("4 %s WARNING PROC %s:", time.Unix(1795831200, 0).UTC().Format(time.ANSIC), res.Jobs[0].Nspace)
			var n4, n3 int
			for _, m := range syslog {
				switch {
				case strings.HasPrefix(m, stamped) && strings.HasSuffix(m, " REPORTS: cabi test: a syslog message"):
					n4++
				case strings.HasPrefix(m, "3 N/A ERROR PROC ") && strings.HasSuffix(m, " REPORTS: cabi test: a syslog message"):
					n3++
				}
			}
			if n4 != 4 || n3 != 4 || len(syslog) != 8 {
				t.Errorf("syslog:\n%s\nwant 4 of %q… and 4 at priority 3 without a time", strings.Join(syslog, "\n"), stamped)
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
