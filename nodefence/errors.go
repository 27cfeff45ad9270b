package nodefence

import "github.com/pmixbus/pmixbus/pmix"

// ErrBroken is what a fence gets when the barrier broke while it waited,
// with the status stored by the break (by default
// PMIX_ERR_PROC_TERM_WO_SYNC, as the agent's path answers when a
// participant terminates before it arrived).
var ErrBroken = pmix.NewCodedError(pmix.ErrProcTermWOSync, "collective.participant_terminated", "a rank of the job left its node's barrier")
