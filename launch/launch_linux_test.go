package launch

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
)

// TestParentDeathSignal: a process started by a launcher that is killed
// dies with it.
func TestParentDeathSignal(t *testing.T) {
	// The launcher is this binary too: it starts a sleeper, prints its pid
	// and sleeps; then it is killed.
	pr, pw := io.Pipe()
	defer pr.Close()
	launcher := start(t, "launch-sleeper", Command{Stdout: pw})
	line, err := bufio.NewReader(pr).ReadString('\n')
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		t.Fatalf("the launcher printed %q: %v", line, err)
	}
	if err := launcher.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // should it outlive the test
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if clustertest.ProcessRuns(pid) {
			return fmt.Errorf("process %d outlived its launcher", pid)
		}
		return nil
	})
}

// startShell starts sh -c script with its output in a buffer, and kills
// what it leaves behind when the test ends.
func startShell(t *testing.T, script string) (*Process, *clustertest.Buffer) {
	t.Helper()
	var out clustertest.Buffer
	p, err := Start(Command{Path: "/bin/sh", Args: []string{"-c", script}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Kill()
		<-p.Done()
	})
	return p, &out
}

// firstPid is the pid the script printed on its first line.
func firstPid(t *testing.T, out *clustertest.Buffer) int {
	t.Helper()
	var pid int
	clustertest.WaitFor(t, 10*time.Second, func() error {
		line, _, ok := strings.Cut(out.String(), "\n")
		if !ok {
			return fmt.Errorf("no pid yet: %q", out.String())
		}
		pid, _ = strconv.Atoi(line)
		return nil
	})
	if pid <= 0 {
		t.Fatalf("no pid: %q", out.String())
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// TestBackgroundChildEndsWithProcess: a process that exits leaving a
// background child holding its output ends at once — its group is killed
// — rather than when the child would have (sh -c 'sleep 30 & echo').
func TestBackgroundChildEndsWithProcess(t *testing.T) {
	p, out := startShell(t, "sleep 30 & echo $!; echo hi")
	child := firstPid(t, out)
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the background child held the process's end")
	}
	if e, err := p.Wait(t.Context()); err != nil || !e.Success() || !strings.HasSuffix(out.String(), "hi\n") {
		t.Fatalf("exit %v, %v, output %q", e, err, out)
	}
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if clustertest.ProcessRuns(child) {
			return fmt.Errorf("background child %d outlived its process", child)
		}
		return nil
	})
}

// TestSignalReachesGroup: a signal to a process reaches its group.
func TestSignalReachesGroup(t *testing.T) {
	p, out := startShell(t, "sleep 30 & echo $!; wait")
	child := firstPid(t, out)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if clustertest.ProcessRuns(child) {
			return fmt.Errorf("child %d did not get the signal", child)
		}
		return nil
	})
}

// TestEscapedChildDoesNotHoldOutput: a child that left the group (setsid)
// and holds the output is cut off OutputGrace after the process exits.
func TestEscapedChildDoesNotHoldOutput(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(helperEnv, "setsid-sleep")
	// The shell exits once the child has its own session (field 6 of
	// its /proc stat).
	p, out := startShell(t, "\""+exe+"\" & pid=$!; echo $pid; until [ \"$(cut -d' ' -f6 /proc/$pid/stat)\" = $pid ]; do :; done; echo bye")
	escaped := firstPid(t, out) // killed at cleanup
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("an escaped child held the process's end")
	}
	if !strings.HasSuffix(out.String(), "bye\n") || !clustertest.ProcessRuns(escaped) {
		t.Fatalf("output %q; escaped child alive: %v", out, clustertest.ProcessRuns(escaped))
	}
}
