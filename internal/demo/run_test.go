package demo

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
)

// TestMain lets the test binary be a demo client: Run launches its client
// processes with the command it is given, and TestRun gives this binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "demo-client" && os.Getenv(RoleEnv) != "" {
		if err := RunClient(context.Background(), os.Getenv(RoleEnv), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRun runs the whole demo - servers, agents, client processes - and
// checks it succeeds and leaves nothing behind.
func TestRun(t *testing.T) {
	clustertest.CheckGoroutines(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the demo makes its temp dir
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	start := time.Now()
	err = Run(t.Context(), Config{Out: &out, Client: []string{exe, "demo-client"}})
	t.Logf("demo took %v", time.Since(start))
	if err != nil {
		t.Fatalf("%v\ntrace:\n%s", err, out.String())
	}
	for _, w := range []string{
		"client processes and their handlers",
		"east/e1 sim.0      first:no-action > sync:partial > stats:no-action > trace:no-action > log:no-action > metrics:no-action > audit:no-action > last:no-action",
		"fixer:COMPLETE => completed",
		"=> want-termination (required, by policy)",
		"RM of west",
		"(in-process, never published)",
		"OK: the trace matches the declarations",
		"both found each other",
	} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("trace lacks %q:\n%s", w, out.String())
		}
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the demo left %v in its temp dir", left)
	}
}
