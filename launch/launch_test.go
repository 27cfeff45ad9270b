package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary act as the launched process: it names
// what the process does.
const helperEnv = "LAUNCH_TEST_HELPER"

func TestMain(m *testing.M) {
	if what := os.Getenv(helperEnv); what != "" {
		os.Exit(helper(what))
	}
	os.Exit(m.Run())
}

// helper is the launched process.
func helper(what string) int {
	switch what {
	case "report": // its environment, arguments and directory; exit 3
		dir, _ := os.Getwd()
		fmt.Printf("env=%s args=%s dir=%s\n", os.Getenv("LAUNCH_TEST_VALUE"), strings.Join(os.Args[1:], ","), dir)
		fmt.Fprintln(os.Stderr, "to stderr")
		return 3
	case "echo": // its input, line by line, until its end
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			fmt.Println("got " + sc.Text())
		}
		return 0
	case "sleep":
		time.Sleep(time.Minute)
		return 0
	case "setsid-sleep": // leave the process group, keep the output, sleep
		_, _ = syscall.Setsid()
		time.Sleep(time.Minute)
		return 0
	case "launch-sleeper": // start a sleeper, print its pid, sleep
		exe, _ := os.Executable()
		p, err := Start(Command{Path: exe, Env: map[string]string{helperEnv: "sleep"}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(p.Pid())
		time.Sleep(time.Minute)
		return 0
	}
	return 99
}

func start(t *testing.T, what string, c Command) *Process {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c.Path = exe
	if c.Env == nil {
		c.Env = map[string]string{}
	}
	c.Env[helperEnv] = what
	p, err := Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Kill()
		<-p.Done()
	})
	return p
}

func TestStartAndWait(t *testing.T) {
	// Read once Wait returned: the output has been copied by then.
	var out, errOut strings.Builder
	dir := t.TempDir()
	p := start(t, "report", Command{
		Args:   []string{"a", "b c"},
		Env:    map[string]string{"LAUNCH_TEST_VALUE": "from the launcher"},
		Dir:    dir,
		Stdout: &out,
		Stderr: &errOut,
	})
	if p.Pid() <= 0 {
		t.Errorf("pid %d", p.Pid())
	}
	exit, err := p.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if exit != (Exit{Code: 3}) || exit.Success() || exit.String() != "exit status 3" {
		t.Errorf("exit %+v (%v)", exit, exit)
	}
	real, _ := filepath.EvalSymlinks(dir)
	if want := "env=from the launcher args=a,b c dir=" + real + "\n"; out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
	if errOut.String() != "to stderr\n" {
		t.Errorf("stderr %q", errOut.String())
	}
}

func TestStdin(t *testing.T) {
	var out strings.Builder
	p := start(t, "echo", Command{Stdin: true, Stdout: &out})
	for i := range 3 {
		if _, err := fmt.Fprintf(p.Stdin(), "line %d\n", i); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Stdin().Close(); err != nil {
		t.Fatal(err)
	}
	exit, err := p.Wait(t.Context())
	if err != nil || !exit.Success() {
		t.Fatalf("exit %v, %v", exit, err)
	}
	if want := "got line 0\ngot line 1\ngot line 2\n"; out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
}

func TestKill(t *testing.T) {
	p := start(t, "sleep", Command{})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait on a running process: %v", err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	exit, err := p.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := Exit{Code: -1, Signal: syscall.SIGKILL}
	if runtime.GOOS == "windows" {
		want = Exit{Code: 1}
	}
	if exit != want || exit.Success() {
		t.Errorf("exit %+v (%v), want %+v", exit, exit, want)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("kill after exit: %v", err)
	}
}

func TestStartFails(t *testing.T) {
	_, err := Start(Command{Path: filepath.Join(t.TempDir(), "none")})
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("start of a missing executable: %v", err)
	}
}
