// Package bus is the handler-chain engine of PMIx event notification: it
// keeps a process's event handler registrations in order, filters events
// for them, and runs their chains, consolidating results. It is pure Go (no
// NATS, no sockets): the agent runs one Registry per local client, and the
// client library uses one for PROC_LOCAL and internal events.
//
// The behaviour is RFC0002's, as extended by RFC0018 and the 2016-04-07
// minutes; where they disagree RFC0018 stands.
//
//	reg, err := bus.NewRegistry(bus.Config{
//		Self:           bus.Origin{Cluster: "A", Node: "n1", Proc: me},
//		DefaultTimeout: bus.DefaultHandlerTimeout,
//	})
//	...
//	id, err := reg.Register([]pmix.Status{pmix.EventProcTerminated},
//		[]pmix.Info{
//			pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("respawn")),
//			pmix.NewInfo(pmix.KeyEventHdlrFirstInCategory, pmix.Bool(true)),
//		},
//		func(c *bus.Call, done bus.Done) {
//			go func() { // a long action leaves the calling goroutine
//				respawn(c.Info)
//				done(pmix.EventPartialActionTaken, []pmix.Info{
//					pmix.NewInfo(pmix.KeyEventNoTermination, pmix.Bool(true)),
//				})
//			}()
//		})
//	...
//	reg.Notify(bus.Event{Code: pmix.EventProcTerminated, Info: info}, func(o bus.Outcome) {
//		// o.Results, o.Completed, o.Termination, o.Ran: forward to the host RM
//	})
//
// # Registration
//
// A registration for one code is in the single category, for several codes
// the multi category, for none the default category. A chain for code X
// runs: the FIRST handler; the single-category handlers for X; the
// multi-category handlers whose codes include X; the default handlers
// (skipped for an event with PMIX_EVENT_NON_DEFAULT); the LAST handler. The
// FIRST and LAST handlers run only for codes they match, and a FIRST or LAST
// handler of the default category counts as a default handler for
// PMIX_EVENT_NON_DEFAULT.
//
// Within a category a handler is prepended by default (RFC0018).
// PMIX_EVENT_HDLR_FIRST and _LAST are one each per registry;
// _FIRST_IN_CATEGORY and _LAST_IN_CATEGORY one each per category (the single
// category is one category, whatever the codes), and they stay first and
// last in it whatever comes later: PREPEND goes just after the
// FIRST_IN_CATEGORY handler, APPEND just before the LAST_IN_CATEGORY one.
// BEFORE and AFTER name a handler of the same category. Naming an unknown
// handler or one of another category, BEFORE the FIRST or a
// FIRST_IN_CATEGORY handler, AFTER the LAST or a LAST_IN_CATEGORY handler,
// or giving two placement attributes, fails with
// pmix.ErrEventRegistration, as does a duplicate PMIX_EVENT_HDLR_NAME
// whatever else is given. AFTER the FIRST handler places at the front of the
// category, BEFORE the LAST handler at its end. The placement attributes
// are positional requests at registration time; later registrations may
// come between two handlers that were placed next to each other.
//
// # Filters
//
// Job events are "characterized by directly targeting processes within
// session jobs" (RFC0002); environment events (Event.Environment) are
// "generated without specifying a particular target". Which of them a
// registration takes is set by two attributes, each given true, given
// false, or absent. RFC0002's attribute list is normative:
//
//   - PMIX_EVENT_JOB_LEVEL: "whether or not job-specific events are to be
//     delivered to this handler. Job-specific events will be delivered to a
//     registered handler by default."
//   - PMIX_EVENT_ENVIRO_LEVEL: "whether or not environmenal [sic] events
//     are to be delivered to this handler. Default: false"
//
// and its prose says that including PMIX_EVENT_JOB_LEVEL registers "solely
// for job-specific events", including PMIX_EVENT_ENVIRO_LEVEL "solely for
// environment events of a given type". The rule that honours both:
//
//	environment events: ENVIRO_LEVEL if given, else false
//	job events:         JOB_LEVEL if given, else not (ENVIRO_LEVEL given true)
//
// So neither attribute takes job events only (both defaults); ENVIRO_LEVEL
// true alone takes environment events only (the "solely" of the prose, which
// would mean nothing if job events still came); both true take both; an
// explicit false is honoured, never read as absent. The rule is the same in
// every category (single, multi, default): naming a code does not bring its
// environment events. A registration that would take neither kind
// (JOB_LEVEL false with ENVIRO_LEVEL absent or false) is refused with
// pmix.ErrBadParam: it would receive nothing.
//
// A PMIX_EVENT_NODE_DOWN that affects a job's processes is a job event
// (RFC0002: job-specific events target processes of the job), so a plain
// NODE_DOWN handler sees those; a NODE_DOWN the host RM raises as an
// environment event (no target) needs PMIX_EVENT_ENVIRO_LEVEL.
// Registration.WantsJob and WantsEnvironment tell an agent which subjects
// to subscribe to for a registration, so environment events reach a node
// only when one of its registrations asked for them (RFC0002).
//
// PMIX_RANGE in a registration is RFC0018's receiver-level filter on the
// event's source (Event.Source) as seen from Config.Self: PROC_LOCAL, only
// events this process generated; LOCAL, the same cluster and node;
// NAMESPACE, the same cluster and nspace; SESSION, the same cluster and
// session; GLOBAL, any; RM, events from the host RM (zero source proc);
// CUSTOM, the procs in PMIX_EVENT_CUSTOM_RANGE (wildcard ranks match).
// PMIX_EVENT_AFFECTED_PROC(S) in a registration passes only events whose own
// affected procs include one of them. A registration with no filter is not
// filtered. Procs are compared as seen from Config.Self's cluster: a proc
// named with that cluster's qualifier ("A:job" seen from cluster A, RFC0003)
// is the same as the bare nspace ("job"), on either side, so a filter may
// name its own cluster's procs either way; other clusters' procs are
// qualified.
//
// # Chains
//
// Each handler gets the event's info, which carries pmix.KeyEventResolved
// ("pmixbus.evresolved", false at the start: the minutes' "resolved" flag),
// and its own copy of the consolidated results so far. When it completes,
// one entry is appended, keyed by its name, valued with the status it
// returned; handlers registered without a name get the key
// UnnamedPrefix+id ("pmixbus.unnamed.7"), because an empty key is RFC0018's
// mark for removal. Its returned infos follow. Edits it made to its copy
// (changed values, keys set to "" for removal) become the consolidated
// array the next handler sees.
//
// Every matching handler runs (minutes), unless one returns
// pmix.EventActionComplete (RFC0002): that ends the chain and sets the
// resolved flag. A handler that resolves the event but wants the others to
// run for their bookkeeping returns pmix.KeyEventResolved true among its
// results instead: the flag is then true for the handlers that follow.
//
// Handlers state their view on terminating the application with
// pmix.KeyEventNoTermination or KeyEventWantTermination in their results.
// RFC0018 lets later handlers edit the results ("the value of a particular
// key can be altered", or the entry removed), says NO_TERMINATION "can be
// overwritten by subsequent handlers", and WANT_TERMINATION "can be
// overridden by subsequent event handlers unless the PMIX_INFO_REQD
// directive is set". So the decision (Outcome.Termination) is read from the
// consolidated array as the chain ends, never kept apart from it: each true
// entry, in array order, overrides the decision so far. A later handler
// overrides an earlier view by returning its own, or by editing or removing
// the earlier entry. A WANT_TERMINATION marked pmix.InfoRequired is final:
// later entries do not override it, and later handlers cannot change or
// remove it (their edits to it are ignored; the entry stays as it was). The
// array and the decision never disagree.
//
// A handler asks for an abort by returning pmix.KeyEventAbortRequested
// true. When the chain has ended, the registry raises pmix.EventAbortRequested
// (the minutes' PMIX_ABORT, pmixbus's -2904) from Config.Self with range
// PROC_LOCAL, so that a handler registered for it can abort the process;
// its outcome is Outcome.Abort. An abort asked for during a chain for
// pmix.EventAbortRequested raises nothing more. The minutes' own way, a
// handler notifying the abort event ("Once the current event callback stack
// has completed, the new PMIX_ABORT event will be triggered"), waits too:
// Notify of an EventAbortRequested from Config.Self while chains run holds
// it until those chains have ended. (The client library turns a PROC_LOCAL
// one notified by a handler still running into the result above.)
//
// A handler that does not complete within PMIX_EVENT_ACTION_TIMEOUT
// (integer or float64 seconds), or Config.DefaultTimeout when its
// registration gives none, is passed over: its entry carries
// pmix.ErrTimeout and the chain moves on. Its completion, if it ever comes,
// is ignored. The timeout counts from the invocation; a handler that keeps
// the calling goroutine cannot be preempted, and is passed over when it
// returns. The precision is the Clock's timers': invocations waiting on one
// registration share one timer, armed for the earliest deadline, and each
// is passed over when its own deadline falls due (see timeout.go), so the
// waiting costs no timer per invocation.
//
// # Delivering one event to many registries
//
// An agent runs one registry per client, and an event for many clients
// runs in each of their registries. Prepare reads the event once (the
// filters' view and the handlers' info with the resolved flag); Start then
// takes one registry's snapshot and returns its chain only if a handler
// would run (Wants and Notify in one), and Run runs it as Notify does. The
// chains share the prepared event read-only: a chain whose handler sets the
// resolved flag copies the info first, so the flag stays in that chain.
// A caller that cannot start every chain at once takes the snapshot when
// the event arrives (Snapshot: no chain state, nothing allocated once the
// code's plan is cached) and makes the chain later (StartFrom), which runs
// as if it had started then.
//
// # Errors
//
// Errors are *pmix.Error values, tested by status, e.g.
// errors.Is(err, pmix.ErrEventRegistration), or by sentinel (ErrClosed).
// Messages say what was wrong, with no package prefix: the agent passes
// them on to the client that registered, and names it gave are quoted at
// most pmix.MaxQuoted bytes long.
//
//   - pmix.ErrEventRegistration (-144): a registration that cannot be
//     placed (see Registration above).
//   - pmix.ErrBadParam (-27): a malformed attribute value (a flag that is
//     not a bool, a BEFORE target that is not a string, a negative timeout,
//     an invalid range …), a nil handler, an invalid Config.
//   - pmix.ErrNotFound (-46): Deregister or Replay of an id that is not
//     registered.
//   - pmix.ErrInit (-31): the registry is closed (ErrClosed).
//
// # Concurrency
//
// A Registry is safe for concurrent use. Any number of chains may run at
// once; each works on a snapshot of the registrations taken when it started,
// so registrations made meanwhile do not change its order (a handler
// deregistered before its turn is skipped). Within a chain, handlers run
// one at a time, in order. The registry never calls a handler, a Done's
// continuation or a Notify callback while holding its locks, so handlers
// may register, deregister (themselves too), notify or close. A handler's
// Done may be called from any goroutine; it may run later handlers before
// it returns. Handlers that complete within their call are chained in a
// loop, not by recursion, so long synchronous chains use constant stack.
//
// Registration, deregistration and lookups by name and id cost O(1)
// expected (plus an amortized O(log n) relabelling, see order.go),
// whatever the number of registrations. The chain for a code is built once
// after a registration change, in time proportional to the handlers it
// holds, and cached.
package bus
