package bench

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
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
func helperCommand(t testing.TB) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, ScaleHelperCommand}
}

// rankCommand runs this test binary as a rank of the launch benchmark.
func rankCommand(t testing.TB) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, LaunchRankCommand}
}
