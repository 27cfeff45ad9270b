// Command testprog is the program the launch tests start as a job's ranks
// (internal/e2e builds it once per test package): a PMIx client whose
// behaviour its flags choose, rank by rank. It prints what it sees on
// stdout, one line each ("<rank>: event <code> affected=<proc> exit=<n>",
// "<rank>: watching", "<rank>: get <key> = …", "<rank>: connected …"),
// for the tests to read through the launcher's output.
//
//	testprog -watch -fence -sleep 30s -fail-rank 1 -fail exit:3
//
// -watch registers a handler (for -codes, or every event); -fence then
// fences with every rank of the job, so that a failure comes only once
// every rank watches. Failures (-fail, for the rank -fail-rank or every
// rank when -1): exit:N, signal (SIGKILL itself), abort:N (client.Abort),
// nofinalize (exit 0 without Finalize). -help FILE/TOPIC sends the help
// message "testprog: help message TOPIC of FILE" (client.ShowHelp) once
// -say has printed. -no-pmix runs as a plain program.
//
// -rendezvous mine,theirs is RFC0003's example between two jobs, each
// launched with the keys the other way round: rank 0 publishes its job's
// "cluster:nspace" (range GLOBAL) as mine, every rank looks up theirs
// (PMIX_WAIT) and connects both jobs, printing "<rank>: connected
// <new nspace> rank <new rank>" and the other job's size as the connect
// brought it ("<rank>: get pmix.job.size of <cluster:nspace> = …").
// -await CODE (with -watch) then waits for
// an event of that code, disconnects from the new nspace ("<rank>:
// disconnected") and ends. -end-on CODE (with -watch) ends a rank that
// did not fail once it has seen an event of that code, -sleep at most.
//
// It is one process with one client: its handler runs on the client's
// handler goroutine and only prints, each line in one write, so lines of
// concurrent events never mix.
package main
