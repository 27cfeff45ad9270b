package collective

import "github.com/pmixbus/pmixbus/pmix"

// Errors of the service. Each is a *pmix.Error sentinel with a code of its
// own, which crosses the wire to the client: errors.Is(err, ErrTimeout)
// holds for a collective's timeout only, errors.Is(err, pmix.ErrTimeout)
// for any error of that status.
var (
	// ErrInvalidConfig: Config.Validate found a problem.
	ErrInvalidConfig = pmix.NewCodedError(pmix.ErrBadParam, "collective.invalid_config", "invalid collective config")

	// ErrNotParticipant: the caller is not among the participants it named.
	ErrNotParticipant = pmix.NewCodedError(pmix.ErrBadParam, "collective.not_participant", "caller is not among the participants")

	// ErrTimeout: PMIX_TIMEOUT passed before every participant arrived; the
	// message names those that had not (PMIX_ERR_TIMEOUT).
	ErrTimeout = pmix.NewCodedError(pmix.ErrTimeout, "collective.timeout", "collective timed out")

	// ErrFinished: a contribution to an operation that had already
	// completed or failed: a latecomer (PMIX_ERR_INVALID_OPERATION).
	ErrFinished = pmix.NewCodedError(pmix.ErrInvalidOperation, "collective.finished", "collective already finished")

	// ErrParticipantTerminated: a participant terminated before it
	// arrived (PMIX_ERR_PROC_TERM_WO_SYNC); a connect with
	// PMIX_CONNECT_OPTIONAL goes on without it instead.
	ErrParticipantTerminated = pmix.NewCodedError(pmix.ErrProcTermWOSync, "collective.participant_terminated", "a participant terminated before it arrived")

	// ErrNotFound: Get found no such key for that proc, or none its scope
	// lets the caller read (PMIX_ERR_NOT_FOUND).
	ErrNotFound = pmix.NewCodedError(pmix.ErrNotFound, "collective.not_found", "not found")

	// ErrPeerTerminated: Get waited for a key of a process that
	// terminated, or whose job ended, without committing it
	// (PMIX_ERR_NOT_FOUND: it will never be there).
	ErrPeerTerminated = pmix.NewCodedError(pmix.ErrNotFound, "collective.peer_terminated", "the process ended without committing the key")

	// ErrClosed: the service was closed.
	ErrClosed = pmix.NewCodedError(pmix.ErrInvalidOperation, "collective.closed", "collective service closed")
)
