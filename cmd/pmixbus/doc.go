// Command pmixbus is the one binary of pmixbus: an event bus for
// multi-cluster PMIx over NATS.
//
// Usage:
//
//	pmixbus <command> [flags]
//	pmixbus help [command]
//
// Commands:
//
//	agent     run the pmixbus agent of one node
//	bench     measure pmixbus (events, cache, lookup, collective, scale, stalled, launch)
//	demo      run two clusters, agents and client processes; trace events at every range
//	dvm       start or stop agents on the hosts of a hostfile, for many runs (as prte)
//	keys      create the NATS keys of pmixbus's roles and show them
//	lookup    look published data up as a PMIx client (PMIx_Lookup)
//	notify    send one event as the host RM, straight on NATS
//	publish   publish data as a PMIx client (PMIx_Publish)
//	run       launch a job's processes through the agents (as prterun/srun)
//	server    run an embedded NATS server with JetStream for one cluster
//	status    print the clusters reachable, their agents and the jobs they host
//	unpublish remove data this client published (PMIx_Unpublish)
//	version   print the versions of pmixbus, nats-server and nats.go
//	watch     print the events (and chain outcomes) passing on NATS
//
// Every command takes -h (or --help) and then prints its usage and exits 0.
// A bad flag, argument or command exits 2 with a message on stderr; a command
// that fails while running exits 1; run has codes of its own
// (docs/launch.md, "Exit status").
//
// A cluster of one server, and a second cluster joined to it as a leaf node
// (the first acting as hub):
//
//	pmixbus server --cluster A --leaf-port 7422
//	pmixbus server --cluster B --port 4223 --leaf-remote nats-leaf://127.0.0.1:7422
//
// A client of B then reaches A's JetStream as domain "A". Both servers,
// and the agents and tools below, sign in with the keys the first server
// created in ~/.config/pmixbus/keys (docs/security.md; "pmixbus keys"
// shows them); --leaf-tls-* put the leaf link on TLS.
//
// An agent on that server, a job of three procs over two nodes and the
// environment to launch rank 0 with; an event sent as the RM, and a watch
// of what passes:
//
//	pmixbus agent --cluster A --node n1 --nats nats://127.0.0.1:4222 \
//		--job sim:s1:0-1=n1,2=n2 --client sim.0
//	pmixbus notify --nats nats://127.0.0.1:4222 --cluster A \
//		--code EVENT_NODE_DOWN --range namespace --nspace sim
//	pmixbus watch --nats nats://127.0.0.1:4222 --outcomes
//
// "pmixbus demo" shows everything at once, and checks what it shows.
//
// # Sub-benchmarks
//
// "pmixbus bench <benchmark>" runs one of the benchmarks registered with
// registerBench (a command, like the top-level ones, named after the
// benchmark), each in its own file; "pmixbus bench -h" lists them.
//
// # Adding a command
//
// A command is one file that registers a command value from an init
// function; its run function gets the arguments after the command name,
// parses them with its own flag.FlagSet made by newFlagSet and parseFlags,
// and returns the exit code. run must stop when its context ends: main
// cancels it on SIGINT or SIGTERM, tests cancel it directly.
package main
