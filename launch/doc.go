// Package launch starts and watches the processes of jobs: the launcher
// (`pmixbus run`, PRRTE's prterun) and the launch service every agent
// composes (PRRTE's prted). docs/launch.md tells the whole story.
//
// The launcher places a job's ranks over the live agents of a cluster
// (Place), claims its nspace in the cluster's PMIXBUS_JOBS bucket, and
// asks every agent of the job at once to spawn its ranks (control requests
// on pmix.ctl.<cluster>.<node>.<op>, Control), reporting every agent that
// failed. It follows the ranks' ends, applies the job's policy, raises
// PMIX_EVENT_JOB_END and returns the job's status:
//
//	r, err := launch.Launch(ctx, launch.Config{Conn: nc, Jobs: []launch.JobSpec{{N: 4, App: launch.App{Path: "./sim"}}}})
//	res, err := r.Wait(ctx) // res.ExitCode, res.First
//
// The Daemon is an agent's side: it answers its node's control requests,
// registers the job and its local ranks with its agent (Host), starts
// them (Start), cuts their output into lines for the launcher, feeds the
// stdin of the ranks the launcher's --stdin names through bounded queues
// (OpStdin, stdin.go; the launcher's side is runstdin.go), reaps them,
// classifies how each ended (Classify) and raises the event that says so.
//
// Start starts one process with the environment an agent issued for it;
// on Linux a started process is sent SIGKILL when the thread that started
// it ends (PR_SET_PDEATHSIG), so the processes die with their agent. Go
// starts processes from threads it keeps for the life of the program
// unless the starting goroutine locked its thread and then exits.
//
// Run, Daemon and Process are safe for concurrent use. A Run owns two
// goroutines until every rank has ended; a Daemon one per request, one
// per rank and its launcher watch, all ended by Shutdown.
package launch
