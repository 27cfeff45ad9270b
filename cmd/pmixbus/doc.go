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
//	server    run an embedded NATS server with JetStream for one cluster
//	version   print the versions of pmixbus, nats-server and nats.go
//
// Every command takes -h (or --help) and then prints its usage and exits 0.
// A bad flag, argument or command exits 2 with a message on stderr; a command
// that fails while running exits 1.
//
// A cluster of one server, and a second cluster joined to it as a leaf node
// (the first acting as hub):
//
//	pmixbus server --cluster A --leaf-port 7422
//	pmixbus server --cluster B --port 4223 --leaf-remote nats-leaf://127.0.0.1:7422
//
// A client of B then reaches A's JetStream as domain "A".
//
// # Adding a command
//
// A command is one file that registers a command value from an init
// function; its run function gets the arguments after the command name,
// parses them with its own flag.FlagSet made by newFlagSet and parseFlags,
// and returns the exit code. run must stop when its context ends: main
// cancels it on SIGINT or SIGTERM, tests cancel it directly.
package main
