package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Command describes a process to start.
type Command struct {
	// Path is the executable. A name without a slash is looked up in PATH.
	Path string
	// Args are the arguments after the program name.
	Args []string
	// Argv0 is the program's name as it sees it (argv[0]); empty means
	// Path. The agent gives the program as the user wrote it, as mpirun
	// does, not the path it resolved.
	Argv0 string
	// Env is added to the launcher's own environment, its entries winning:
	// the environment an agent issued (agent.RegisterClient), and whatever
	// else the process needs.
	Env map[string]string
	// Dir is the working directory; empty means the launcher's.
	Dir string
	// Stdin, if set, gives the process a pipe as its standard input, which
	// Process.Stdin writes to. Otherwise it reads from the null device.
	Stdin bool
	// Stdout and Stderr receive the process's output; nil discards it.
	Stdout, Stderr io.Writer
	// User, if set, is who the process runs as (the launcher must be
	// root); nil: the launcher's user.
	User *JobUser
}

// Process is a started process.
type Process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// outputs are the read ends of the stdout and stderr pipes, which
	// copied's goroutines copy to Command.Stdout and Stderr.
	outputs []*os.File
	copied  sync.WaitGroup
	done    chan struct{}

	mu     sync.Mutex
	reaped bool  // its group is no longer signalled
	exit   Exit  // set before done is closed
	err    error // likewise
}

// OutputGrace bounds how long a process's output may stay open after the
// process exited and its group was killed: a process that left the group
// (setsid) and holds the output is cut off then, as exec.Cmd.WaitDelay
// does, so it cannot hold up the end of the process.
const OutputGrace = time.Second

// Exit is how a process ended.
type Exit struct {
	// Code is the exit code, or -1 when a signal ended the process.
	Code int
	// Signal is the signal that ended the process, or 0.
	Signal syscall.Signal
}

// Success reports whether the process exited with code 0.
func (e Exit) Success() bool { return e.Code == 0 && e.Signal == 0 }

// String says how the process ended: "exit status 3", "signal: killed".
func (e Exit) String() string {
	if e.Signal != 0 {
		return "signal: " + e.Signal.String()
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// Start starts the process c describes, as the leader of a process group
// of its own (on Linux): Signal and Kill reach the whole group, and when
// the process exits, what it left running in its group is killed — a
// rank's background children end with it, and its output ends then,
// not when they would have.
//
// Errors: the error os/exec gave when the executable cannot be found or
// started.
func Start(c Command) (*Process, error) {
	cmd := exec.Command(c.Path, c.Args...)
	if c.Argv0 != "" {
		cmd.Args[0] = c.Argv0
	}
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(secretEnv, k)
	})
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		cmd.Env = append(cmd.Env, k+"="+c.Env[k]) // a later entry wins
	}
	cmd.Dir = c.Dir
	if err := setProcAttrs(cmd, c.User); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	// The output goes through pipes of our own rather than exec's, so
	// that Wait returns when the process exits, whoever still holds them.
	var writeEnds []*os.File
	closeAll := func() {
		for _, f := range append(writeEnds, p.outputs...) {
			_ = f.Close()
		}
	}
	var copies []func()
	pipe := func(w io.Writer) (*os.File, error) {
		if w == nil {
			return nil, nil // the null device
		}
		r, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		writeEnds = append(writeEnds, pw)
		p.outputs = append(p.outputs, r)
		copies = append(copies, func() {
			defer p.copied.Done()
			if _, err := io.Copy(w, r); err != nil && !errors.Is(err, os.ErrClosed) {
				p.mu.Lock()
				if p.err == nil {
					p.err = err
				}
				p.mu.Unlock()
			}
		})
		return pw, nil
	}
	var err error
	if cmd.Stdout, err = pipe(c.Stdout); err == nil {
		if sameWriter(c.Stdout, c.Stderr) {
			cmd.Stderr = cmd.Stdout // one pipe: the writer sees one stream, as exec does
		} else {
			cmd.Stderr, err = pipe(c.Stderr)
		}
	}
	if err != nil {
		closeAll()
		return nil, err
	}
	if c.Stdin {
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			closeAll()
			return nil, err
		}
	}
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, err
	}
	for _, f := range writeEnds {
		_ = f.Close() // the process holds them now
	}
	p.copied.Add(len(copies))
	for _, copy := range copies {
		go copy()
	}
	go p.wait()
	return p, nil
}

// sameWriter reports whether a and b are the same writer (false for
// values that cannot be compared).
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a != nil && a == b
}

func (p *Process) wait() {
	defer close(p.done)
	err := p.cmd.Wait()
	p.mu.Lock()
	p.reaped = true
	p.mu.Unlock()
	// What the process left running in its group ends with it: its
	// output then ends too.
	_ = signalGroup(p.cmd.Process.Pid, syscall.SIGKILL)
	copied := make(chan struct{})
	go func() {
		p.copied.Wait()
		close(copied)
	}()
	t := time.NewTimer(OutputGrace)
	select {
	case <-copied:
	case <-t.C:
		for _, r := range p.outputs {
			_ = r.Close() // a process outside the group holds the output
		}
		<-copied
	}
	t.Stop()
	for _, r := range p.outputs {
		_ = r.Close()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exit = exitOf(p.cmd.ProcessState)
	var exitErr *exec.ExitError
	if p.err == nil && !errors.As(err, &exitErr) {
		p.err = err // nil, or the process could not be waited for
	}
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stdin is the write end of the process's standard input, nil unless
// Command.Stdin was set. Closing it is the end of the process's input; it
// is closed once the process has exited.
func (p *Process) Stdin() io.WriteCloser { return p.stdin }

// Done is closed once the process has exited and its output has been
// copied (cut off OutputGrace after the exit, when a process outside its
// group still holds it).
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits until the process has exited and its output has been copied,
// and says how it ended.
//
// Errors: ctx.Err() when ctx ends first (the process is left running);
// the error of copying its output to Command.Stdout or Stderr.
func (p *Process) Wait(ctx context.Context) (Exit, error) {
	select {
	case <-p.done:
		return p.exit, p.err
	case <-ctx.Done():
		return Exit{}, ctx.Err()
	}
}

// Signal sends sig to the process and the rest of its process group. A
// process that has already exited is not an error.
func (p *Process) Signal(sig os.Signal) error {
	if s, ok := sig.(syscall.Signal); ok {
		p.mu.Lock()
		reaped := p.reaped
		p.mu.Unlock()
		if !reaped && signalGroup(p.cmd.Process.Pid, s) == nil {
			return nil
		}
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// Kill ends the process and the rest of its process group with SIGKILL,
// at once. It does not wait: Wait does. A process that has already exited
// is not an error.
func (p *Process) Kill() error {
	return p.Signal(syscall.SIGKILL)
}

func exitOf(st *os.ProcessState) Exit {
	if st == nil {
		return Exit{Code: -1}
	}
	e := Exit{Code: st.ExitCode()}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = ws.Signal()
	}
	return e
}
