package security

import "errors"

var (
	// ErrNoKey is returned when a set of keys lacks the key of a role
	// that is needed.
	ErrNoKey = errors.New("security: no key for the role")

	// ErrKeyFile is returned for a key file or keys directory that
	// cannot be trusted (others may read or write it) or that holds no
	// user nkey seed.
	ErrKeyFile = errors.New("security: bad key file")

	// ErrJobClaimed is returned when a job credential names a job that
	// another job key is bound to: one job's launcher cannot sign in as
	// another's.
	ErrJobClaimed = errors.New("security: the job is bound to another job key")
)
