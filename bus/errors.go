package bus

import "github.com/pmixbus/pmixbus/pmix"

// ErrClosed is returned by Register and Replay after Close, and its status,
// pmix.ErrInit (what OpenPMIx returns once the library is finalized), is the
// Status of every Outcome of a chain that Close cut short or that was
// notified after Close. errors.Is(err, ErrClosed) holds for any *pmix.Error
// with that status.
var ErrClosed = pmix.NewError(pmix.ErrInit, "bus: registry closed")
