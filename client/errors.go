package client

import (
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// Errors of the client. Each is a *pmix.Error sentinel with a code of its
// own, so errors.Is tells it from other errors of its status; errors.Is
// with the bare status (pmix.ErrLostConnection) matches too. Errors the
// agent answered with keep the code of the agent's sentinel: errors.Is(err,
// agent.ErrUnknownJob) works on them without this package importing the
// agent.
var (
	// ErrInvalidOption: Init was given a bad Option.
	ErrInvalidOption = pmix.NewCodedError(pmix.ErrBadParam, "client.invalid_option", "invalid client option")

	// ErrAlreadyAttached: Init named an identity that another process
	// holds; the agent refused it at once. It is proto.ErrAlreadyAttached,
	// which the agent re-exports as agent.ErrAlreadyAttached.
	ErrAlreadyAttached = proto.ErrAlreadyAttached

	// ErrLostConnection: the connection to the agent ended (the agent shut
	// down or dropped this client), before or during the call.
	ErrLostConnection = pmix.NewCodedError(pmix.ErrLostConnection, "client.lost_connection", "connection to the agent lost")
)
