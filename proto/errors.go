package proto

import "github.com/pmixbus/pmixbus/pmix"

// Errors of the protocol that both ends know: the agent answers with them,
// the client returns them. Each is a *pmix.Error sentinel whose code
// crosses the wire with the error frame, so that errors.Is tells them
// apart from other errors of the same status on either side.
var (
	// ErrAlreadyAttached: the hello names a proc that another connection
	// holds (PMIX_ERR_INVALID_OPERATION). The agent refuses it at once;
	// retrying is pointless until that process finalizes or exits.
	ErrAlreadyAttached = pmix.NewCodedError(pmix.ErrInvalidOperation, "proto.already_attached", "client already attached")
)
