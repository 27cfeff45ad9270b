// Package demo is what "pmixbus demo" runs: two PMIx clusters joined
// through a hub, two agents each, and one client process per proc of three
// jobs, launched the way a host RM launches them; events at every range;
// and a trace of which handlers ran where, checked against what the
// declarations imply.
//
// The scenario (scenario.go) declares the jobs, the clients' roles — the
// handlers each registers — and the events. The oracle (oracle.go) derives
// what each event must do: where it goes from the routing rules of package
// event, which chain it runs from package bus run in-process on each
// client's declared registrations. The runner (run.go) starts the world
// with package agenttest, launches the clients with package launch, sends
// the events, writes the trace and compares. RunClient (client.go) is one
// client process; rendezvous.go is the closing RFC0003 step.
//
//	err := demo.Run(ctx, demo.Config{Out: os.Stdout, Client: []string{exe, "demo-client"}})
//	// in the client process, launched with demo.RoleEnv set:
//	err := demo.RunClient(ctx, os.Getenv(demo.RoleEnv), os.Stdin, os.Stdout)
//
// Run is meant to be called once at a time per process; it leaves no
// process, server, goroutine or temp file behind when it returns.
package demo
