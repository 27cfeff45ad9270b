package nodefence

import "github.com/pmixbus/pmixbus/collective"

// ErrBroken is what a fence gets when the barrier broke while it waited,
// with the status stored by the break (by default
// PMIX_ERR_PROC_TERM_WO_SYNC). It is collective.ErrParticipantTerminated,
// what the agent's path answers when a participant terminates before it
// arrived, so that a caller tells the case apart the same way on both
// paths.
var ErrBroken = collective.ErrParticipantTerminated
