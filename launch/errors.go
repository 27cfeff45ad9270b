package launch

import "github.com/pmixbus/pmixbus/pmix"

// Errors of the launch service and the launcher. Each has a PMIx status
// and a code of its own, so errors.Is tells them apart after the wire.
var (
	// ErrNspaceTaken: a job of that nspace runs on the cluster already.
	ErrNspaceTaken = pmix.NewCodedError(pmix.ErrDuplicateKey, "launch.nspace_taken", "nspace taken")
	// ErrVersion: launcher and agent are of different versions.
	ErrVersion = pmix.NewCodedError(pmix.ErrNotSupported, "launch.version", "launcher and agent versions differ")
	// ErrNoProgram: the program cannot be found or is not executable on
	// the agent's node.
	ErrNoProgram = pmix.NewCodedError(pmix.ErrJobFailedToLaunch, "launch.no_program", "program not found or not executable")
	// ErrStart: the program was found but could not be started.
	ErrStart = pmix.NewCodedError(pmix.ErrJobFailedToLaunch, "launch.start", "could not start the program")
	// ErrPlacement: the ranks do not fit the agents' slots, or a named
	// host is unknown.
	ErrPlacement = pmix.NewCodedError(pmix.ErrOutOfResource, "launch.placement", "cannot place the ranks")
	// ErrUnknownJob: the agent runs no process of that job.
	ErrUnknownJob = pmix.NewCodedError(pmix.ErrNotFound, "launch.unknown_job", "no such job on this node")
	// ErrClosed: the service is shut down.
	ErrClosed = pmix.NewCodedError(pmix.ErrInvalidOperation, "launch.closed", "launch service closed")
	// ErrNoStdin: a process whose stdin is not forwarded (it reads the
	// null device: not a --stdin target).
	ErrNoStdin = pmix.NewCodedError(pmix.ErrIOFFailure, "launch.no_stdin", "the process's stdin is not forwarded")
	// ErrStdinFull: a process's stdin queue stayed full (it does not read
	// its input); send again (PMIX_ERR_IOF_XOFF).
	ErrStdinFull = pmix.NewCodedError(pmix.ErrIOFXoff, "launch.stdin_full", "stdin queue full")
	// ErrNoAgent: an agent did not answer a control request.
	ErrNoAgent = pmix.NewCodedError(pmix.ErrUnreach, "launch.no_agent", "agent did not answer")
)
