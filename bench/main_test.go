package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// TestMain lets the test binary be a helper process of the scale benchmark:
// the benchmark starts it as helperCommand does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ScaleHelperCommand {
		if err := ScaleHelper(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
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
