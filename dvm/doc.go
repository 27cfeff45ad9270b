// Package dvm starts the agents of a distributed virtual machine on a
// list of hosts, as prterun starts its daemons: through a launch agent
// (ssh by default, srun inside a Slurm allocation, or a command template
// the user gives), each agent connected to the cluster's NATS server —
// one embedded by the agent of the first host, or one given — and waits
// until every agent beats in the cluster's liveness bucket. Stop stops
// what Start started. `pmixbus run --hostfile` uses it
// (docs/launch.md, "A DVM that starts itself"):
//
//	d, err := dvm.Start(ctx, dvm.Config{Hosts: hosts, Cluster: "dvm", Connect: connect})
//	url := d.URL() // run the job through it
//	err = d.Stop(ctx)
//
// The agents are started with --stop-on-eof and the launch agent's
// standard input held open: closing it stops them cleanly, through ssh
// and srun too, and the death of the launcher (kill -9) stops them all.
//
// A DVM is safe for concurrent use; Stop waits for the launch agents'
// processes and their output goroutines.
package dvm
