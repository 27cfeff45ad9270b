package iof

import "github.com/pmixbus/pmixbus/pmix"

// Errors of package iof. Each has a PMIx status and a code of its own, so
// errors.Is tells them apart after the wire.
var (
	// ErrClosed: a Source or Service used after Close, or a record the
	// Service closed before it was stored.
	ErrClosed = pmix.NewCodedError(pmix.ErrIOFFailure, "iof.closed", "output capture closed")
	// ErrNoJob: the stream holds no record of the job — it never ran on
	// the cluster, or its output has aged out.
	ErrNoJob = pmix.NewCodedError(pmix.ErrNotFound, "iof.no_job", "no output of that job")
)
