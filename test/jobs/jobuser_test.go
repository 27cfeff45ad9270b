package jobs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/security"
)

// TestJobUserCannotReadKeys: an agent that runs as root with a job user
// (pmixbus agent --job-user) starts the ranks as that user: they attach
// to it over its socket, run as the job user's uid, cannot read the key
// files (the keys directory is root's, 0700) and do not inherit where
// the keys are ($PMIXBUS_KEYS). Root only: it skips, saying so, elsewhere.
func TestJobUserCannotReadKeys(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the agent starts the ranks as another user")
	}
	u, err := launch.LookupJobUser("nobody")
	if err != nil {
		t.Skipf("no user nobody to run the ranks as: %v", err)
	}
	keysDir := filepath.Join(t.TempDir(), "keys")
	if _, err := security.EnsureKeys(keysDir); err != nil {
		t.Fatal(err)
	}
	t.Setenv(security.EnvKeysDir, keysDir) // the agent's environment: not the ranks'

	// The program and the sockets where the job user can reach them.
	p := e2e.Prog(t)
	pub, err := os.MkdirTemp("", "pmixbus-jobuser")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(pub) })
	if err := os.Chmod(pub, 0o755); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(pub, "testprog")
	if out, err := exec.Command("cp", p, prog).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A", Nodes: []string{"a1"}}},
		Agent: func(c *agent.Config) {
			c.Slots = 2
			c.JobUser = u
		},
	})
	for _, n := range []string{"a1"} {
		if err := os.Chmod(filepath.Dir(strings.TrimPrefix(w.Agent(n).Addr(), "unix:")), 0o711); err != nil {
			t.Fatal(err)
		}
	}

	script := `id -u; if cat "$1" >/dev/null 2>&1; then echo key-read; else echo key-refused; fi; echo "keys=$PMIXBUS_KEYS home=$HOME"`
	res, buf := e2e.RunJob(t, launch.Config{SignIn: w.SignIn(w.URL("A")), Jobs: []launch.JobSpec{{N: 1,
		App: launch.App{Path: "/bin/sh", Args: []string{"-c", script, "sh", security.KeyFile(keysDir, security.RoleAgent)}, Dir: "/"}}}})
	out := buf.String()
	if res.ExitCode != 0 {
		t.Fatalf("exit %d\n%s", res.ExitCode, out)
	}
	for _, want := range []string{strconv.Itoa(int(u.UID)) + "\n", "key-refused\n", "keys= home=" + u.Home + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the rank's output:\n%s", want, out)
		}
	}

	// A PMIx client of the job user attaches to the root agent.
	res, buf = e2e.RunJob(t, launch.Config{SignIn: w.SignIn(w.URL("A")), Jobs: []launch.JobSpec{{N: 2,
		App: launch.App{Path: prog, Args: []string{"-say", "attached"}, Dir: "/"}}}})
	out = buf.String()
	if res.ExitCode != 0 || strings.Count(out, "attached") != 4 {
		t.Fatalf("a client of the job user: exit %d\n%s", res.ExitCode, out)
	}
}
