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
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	t.Fatalf("process %d outlived its launcher", pid)
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
