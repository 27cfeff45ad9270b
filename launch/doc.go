// Package launch starts and watches the processes of a job: the launcher's
// role (DESIGN.md, "pmixbus run"). What it holds today is the seed of that
// launcher: it starts one process with the environment an agent issued for
// it, and reports how the process ended. Placement, spawning through the
// agents of other nodes, output forwarding and the job's lifecycle come
// later, on top of it.
//
//	env, _ := a.RegisterClient(ctx, pmix.Proc{Nspace: "sim", Rank: 0})
//	p, err := launch.Start(launch.Command{Path: "/usr/bin/sim", Args: []string{"--steps", "10"}, Env: env})
//	if err != nil { … }
//	exit, err := p.Wait(ctx) // exit.Code, exit.Signal
//
// On Linux a started process is sent SIGKILL when the launcher dies without
// cleaning up (PR_SET_PDEATHSIG). The kernel ties that to the thread that
// started the process, not to the whole launcher: Go starts processes from
// threads it keeps for the life of the program, unless the starting
// goroutine locked its thread (runtime.LockOSThread) and then exits. On
// other systems a process outlives a launcher that dies that way.
//
// A Process is safe for concurrent use. Start starts one goroutine per
// process, which ends once the process has exited and its output has been
// copied.
package launch
