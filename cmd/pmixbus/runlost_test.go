package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
)

// asPmixbusEnv makes the test binary run as pmixbus itself (TestMain):
// the tests below need agents, servers and launchers that are processes
// of their own, to kill and signal them.
const asPmixbusEnv = "PMIXBUS_TEST_AS_PMIXBUS"

// pmixbusProc is a pmixbus command running as a process.
type pmixbusProc struct {
	cmd            *exec.Cmd
	stdout, stderr *clustertest.Buffer
	done           chan struct{}
	code           int
}

// startPmixbus starts "pmixbus args…" with the state directory state,
// and kills it when the test ends.
func startPmixbus(t *testing.T, state string, args ...string) *pmixbusProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &pmixbusProc{cmd: exec.Command(exe, args...), stdout: &clustertest.Buffer{}, stderr: &clustertest.Buffer{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), asPmixbusEnv+"=1", "XDG_STATE_HOME="+state)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("pmixbus %s:\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), p.stdout, p.stderr)
		}
	})
	return p
}

// line waits for a stdout line starting with prefix and returns the rest.
func (p *pmixbusProc) line(t *testing.T, prefix string) string {
	t.Helper()
	var v string
	clustertest.WaitFor(t, 30*time.Second, func() error {
		for _, l := range strings.Split(p.stdout.String(), "\n") {
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				v = rest
				return nil
			}
		}
		select {
		case <-p.done:
			t.Fatalf("exited %d before printing %q:\n%s\n%s", p.code, prefix, p.stdout, p.stderr)
		default:
		}
		return fmt.Errorf("no %q line yet", prefix)
	})
	return v
}

// count waits until stdout holds s n times.
func (p *pmixbusProc) count(t *testing.T, s string, n int) {
	t.Helper()
	clustertest.WaitFor(t, 30*time.Second, func() error {
		if c := strings.Count(p.stdout.String(), s); c < n {
			return fmt.Errorf("%q %d times, want %d:\n%s\n%s", s, c, n, p.stdout, p.stderr)
		}
		return nil
	})
}

// exit waits for the process to exit, within bound, and returns its code.
func (p *pmixbusProc) exit(t *testing.T, bound time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(bound):
		t.Fatalf("still running after %v:\n%s\n%s", bound, p.stdout, p.stderr)
		return -1
	}
}

// startAgent starts an agent process of cluster c, node node, and returns
// it with its NATS URL.
func startAgent(t *testing.T, state, c, node string, args ...string) (*pmixbusProc, string) {
	t.Helper()
	a := startPmixbus(t, state, append([]string{"agent", "--cluster", c, "--node", node, "--slots", "2", "--log-level", "warn",
		"--listen", "unix:" + state + "/" + node + ".sock"}, args...)...)
	return a, strings.TrimSpace(a.line(t, "NATS URL: "))
}

// sleepers is a rank that says it started and sleeps, ignoring SIGTERM
// (only SIGKILL ends it).
var sleepers = []string{"/bin/sh", "-c", "trap '' TERM; echo started; exec sleep 300"}

// killUnder waits until run's ranks have started, kills victim (kill -9)
// and expects run to end on its own with code and its stderr to hold
// each of want.
func killUnder(t *testing.T, run, victim *pmixbusProc, ranks, code int, want ...string) {
	t.Helper()
	run.count(t, "started", ranks)
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	got := run.exit(t, 30*time.Second)
	for _, w := range want {
		if !strings.Contains(run.stderr.String(), w) {
			t.Errorf("stderr lacks %q", w)
		}
	}
	if got != code || t.Failed() {
		t.Fatalf("exit %d, want %d:\n%s", got, code, run.stderr)
	}
}

// TestRunAgentKilled: the agent whose embedded NATS server run uses is
// killed (kill -9) under a run: run reports it and exits 69 on its own.
func TestRunAgentKilled(t *testing.T) {
	state := t.TempDir()
	agent, _ := startAgent(t, state, "A", "n1")
	run := startPmixbus(t, state, append([]string{"run", "-n", "2"}, sleepers...)...) // finds the agent by its registration
	killUnder(t, run, agent, 2, exitAgentLost, "agent n1 of cluster A", "is gone")
}

// TestRunNATSLost: the NATS server (not an agent's) is killed under a
// run: run reports it and exits 75 on its own.
func TestRunNATSLost(t *testing.T) {
	state := t.TempDir()
	srv := startPmixbus(t, state, "server", "--cluster", "A", "--port", "-1", "--log-level", "off")
	url := strings.TrimSpace(srv.line(t, "client URL: "))
	startAgent(t, state, "A", "n1", "--nats", url)
	run := startPmixbus(t, state, append([]string{"run", "--nats", url, "-n", "1"}, sleepers...)...)
	killUnder(t, run, srv, 1, exitNATSLost, "no connection to the NATS server")
}

// TestRunNodeLost: one node of a job across two is killed (kill -9; NATS
// runs on the other): run reports the node and exits 68.
func TestRunNodeLost(t *testing.T) {
	state := t.TempDir()
	_, url := startAgent(t, state, "A", "n1")
	n2, _ := startAgent(t, state, "A", "n2", "--nats", url)
	run := startPmixbus(t, state, append([]string{"run", "--nats", url, "--map-by", "node", "-n", "2"}, sleepers...)...)
	killUnder(t, run, n2, 2, exitNodeLost, "on node n2 went down with its node")
}

// TestRunSignals: the first SIGINT ends the job gracefully (its ranks here
// ignore SIGTERM, and the agent's kill grace is long); a second SIGINT
// ends run within seconds. SIGTERM ends run even when nothing answers (the
// agent, with its NATS server, stopped).
func TestRunSignals(t *testing.T) {
	state := t.TempDir()
	agent, url := startAgent(t, state, "A", "n1", "--kill-grace", "5m")
	run := startPmixbus(t, state, append([]string{"run", "--nats", url, "-n", "1"}, sleepers...)...)
	run.count(t, "started", 1)
	_ = run.cmd.Process.Signal(os.Interrupt)
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if !strings.Contains(run.stderr.String(), "interrupted: ending the job") {
			return fmt.Errorf("no word of the interrupt: %s", run.stderr)
		}
		return nil
	})
	_ = run.cmd.Process.Signal(os.Interrupt)
	if code := run.exit(t, 10*time.Second); code != exitInterrupted {
		t.Fatalf("second SIGINT: exit %d:\n%s", code, run.stderr)
	}

	run = startPmixbus(t, state, append([]string{"run", "--nats", url, "-n", "1"}, sleepers...)...)
	run.count(t, "started", 1)
	if err := agent.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	_ = run.cmd.Process.Signal(syscall.SIGTERM)
	if code := run.exit(t, 10*time.Second); code != exitTerminated || !strings.Contains(run.stderr.String(), "exiting without knowing") {
		t.Fatalf("SIGTERM with the agent stopped: exit %d:\n%s", code, run.stderr)
	}
}
