package bus

import "github.com/pmixbus/pmixbus/pmix"

// Origin locates a process for source-range filtering. A zero Proc (Nspace
// "") means the host RM of Cluster (and Node, when the RM has one per node).
type Origin struct {
	Cluster, Node, Session string
	Proc                   pmix.Proc
}

// Event is one notification to run a chain for.
type Event struct {
	Code pmix.Status
	// Source is who generated the event. The agent stamps it from what it
	// knows of the sender; it is never taken from a client's word.
	Source Origin
	// Range is the range the event was sent with. The engine passes it on
	// and does not filter on it: delivery by range happened before the
	// event reached this registry, and receiver-side filtering looks at
	// Source.
	Range pmix.Range
	// Environment marks an environment event (one that targets no job,
	// RFC0002), as opposed to a job event.
	Environment bool
	// Info is the event's info: PMIX_EVENT_NON_DEFAULT, the affected procs,
	// and anything the handlers should see. A pmix.KeyEventResolved entry
	// in it is replaced by the chain's own flag.
	Info []pmix.Info
}

// Call is what a handler receives.
type Call struct {
	ID     ID     // the handler's registration id, e.g. to deregister itself
	Name   string // the handler's name, "" when unnamed
	Code   pmix.Status
	Source pmix.Proc // the event's source; zero for the host RM
	// Info is the event's info followed by pmix.KeyEventResolved. It is
	// shared with the other handlers of the chain: read it, never modify it.
	Info []pmix.Info
	// Results is the handler's own copy of the consolidated results so
	// far (RFC0018). Before calling done, the handler may change values in
	// place, or set an entry's Key to "" to remove it (RFC0018's "free the
	// key and set it to NULL"), except a PMIX_EVENT_WANT_TERMINATION entry
	// marked pmix.InfoRequired: edits to that one are ignored. New entries
	// go in done's results argument: appending to this slice adds nothing.
	// The engine takes the storage back when done is called, so do not
	// keep it past that.
	Results []pmix.Info
}

// Handler is an event handler. It is non-blocking in the sense of the
// 2016-04-07 minutes: it may call done before returning, or later from any
// goroutine. It is never called with a lock of the registry held, so it may
// call Register, Deregister, Notify or any other method of the registry.
//
// Calling done may run the rest of the chain, including later handlers and
// the Notify callback, on the caller's goroutine before done returns: do not
// call it while holding a lock a later handler or the callback needs.
type Handler func(c *Call, done Done)

// Done completes a handler's invocation with the status it returns
// (pmix.EventNoActionTaken, EventPartialActionTaken, EventActionDeferred,
// EventActionComplete, or any other status, recorded as given) and the
// results it adds. The engine copies results before done returns. Done is
// safe to call from any goroutine; calls after the first, and a call after
// the handler's timeout passed it over, are ignored.
//
// Among results, these keys steer the chain:
//
//   - pmix.KeyEventNoTermination / KeyEventWantTermination (bool): the
//     handler's view on terminating the application; see Termination.
//   - pmix.KeyEventAbortRequested (bool): raise the abort event once the
//     chain ends.
//   - pmix.KeyEventResolved (bool): mark the event resolved for the handlers
//     that follow, without stopping the chain as EventActionComplete does.
type Done func(status pmix.Status, results []pmix.Info)

// Outcome is the result of one chain.
type Outcome struct {
	Code pmix.Status // the event's code
	// Status is pmix.Success when the chain ran to its end (or was ended
	// by a handler's EventActionComplete), and pmix.ErrInit when the
	// registry was closed before or during the chain.
	Status pmix.Status
	// Results is the consolidated results array after the last handler:
	// for each handler that ran, an entry keyed by its name (or
	// UnnamedPrefix+id) whose value is the status it returned, followed by
	// the infos it returned, as edited by later handlers. A handler passed
	// over for its timeout has an entry with pmix.ErrTimeout. Nil when no
	// handler ran.
	Results []pmix.Info
	// Completed: a handler returned pmix.EventActionComplete, which ended
	// the chain.
	Completed bool
	// Resolved is the final value of the pmix.KeyEventResolved flag: set
	// by EventActionComplete or by a handler returning the key as true.
	Resolved bool
	// Termination is the consolidated termination decision (RFC0018).
	Termination Termination
	// Ran lists the handlers invoked, in order.
	Ran []Ran
	// Abort is the outcome of the abort event's chain
	// (pmix.EventAbortRequested) when a handler asked for an abort; the
	// Notify callback runs after that chain too.
	Abort *Outcome
}

// Decision is a termination decision (RFC0018).
type Decision int

const (
	// Undecided: the results hold no true KeyEventNoTermination or
	// KeyEventWantTermination.
	Undecided Decision = iota
	// NoTermination: the deciding entry is KeyEventNoTermination.
	NoTermination
	// WantTermination: the deciding entry is KeyEventWantTermination.
	WantTermination
)

// String returns "undecided", "no-termination" or "want-termination".
func (d Decision) String() string {
	switch d {
	case NoTermination:
		return "no-termination"
	case WantTermination:
		return "want-termination"
	}
	return "undecided"
}

// Termination is the consolidated termination decision of a chain, read
// from Outcome.Results as the chain ends, so the two always agree: each
// KeyEventNoTermination or KeyEventWantTermination entry that is true, in
// array order, overrides the decision so far, unless that decision is a
// WantTermination marked pmix.InfoRequired, which nothing overrides. A
// later handler overrides an earlier view by returning its own, or by
// editing or removing the earlier entry in Call.Results; edits to a
// required WantTermination entry are ignored. See the package
// documentation, Chains.
type Termination struct {
	Decision Decision
	Required bool   // the WantTermination carried pmix.InfoRequired
	By       ID     // the handler that added the deciding entry; 0 when Undecided
	ByName   string // its name
}

// Want reports whether the chain decided the application should terminate.
func (t Termination) Want() bool { return t.Decision == WantTermination }

// Ran records one handler invocation of a chain.
type Ran struct {
	ID     ID
	Name   string
	Status pmix.Status // what the handler returned; pmix.ErrTimeout if passed over, pmix.ErrInit if cut short by Close
	// TimedOut: the handler did not complete within its timeout.
	TimedOut bool
}
