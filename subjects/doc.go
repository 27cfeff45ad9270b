// Package subjects maps PMIx data ranges onto NATS subjects.
//
// Each range is one subject prefix (a [Scope]) and the event code is the
// last token, so NATS's interest-based routing carries an event only to
// agents with a matching registration, and a registration for one code
// subscribes to one subject while a default registration subscribes to a
// wildcard:
//
//	PMIX_RANGE_RM         pmix.evt.<cluster>.rm.<code>
//	PMIX_RANGE_LOCAL      pmix.evt.<cluster>.node.<node>.<code>
//	PMIX_RANGE_NAMESPACE  pmix.evt.<cluster>.ns.<nspace>.<code>
//	PMIX_RANGE_SESSION    pmix.evt.<cluster>.sess.<session>.<code>
//	PMIX_RANGE_CUSTOM     pmix.evt.<cluster>.agent.<node>.<code>  (one per hosting agent)
//	PMIX_RANGE_GLOBAL     pmix.evt.global.<origin cluster>.<code>
//	environment events    the subject of their range under pmix.env:
//	                      pmix.env.<cluster>.node.<node>.<code>, pmix.env.global.<origin>.<code>, …
//	PMIX_RANGE_PROC_LOCAL never published
//
// Codes are decimal ("-231"). Names — clusters, nodes, nspaces, sessions —
// are arbitrary strings, escaped by [EscapeToken] into tokens that hold no
// '.', '*', '>' or whitespace, and that [UnescapeToken] reverses. A cluster
// literally named "global" cannot be confused with the global prefix: its
// token is escaped differently (see [ClusterToken]). docs/subjects.md is the
// full description.
//
// Usage:
//
//	sc, err := subjects.ForRange(pmix.RangeNamespace, subjects.Target{Cluster: "A", Nspace: "job1"})
//	subj := sc.Subject(pmix.EventProcTerminated) // pmix.evt.A.ns.job1.-201
//	pats := sc.Patterns(nil)                      // [pmix.evt.A.ns.job1.*]
//
// Everything here is a pure function of its arguments and safe for
// concurrent use.
package subjects
