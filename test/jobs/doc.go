// Package jobs holds pmixbus's end-to-end tests of jobs: launching
// (MPMD, exit codes, placement), spawn, stdin and output forwarding,
// help messages, ranks under their job's user, a node cut off, a
// replicated cluster and its servers' loss, and the soak runs. Real
// in-process NATS servers, real agents, and the test program
// (internal/testprog) launched as a job's ranks, in worlds of package
// internal/e2e.
package jobs
