// Package trace names events, handler statuses and chain outcomes the way
// pmixbus shows them to people: the lines of "pmixbus watch" and the trace
// of "pmixbus demo". Its functions are pure and safe for concurrent use.
//
//	trace.Code(pmix.EventNodeDown)  // "PMIX_EVENT_NODE_DOWN(-231)"
//	trace.Chain(outcome)           // "first:no-action > fixer:COMPLETE => completed"
package trace
