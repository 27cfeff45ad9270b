package cabi

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/agent/agenttest"
)

// The library inside the application's process (testdata/process.c): no
// thread before Init, one after; no signal handler, no signal mask
// changed; an idle rank wakes nothing; fork before and after Init.

// processWorld is a world of one detached rank, "proc.0", attached to
// again and again by the runs of a test.
func processWorld(t *testing.T) (string, *agenttest.World) {
	t.Helper()
	bin := compile(t, "process.c", headers(t)[0], true)
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "proc", Nodes: []string{"n1"}, Detached: true}},
	})
	return bin, w
}

// expectProcess runs process.c in mode and compares its whole output.
func expectProcess(t *testing.T, mode, want string) {
	t.Helper()
	bin, w := processWorld(t)
	if out := run(t, testContext(t), bin, w.Env("A:proc.0"), mode); out != want {
		t.Errorf("%s: output:\n%s\nwant:\n%s", mode, out, want)
	}
}

// TestForkBeforeInit: a process that forks before PMIx_Init (nothing ran
// at load time, no thread exists yet) has a child that initialises,
// fences and finalizes; the parent does the same afterwards.
func TestForkBeforeInit(t *testing.T) {
	want := "child init 0 size 1 fence 0 finalize 0\nparent init 0 size 1 fence 0 finalize 0\n"
	expectProcess(t, "forkinit", want)
}

// TestSignalStorms runs twenty processes with a SIGPROF handler lacking
// SA_ONSTACK on a 1 ms ITIMER_PROF, and a SIGCHLD handler with children
// exiting continuously, while a second thread puts, commits and gets
// (round trips to the agent): none crashes, and every call succeeds.
func TestSignalStorms(t *testing.T) {
	bin, w := processWorld(t)
	runs := 20
	if testing.Short() {
		runs = 3
	}
	for i := range runs {
		out := run(t, testContext(t), bin, w.Env("A:proc.0"), "signals", "150")
		if !strings.HasPrefix(out, "signals calls ") || !strings.Contains(out, " failures 0 finalize 0 ") {
			t.Fatalf("run %d: %s", i, out)
		}
		if i == 0 {
			t.Log(strings.TrimSpace(out))
		}
	}
}

// TestIdleRank: after Init and a Fence the process has two threads (the
// caller's and the library's progress thread), and over half a second of
// idleness the library's thread is not woken once; after Finalize the
// process has its one thread again.
func TestIdleRank(t *testing.T) {
	bin, w := processWorld(t)
	out := run(t, testContext(t), bin, w.Env("A:proc.0"), "idle", "500")
	var threads, switches, after, fin int
	if _, err := fmt.Sscanf(out, "threads %d idle-switches %d\nthreads-after-finalize %d finalize %d\n", &threads, &switches, &after, &fin); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if threads != 2 || switches != 0 || after != 1 || fin != 0 {
		t.Errorf("threads after Init %d (want 2), context switches of the library's thread while idle %d (want 0), threads after Finalize %d (want 1), finalize %d",
			threads, switches, after, fin)
	}
}

// TestSignalState: Init installs no signal handler and leaves the
// caller's mask as it was; the progress thread inherits it, as any thread
// the application starts would.
func TestSignalState(t *testing.T) {
	want := "init 0 handlers-added 0 mask-same 1\nnew-thread-mask-same 1\nfinalize 0\n"
	expectProcess(t, "mask", want)
}

// TestForkAfterInit: a child forked after PMIx_Init has no progress
// thread and shares its parent's connection, as under OpenPMIx. What it
// answers from the process (PMIx_Initialized, job info, its own puts)
// works; what needs the agent is refused with PMIX_ERR_UNREACH rather
// than written on the parent's connection; and its Finalize only counts.
// The parent goes on untouched (docs/cabi.md, "fork").
func TestForkAfterInit(t *testing.T) {
	unreach := strconv.Itoa(-25)
	want := "child initialized 1 size 1 put 0 get 0 fence " + unreach + " commit " + unreach + " finalize 0\n" +
		"parent fence 0 size 1 finalize 0\n"
	expectProcess(t, "forkafter", want)
}

// TestAbortFromHandler: a handler that notifies
// PMIX_ERR_PROC_REQUESTED_ABORT PROC_LOCAL before it completes asks for
// an abort after its chain (the 2016-04-07 minutes): the next handler
// runs first, seeing pmixbus.evabort among the results, then the abort
// event's chain.
func TestAbortFromHandler(t *testing.T) {
	want := "first -3300 asks: 0\nsecond -3300 (abort in results 1)\nabort event -8\nnotified 0\nfinalize 0\n"
	expectProcess(t, "abort", want)
}

// TestLocalHandlerTimeout: in a PROC_LOCAL chain, a handler that never
// completes is passed over once its PMIX_EVENT_ACTION_TIMEOUT (1 s)
// passed, and the next handler runs, as in bus/ and the agent's chains.
func TestLocalHandlerTimeout(t *testing.T) {
	want := "stalling -3301\nsecond -3301 (abort in results 0)\nnotified 0 after the timeout 1\nfinalize 0\n"
	expectProcess(t, "stall", want)
}
