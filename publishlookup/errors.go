package publishlookup

import "github.com/pmixbus/pmixbus/pmix"

// Errors of the service. Each is a *pmix.Error, and errors.Is matches any
// error of the same status: errors.Is(err, pmix.ErrDuplicateKey) holds for
// ErrDuplicate and for the error a client decoded from the wire.
var (
	// ErrInvalidConfig: Config.Validate found a problem.
	ErrInvalidConfig = pmix.NewError(pmix.ErrBadParam, "publishlookup: invalid config")

	// ErrDuplicate: the key is already published in the same range scope
	// (PMIX_ERR_DUPLICATE_KEY).
	ErrDuplicate = pmix.NewError(pmix.ErrDuplicateKey, "publishlookup: key already published")

	// ErrNotFound: none of the keys is published where the requester may
	// see it (PMIX_ERR_NOT_FOUND).
	ErrNotFound = pmix.NewError(pmix.ErrNotFound, "publishlookup: not found")

	// ErrPartial: some keys were found, not all (PMIX_ERR_PARTIAL_SUCCESS);
	// Lookup returns the values found with it.
	ErrPartial = pmix.NewError(pmix.ErrPartialSuccess, "publishlookup: some keys not found")

	// ErrNoPermissions: the keys exist in range, but their access
	// permissions exclude the requester; or, for Unpublish, another process
	// published them (PMIX_ERR_NO_PERMISSIONS).
	ErrNoPermissions = pmix.NewError(pmix.ErrNoPermissions, "publishlookup: no permission")

	// ErrTimeout: PMIX_TIMEOUT passed first (PMIX_ERR_TIMEOUT).
	ErrTimeout = pmix.NewError(pmix.ErrTimeout, "publishlookup: timed out")

	// ErrClosed: the service was closed.
	ErrClosed = pmix.NewError(pmix.ErrInvalidOperation, "publishlookup: service closed")
)
