package agent

import "github.com/pmixbus/pmixbus/pmix"

// Errors returned by the agent. Each is a *pmix.Error, so errors.Is works
// with the status constants too (errors.Is(err, pmix.ErrNotFound)).
var (
	// ErrInvalidConfig: Config.Validate found a problem.
	ErrInvalidConfig = pmix.NewError(pmix.ErrBadParam, "invalid agent config")
	// ErrUnknownJob: the nspace was never registered with this agent.
	ErrUnknownJob = pmix.NewError(pmix.ErrInvalidNamespace, "unknown job")
	// ErrUnknownClient: the proc was never registered as a local client.
	ErrUnknownClient = pmix.NewError(pmix.ErrNotFound, "unknown client")
	// ErrClosed: the agent has shut down.
	ErrClosed = pmix.NewError(pmix.ErrInvalidOperation, "agent shut down")
)
