package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/bench"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/demo"
	"github.com/pmixbus/pmixbus/security"
)

// TestMain lets "pmixbus demo", "pmixbus bench scale" and "pmixbus bench
// launch" run under go test: they launch their helper processes by
// re-running their own executable with "demo-client",
// "bench-scale-helper" or "bench-launch-rank", and under go test
// that executable is this test binary, which must then be the helper
// instead of running the tests.
//
// The commands' keys (docs/security.md) go to a directory of the run's
// own, not to the user's.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "demo-client" && os.Getenv(demo.RoleEnv) != "" || os.Args[1] == bench.ScaleHelperCommand || os.Args[1] == bench.LaunchRankCommand) {
		main()
	}
	if os.Getenv(asPmixbusEnv) == "1" {
		main() // startPmixbus: a pmixbus process of its own
	}
	dir, err := os.MkdirTemp("", "pmixbus-keys")
	if err != nil {
		panic(err)
	}
	os.Setenv(security.EnvKeysDir, dir)
	os.Setenv("XDG_STATE_HOME", dir+"/state") // the agents' stores and local registrations
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// keysOption signs a test's connection in as role, with the key the
// commands of this run share.
func keysOption(t *testing.T, role security.Role) nats.Option {
	t.Helper()
	keys, err := security.LoadKeys(os.Getenv(security.EnvKeysDir))
	if err != nil {
		t.Fatal(err)
	}
	return keys.Option(role)
}

// TestDemoInterrupted stops the demo while its clients run: it cleans up
// and exits 1.
func TestDemoInterrupted(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithCancel(context.Background())
	out := &cancelAfter{Buffer: &clustertest.Buffer{}, marker: "sending the events", cancel: cancel}
	var errOut clustertest.Buffer
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
	*clustertest.Buffer
	marker string
	cancel context.CancelFunc
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	n, err := c.Buffer.Write(p)
	if strings.Contains(string(p), c.marker) {
		c.cancel()
	}
	return n, err
}
