package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/trace"
	"github.com/pmixbus/pmixbus/pmix"
)

// TestMain lets "pmixbus demo" run under go test: it launches its client
// processes by re-running its own executable with "demo-client", and under
// go test that executable is this test binary, which must then be the
// client instead of running the tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "demo-client" && os.Getenv(demoRoleEnv) != "" {
		main()
	}
	os.Exit(m.Run())
}

// shortTempDir is a temp dir with a short path, for Unix sockets.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pxt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestDemo runs the whole demo - servers, agents, client processes - and
// checks it succeeds and leaves nothing behind.
func TestDemo(t *testing.T) {
	clustertest.CheckGoroutines(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the demo makes its temp dir
	start := time.Now()
	code, stdout, stderr := runCmd(t, "demo")
	t.Logf("demo took %v", time.Since(start))
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, w := range []string{
		"client processes and their handlers",
		"east/e1 sim.0      first:no-action > sync:partial > stats:no-action > trace:no-action > log:no-action > metrics:no-action > audit:no-action > last:no-action",
		"fixer:COMPLETE => completed",
		"=> want-termination (required, by policy)",
		"RM of west",
		"(in-process, never published)",
		"OK: the trace matches the declarations",
	} {
		if !strings.Contains(stdout, w) {
			t.Errorf("stdout lacks %q:\n%s", w, stdout)
		}
	}
	if stderr != "" {
		t.Errorf("stderr: %s", stderr)
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the demo left %v in its temp dir", left)
	}
}

// TestDemoInterrupted stops the demo while its clients run: it cleans up
// and exits 1.
func TestDemoInterrupted(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithCancel(context.Background())
	out := &cancelAfter{syncBuffer: &syncBuffer{}, marker: "sending the events", cancel: cancel}
	var errOut syncBuffer
	code := run(ctx, []string{"demo"}, out, &errOut)
	if code != exitFail || !strings.Contains(errOut.String(), "pmixbus demo: stopped") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, &errOut)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("the demo left %v in its temp dir", left)
	}
}

// cancelAfter cancels once marker has been written.
type cancelAfter struct {
	*syncBuffer
	marker string
	cancel context.CancelFunc
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	n, err := c.syncBuffer.Write(p)
	if strings.Contains(string(p), c.marker) {
		c.cancel()
	}
	return n, err
}

// TestDemoExpectations checks the declarations against facts the demo is
// meant to show, so that a change to them cannot quietly make it show less.
func TestDemoExpectations(t *testing.T) {
	o, err := newOracle()
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	got := map[string]map[string]string{} // event → client → chain
	for _, ev := range demoEvents {
		want, _, err := o.expect(t.Context(), ev)
		if err != nil {
			t.Fatal(err)
		}
		got[ev.name] = map[string]string{}
		for _, w := range want {
			got[ev.name][w.client.key()] = trace.Chain(w.outcome)
		}
	}
	keys := func(m map[string]string) string {
		var ks []string
		for _, c := range demoClients {
			if _, ok := m[c.key()]; ok {
				ks = append(ks, c.key())
			}
		}
		return strings.Join(ks, " ")
	}
	for ev, want := range map[string]string{
		"local":       "east:sim.0 east:sim.1",
		"namespace":   "east:sim.0 east:sim.1 east:sim.2",
		"session":     "east:sim.0 east:sim.1 east:sim.2 east:viz.0",
		"custom":      "east:sim.2 west:post.0",
		"global":      "east:sim.0 east:sim.1 east:sim.2 east:viz.0 west:post.0 west:post.1",
		"rm":          "",
		"environment": "east:viz.0",
		"proc-local":  "west:post.0",
	} {
		if k := keys(got[ev]); k != want {
			t.Errorf("%s event reaches %q, want %q", ev, k, want)
		}
	}
	for _, c := range []struct{ ev, client, chain string }{
		{"session", "east:sim.0", "first:no-action > stats:no-action > trace:no-action > log:no-action > metrics:no-action > audit:no-action > last:no-action"},
		{"namespace", "east:sim.1", "fixer:COMPLETE => completed"},
		{"namespace", "east:sim.2", "mine:no-action > any:no-action"},
		{"session", "east:sim.2", "from-rm:no-action > any:no-action"},
		{"global", "west:post.0", "checkpoint:partial > policy:no-action > hopeful:no-action > all:no-action => want-termination (required, by policy)"},
		{"environment", "east:viz.0", "env-watch:partial"},
		{"session", "east:viz.0", "job:no-action"},
	} {
		if got := got[c.ev][c.client]; got != c.chain {
			t.Errorf("%s event at %s: %s, want %s", c.ev, c.client, got, c.chain)
		}
	}
	// Every range is sent, and the RM event from a client.
	ranges := map[pmix.Range]bool{}
	for _, ev := range demoEvents {
		ranges[ev.rng] = true
	}
	for r := pmix.RangeRM; r <= pmix.RangeProcLocal; r++ {
		if !ranges[r] {
			t.Errorf("no demo event of range %v", r)
		}
	}
}
