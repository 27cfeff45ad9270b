// Package client is what an application links against: the PMIx client's
// role. It attaches to its node's agent with the identity and credential
// the agent issued at launch (environment variables, as PMIx does),
// registers event handlers, notifies events, and runs its handlers when the
// agent invokes them.
//
//	c, err := client.Init(ctx)             // reads PMIX_NAMESPACE, PMIX_RANK, PMIXBUS_AGENT, PMIXBUS_CREDENTIAL
//	defer c.Finalize(ctx)
//	id, err := c.RegisterEventHandler(ctx, []pmix.Status{pmix.EventProcTerminated},
//		[]pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("recover"))},
//		func(call *bus.Call, done bus.Done) {
//			go func() { /* … */ done(pmix.EventActionComplete, nil) }()
//		})
//	err = c.NotifyEvent(ctx, pmix.ExternalErrBase-1, pmix.RangeNamespace, nil)
//
// Registrations are recorded in the client first (RFC0002) and then with
// the agent, which runs the chains for events that arrive over NATS;
// ordering errors come back from the call. PROC_LOCAL events and the
// client's internal events (RFC0002's: PMIX_ERR_LOST_CONNECTION, its
// LOST_SERVER_CONNECTION, when the agent goes away; PMIX_ERR_COMM_FAILURE,
// its FAILED_COMM, when a frame from the agent cannot be decoded) run the
// client's own copy of the chain and never leave the process. That chain
// passes over a handler that does not complete within its
// PMIX_EVENT_ACTION_TIMEOUT, or bus.DefaultHandlerTimeout
// (WithHandlerTimeout), as the agent's do.
//
// Put, Commit, Fence and Get exchange data between processes as PMIx's
// functions of those names do, and Connect and Disconnect are RFC0003's
// (docs/collective.md):
//
//	err = c.Put(pmix.ScopeGlobal, "my.port", pmix.Uint32(4242))
//	err = c.Commit(ctx)
//	err = c.Fence(ctx, nil, []pmix.Info{pmix.NewInfo(pmix.KeyCollectData, pmix.Bool(true))}) // nil: my whole nspace
//	v, err := c.Get(ctx, pmix.Proc{Nspace: "B:viz", Rank: 3}, "my.port", nil)
//	nspace, rank, err := c.Connect(ctx, procs, []pmix.Info{pmix.NewInfo(pmix.KeyConnectID, pmix.String("c1"))})
//
// Get also reads a job's PMIx information, with OpenPMIx's types: its own
// job's is answered from what the agent gave at attach (docs/protocol.md,
// "Job-level info"):
//
//	size, err := c.Get(ctx, pmix.Proc{Nspace: c.Proc().Nspace, Rank: pmix.RankWildcard}, pmix.KeyJobSize, nil) // uint32
//	lrank, err := c.Get(ctx, c.Proc(), pmix.KeyLocalRank, nil)                                                  // uint16
//
// A handler that notifies pmix.EventAbortRequested before it completes asks
// for the 2016-04-07 minutes' abort, which runs once its chain has ended
// (see NotifyEvent).
// Abort is PMIx_Abort: the agent records it and hands it to its host,
// and the process exits after it returns.
//
// IOFPush and IOFPull are PMIx_IOF_push and PMIx_IOF_pull (docs/iof.md):
// bytes for the stdin of processes whose stdin is forwarded, paced by
// their reading; and the output of processes, from the first record their
// job wrote, to a handler run with the event handlers:
//
//	err = c.IOFPush(ctx, []pmix.Proc{{Nspace: "job", Rank: 0}}, data, true) // true: then EOF
//	id, err := c.IOFPull(ctx, []pmix.Proc{{Nspace: "job", Rank: pmix.RankWildcard}}, iof.STDOUT|iof.STDERR,
//		func(r iof.Record) { os.Stdout.Write(r.Data) })
//	err = c.IOFDeregister(ctx, id)
//
// Handlers run one at a time, in the order the agent sent the events, on a
// goroutine of the client's own (a PMIx progress thread), never on the
// goroutine reading the agent's socket, so a handler may call back into the
// client, also with calls that wait for the agent's answer (NotifyEvent,
// Publish, Lookup, RegisterEventHandler). Otherwise a handler must not
// block for long: one that waits holds up every later
// invocation of its process until its PMIX_EVENT_ACTION_TIMEOUT passes it
// over. Do the work on another goroutine and call done from there. A Client
// is safe for concurrent use.
package client
