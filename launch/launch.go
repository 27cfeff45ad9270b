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
	"syscall"
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
}

// Process is a started process.
type Process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	exit  Exit  // set before done is closed
	err   error // likewise
}

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

// Start starts the process c describes.
//
// Errors: the error os/exec gave when the executable cannot be found or
// started.
func Start(c Command) (*Process, error) {
	cmd := exec.Command(c.Path, c.Args...)
	if c.Argv0 != "" {
		cmd.Args[0] = c.Argv0
	}
	cmd.Env = os.Environ()
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		cmd.Env = append(cmd.Env, k+"="+c.Env[k]) // a later entry wins
	}
	cmd.Dir = c.Dir
	cmd.Stdout, cmd.Stderr = c.Stdout, c.Stderr
	setParentDeathSignal(cmd)
	p := &Process{cmd: cmd, done: make(chan struct{})}
	if c.Stdin {
		var err error
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go p.wait()
	return p, nil
}

func (p *Process) wait() {
	defer close(p.done)
	err := p.cmd.Wait()
	p.exit = exitOf(p.cmd.ProcessState)
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		p.err = err // nil, or copying the output failed
	}
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stdin is the write end of the process's standard input, nil unless
// Command.Stdin was set. Closing it is the end of the process's input; it
// is closed once the process has exited.
func (p *Process) Stdin() io.WriteCloser { return p.stdin }

// Done is closed once the process has exited and its output has been
// copied.
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

// Signal sends sig to the process. A process that has already exited is
// not an error.
func (p *Process) Signal(sig os.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// Kill ends the process with SIGKILL, at once. It does not wait: Wait does.
// A process that has already exited is not an error.
func (p *Process) Kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
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
