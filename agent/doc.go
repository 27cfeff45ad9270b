// Package agent is the per-node daemon: the PMIx server's role. Local
// clients attach to it over a socket (see package proto and
// docs/protocol.md); it holds their registrations, runs their handler
// chains with package bus, routes their notifications by data range onto
// NATS subjects (package subjects, docs/subjects.md), and reports each
// chain's outcome to the host RM.
//
// A host RM written in Go embeds it:
//
//	cfg := agent.DefaultConfig("east", "node07")
//	cfg.URL = "nats://127.0.0.1:4222" // or leave empty for an embedded server in cfg.StoreDir
//	cfg.Keys, err = security.LoadKeys(dir) // sign in as the agent role (docs/security.md)
//	a, err := agent.New(cfg)
//	err = a.Start(ctx)
//	defer a.Shutdown(ctx)
//	err = a.RegisterJob(ctx, agent.Job{Nspace: "job1", Session: "s1", Procs: map[pmix.Rank]string{0: "node07"}})
//	env, err := a.RegisterClient(ctx, pmix.Proc{Nspace: "job1", Rank: 0}) // launch the process with env
//	a.OnOutcome(func(r event.OutcomeReport) { /* termination decisions, abort requests */ })
//	id, err := a.Notify(ctx, pmix.EventNodeDown, pmix.RangeSession, true, info) // as the RM: no source proc; outcomes carry id
//
// The data path reads top to bottom: a client's frames arrive on its
// connection (conn.go), which hands notifications and registrations to the
// event service, package router: it publishes by data range, keeps the
// subscriptions, dispatches arriving events to the chains of the local
// clients in range, replays the cache to new registrations, retains job
// events, and carries GLOBAL events over the link to the other clusters.
// The agent composes it (agent.go, events.go, retention.go): it is the
// router's Host (the attached clients, the job table, where outcomes go)
// and each connection a Recipient. Publish/lookup is a service (package
// publishlookup) the agent wires in publishlookup.go, and so is
// liveness (package launch/liveness, liveness.go): the agent's key in its
// cluster's PMIXBUS_AGENTS bucket, which lists the jobs its node hosts,
// and PMIX_EVENT_NODE_DOWN for the nodes whose keys expire (OnNodeDown,
// Agents; docs/liveness.md).
//
// What the agent knows of each client's life (attached, finalized,
// aborted) is lifecycle.go's: ClientState, OnAbort, WithExitWatched, and
// the rule for the ends it reports itself — PMIX_ERR_PROC_TERM_WO_SYNC for
// a client whose socket is lost without Finalize, unless its host watches
// its process or the agent closed the connection (deregistration,
// Shutdown, a protocol error, a client cut off for not reading: a stalled
// process is still alive), and PMIX_ERR_PROC_REQUESTED_ABORT for an Abort
// when no OnAbort function takes it.
//
// Events reach an agent only through subscriptions its clients'
// registrations need; all subscriptions feed one dispatch goroutine, so
// events are handled in the order the agent received them. A source
// receives its own event when the range includes it.
//
// An Agent's methods are safe for concurrent use. Every goroutine it starts
// is owned and tracked; Shutdown(ctx) signals them, closes every connection
// (authenticated or not), and waits for them within ctx. After Shutdown
// every host method returns ErrClosed.
package agent
