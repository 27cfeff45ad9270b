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
)
