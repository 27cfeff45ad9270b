package liveness

import "github.com/pmixbus/pmixbus/pmix"

// Errors of the service. Each is a *pmix.Error sentinel with a code of its
// own: errors.Is(err, ErrNodeTaken) holds for this error only, and
// errors.Is(err, pmix.ErrDuplicateKey) for every error of its status.
var (
	// ErrInvalidConfig: Config.Validate found a problem.
	ErrInvalidConfig = pmix.NewCodedError(pmix.ErrBadParam, "liveness.invalid_config", "invalid liveness config")

	// ErrNodeTaken: another agent of the same node is alive in the
	// cluster (its key did not expire while Start waited for it).
	ErrNodeTaken = pmix.NewCodedError(pmix.ErrDuplicateKey, "liveness.node_taken", "another agent of this node is alive")

	// ErrClosed: the service was shut down, or never started.
	ErrClosed = pmix.NewCodedError(pmix.ErrInvalidOperation, "liveness.closed", "liveness service not running")

	// ErrNoBucket: the cluster's domain has no agents bucket: no agent
	// of it ever started (or its JetStream lost the bucket).
	ErrNoBucket = pmix.NewCodedError(pmix.ErrNotFound, "liveness.no_bucket", "no agents bucket")

	// ErrUnreachable: the cluster's JetStream did not answer.
	ErrUnreachable = pmix.NewCodedError(pmix.ErrUnreach, "liveness.unreachable", "agents bucket unreachable")
)
