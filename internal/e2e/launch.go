package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/security"
)

// testProg builds internal/testprog once per run of a test package: the
// program the launch tests start as a job's ranks. Main removes it.
var testProg = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "pmixbus-testprog")
	if err != nil {
		return "", err
	}
	testProgDir = dir
	path := filepath.Join(dir, "testprog")
	out, err := exec.Command("go", "build", "-o", path, "github.com/pmixbus/pmixbus/internal/testprog").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building testprog: %v\n%s", err, out)
	}
	return path, nil
})

var testProgDir string

// Main runs a test package's tests, removes the test program if one was
// built (Prog), and returns the exit code: each package's TestMain is
//
//	func TestMain(m *testing.M) { os.Exit(e2e.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	if testProgDir != "" {
		os.RemoveAll(testProgDir)
	}
	return code
}

// LaunchMain is Main for a package whose tests launch the test program: it
// builds it before any test starts a world. Built by the first test that
// needs it, with that test's agents running, the build could starve them
// past their liveness TTL on a loaded machine (1 s in LaunchSpec), and
// their nodes be declared down.
func LaunchMain(m *testing.M) int {
	if _, err := testProg(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(testProgDir)
		return 1
	}
	return Main(m)
}

// Prog returns the path of internal/testprog, built on the first call.
func Prog(t *testing.T) string {
	t.Helper()
	p, err := testProg()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// LaunchSpec: two clusters of two agents, two slots each, that launch.
var LaunchSpec = agenttest.Spec{
	Clusters: []agenttest.Cluster{
		{ID: "A", Nodes: []string{"a1", "a2"}},
		{ID: "B", Nodes: []string{"b1", "b2"}},
	},
	Agent: func(c *agent.Config) {
		c.HandlerTimeout = 10 * time.Second
		c.Slots = 2
		c.KillGrace = time.Second
		c.LivenessInterval, c.LivenessTTL = LiveInterval, LiveTTL
	},
}

// LauncherConn connects to cluster id's server as the launcher.
func LauncherConn(t *testing.T, w *agenttest.World, id cluster.ID) *nats.Conn {
	t.Helper()
	return clustertest.Connect(t, w.URL(id), w.Keys().Option(security.RoleLauncher), nats.CustomInboxPrefix(security.LauncherInboxPrefix))
}

// SyncBuffer is an io.Writer tests can read while the launcher writes.
type SyncBuffer struct{ clustertest.Buffer }

// WaitFor waits until the output holds want.
func (s *SyncBuffer) WaitFor(t *testing.T, want string) {
	t.Helper()
	clustertest.WaitFor(t, WaitTime, func() error {
		if !strings.Contains(s.String(), want) {
			return fmt.Errorf("no %q in output:\n%s", want, s.String())
		}
		return nil
	})
}

// RunJob launches cfg and waits for its end.
func RunJob(t *testing.T, cfg launch.Config) (launch.Result, *SyncBuffer) {
	t.Helper()
	out := &SyncBuffer{}
	cfg.Stdout, cfg.Stderr = out, out
	return LaunchAndWait(t, cfg, out), out
}

// LaunchAndWait launches cfg and waits for its end; out is shown if it
// does not end.
func LaunchAndWait(t *testing.T, cfg launch.Config, out fmt.Stringer) launch.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := launch.Launch(ctx, cfg)
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	res, err := r.Wait(ctx)
	if err != nil {
		t.Fatalf("wait: %v\noutput:\n%s", err, out)
	}
	return res
}
