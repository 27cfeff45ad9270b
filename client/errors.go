package client

import "github.com/pmixbus/pmixbus/pmix"

// ErrInvalidOption is returned by Init for a bad Option.
var ErrInvalidOption = pmix.NewError(pmix.ErrBadParam, "invalid client option")
