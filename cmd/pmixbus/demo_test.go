package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/bench"
	"github.com/pmixbus/pmixbus/internal/demo"
)

// TestMain lets "pmixbus demo" and "pmixbus bench scale" run under go
// test: they launch their helper processes by re-running their own
// executable with "demo-client" or "bench-scale-helper", and under go test
// that executable is this test binary, which must then be the helper
// instead of running the tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "demo-client" && os.Getenv(demo.RoleEnv) != "" || os.Args[1] == bench.ScaleHelperCommand) {
		main()
	}
	os.Exit(m.Run())
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
