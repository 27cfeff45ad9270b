package agent

import (
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// Errors returned by the agent. Each is a *pmix.Error sentinel with a code
// of its own: errors.Is(err, ErrClosed) holds for this agent's "shut down"
// and for no other error of its status, while errors.Is(err,
// pmix.ErrInvalidOperation) holds for every error of that status. Codes
// cross the wire, so a client can tell them apart too.
var (
	// ErrInvalidConfig: Config.Validate found a problem.
	ErrInvalidConfig = pmix.NewCodedError(pmix.ErrBadParam, "agent.invalid_config", "invalid agent config")
	// ErrUnknownJob: the nspace was never registered with this agent.
	ErrUnknownJob = pmix.NewCodedError(pmix.ErrInvalidNamespace, "agent.unknown_job", "unknown job")
	// ErrUnknownClient: the proc was never registered as a local client.
	ErrUnknownClient = pmix.NewCodedError(pmix.ErrNotFound, "agent.unknown_client", "unknown client")
	// ErrClientRegistered: RegisterClient of a proc registered already.
	ErrClientRegistered = pmix.NewCodedError(pmix.ErrDuplicateKey, "agent.client_registered", "client already registered")
	// ErrClosed: the agent has shut down.
	ErrClosed = pmix.NewCodedError(pmix.ErrInvalidOperation, "agent.closed", "agent shut down")
	// ErrAlreadyAttached: a hello named a proc that another connection
	// holds; the agent refuses it at once. It is proto.ErrAlreadyAttached,
	// which the client returns from Init.
	ErrAlreadyAttached = proto.ErrAlreadyAttached
)
