package bus

import "github.com/pmixbus/pmixbus/pmix"

// ErrClosed is returned by Register and Replay after Close. Its status,
// pmix.ErrInit (what OpenPMIx returns once the library is finalized), is
// the Status of every Outcome of a chain that Close cut short or that was
// notified after Close. It is a sentinel with a code of its own:
// errors.Is(err, ErrClosed) holds for it and errors wrapping it, not for
// other errors of its status; errors.Is(err, pmix.ErrInit) for all.
var ErrClosed = pmix.NewCodedError(pmix.ErrInit, "bus.closed", "registry closed")
