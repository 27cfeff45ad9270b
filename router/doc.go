// Package router is the agent's event service: everything between a
// client's PMIx_Notify_event and the handler chains of the clients in the
// event's range on every node.
//
//   - Routing and dispatch (router.go): an event is published on the NATS
//     subjects of its data range (package event, docs/subjects.md); one
//     dispatch goroutine runs every arriving event through the chains of
//     the local clients it is for, in the order the agent received them.
//   - The cache (docs/cache.md): the cluster's cached events arrive as the
//     events stream's copies and are dispatched strictly in its sequence,
//     gaps fetched (sequence.go, drops.go); a new registration takes its
//     place in that sequence and is replayed what is cached up to it
//     (replay.go, cache.go); transient events come on subscriptions that
//     follow what the registrations need; a job's events are retained for
//     its local clients not attached yet (Retention, retention.go).
//   - The GLOBAL link (Link, globallink.go, globalsource.go): the other
//     clusters' GLOBAL events sourced into the cluster's events stream, so
//     they arrive as its copies and JetStream resumes them after a leaf
//     outage; the link watched, for a transient GLOBAL event's
//     PMIX_ERR_UNREACH.
//   - The per-client window of chains in flight (Window, window.go) and the
//     publishing of chain outcome reports (Outcomes, outcome.go).
//
// The agent composes it through three small interfaces: Host (its job
// table, its attached clients, where outcomes go, its goroutines),
// Recipient (one attached client: its registry, its socket's cork, its
// window) and Transport (NATS: publish, subscribe into a channel or a
// callback, flush;
// MemTransport carries messages in memory, so the routing is tested without
// a server):
//
//	r := router.New(router.Config{
//		Transport: router.NATS(nc), Place: event.Place{Cluster: "A", Node: "n1"},
//		Host: host, Retention: retention, Outcomes: outcomes, Log: log, Done: done,
//	})
//	err := r.Sequence(ctx, cache) // the cluster's *jetstream.EventCache: the
//	                              // router's subscriptions, advisories, timers
//	go r.Dispatch()               // until done is closed
//	id, replied, err := r.Register(ctx, client, codes, info, handler)
//	// send the client its reply, then:
//	replied()
//	err = r.Publish(m, &event.Sender{Proc: proc, Session: session})
//
// Concurrency: a Router's exported methods are safe for concurrent use,
// and so are those of Retention, Link, Outcomes and Window. The chains run
// on the dispatch goroutine (and, for events that waited in a client's
// window, on the goroutine that ended an earlier chain); Host's methods
// are called from those and from the router's own goroutines, which it
// starts with Host.GoFunc, and must not block on the router. Retention
// never calls out while holding its lock, so the agent may call it with its
// own lock held.
package router
