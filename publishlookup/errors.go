package publishlookup

import "github.com/pmixbus/pmixbus/pmix"

// Errors of the service. Each is a *pmix.Error sentinel with a code of its
// own, which crosses the wire to the client: errors.Is(err, ErrNotFound)
// holds for this service's "not found" only (not for agent.ErrUnknownClient
// of the same status), and errors.Is(err, pmix.ErrNotFound) for any error of
// that status. Messages carry no package prefix: they reach users as they
// are (the code says where they come from).
var (
	// ErrInvalidConfig: Config.Validate found a problem.
	ErrInvalidConfig = pmix.NewCodedError(pmix.ErrBadParam, "publishlookup.invalid_config", "invalid publish/lookup config")

	// ErrDuplicate: the key is already published in the same range scope
	// (PMIX_ERR_DUPLICATE_KEY).
	ErrDuplicate = pmix.NewCodedError(pmix.ErrDuplicateKey, "publishlookup.duplicate", "key already published")

	// ErrNotFound: none of the keys is published where the requester may
	// see it (PMIX_ERR_NOT_FOUND).
	ErrNotFound = pmix.NewCodedError(pmix.ErrNotFound, "publishlookup.not_found", "not found")

	// ErrPartial: some keys were found, not all (PMIX_ERR_PARTIAL_SUCCESS);
	// Lookup returns the values found with it.
	ErrPartial = pmix.NewCodedError(pmix.ErrPartialSuccess, "publishlookup.partial", "some keys not found")

	// ErrNoPermissions: the keys exist in range, but their access
	// permissions exclude the requester; or, for Unpublish, another process
	// published them (PMIX_ERR_NO_PERMISSIONS).
	ErrNoPermissions = pmix.NewCodedError(pmix.ErrNoPermissions, "publishlookup.no_permissions", "no permission")

	// ErrTimeout: PMIX_TIMEOUT passed first (PMIX_ERR_TIMEOUT).
	ErrTimeout = pmix.NewCodedError(pmix.ErrTimeout, "publishlookup.timeout", "timed out")

	// ErrClosed: the service was closed.
	ErrClosed = pmix.NewCodedError(pmix.ErrInvalidOperation, "publishlookup.closed", "publish/lookup service closed")
)
