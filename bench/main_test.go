package bench

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"github.com/pmixbus/pmixbus/agent"
)

// TestMain lets the test binary be a helper process of the scale benchmark,
// as helperCommand starts it, and a rank of the launch benchmark
// (rankCommand).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == LaunchRankCommand {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		err := LaunchRank(ctx, strings.Join(os.Args[2:], " "), os.Stdout)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[1] == ScaleHelperCommand {
		if err := ScaleHelper(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv("GORACE") == "" {
		// A race-enabled process sleeps 1 s as it exits, which would
		// swamp the launch benchmark's ranks and floor.
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

// helperCommand runs this test binary as a helper process of the scale
// benchmark.
func helperCommand(t testing.TB) []string { return selfCommand(t, ScaleHelperCommand) }

// rankCommand runs this test binary as a rank of the launch benchmark.
func rankCommand(t testing.TB) []string { return selfCommand(t, LaunchRankCommand) }

func selfCommand(t testing.TB, command string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, command}
}

// benchmarkReport runs a benchmark once per b.N round, prints its report
// and reports its targets as metrics.
func benchmarkReport(b *testing.B, run func(context.Context) (*Report, error)) {
	agent.ApplyGCPercent() // as pmixbus bench does: the agents are in this process
	for range b.N {
		r, err := run(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		r.Print(os.Stdout)
		for _, t := range r.Targets {
			b.ReportMetric(t.Measured, t.Name)
		}
	}
}
