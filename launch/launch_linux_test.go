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
		if alive(pid) {
			return fmt.Errorf("process %d outlived its launcher", pid)
		}
		return nil
	})
}

// alive reports whether process pid runs: it exists and is not a zombie
// (one that nobody reaps, in a container whose first process does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}
