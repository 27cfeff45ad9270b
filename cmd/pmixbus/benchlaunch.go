package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/pmixbus/pmixbus/bench"
	"github.com/pmixbus/pmixbus/launch/liveness"
)

func init() {
	registerBench(&command{
		name:    "launch",
		summary: "launch N ranks against N fork/execs; kill -9 of a rank and an agent killed, to the handlers",
		run:     runBenchLaunch,
	})
	register(&command{
		name:    bench.LaunchRankCommand,
		summary: "a rank of 'pmixbus bench launch'",
		hidden:  true,
		run:     runBenchLaunchRank,
	})
}

func runBenchLaunch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench launch", "[flags]", `
Measure the launcher and the lifecycle events on one embedded NATS server
with --agents agents, a1 to a4. Unless said otherwise every rank is this
executable run as "pmixbus `+bench.LaunchRankCommand+`":

  - launch: the time to launch --sizes ranks spread over the agents
    (pmixbus run's launch.Launch) and see every one end (Init, Finalize,
    exit), against the floor: as many processes of the same program,
    exiting at once, started from this process with os/exec and waited
    for; --rounds of each, interleaved, medians compared (goal: at most 2x
    the floor at 16 ranks, or at the largest size when 16 is not among
    them);
  - launch vs mpirun: an MPI program (MPI_Init, a reduce, MPI_Finalize;
    built with mpicc against Open MPI) at --peer-sizes ranks, from launch
    to the last exit, under mpirun on this node and under pmixbus over 1
    agent and over all, the ranks loading --pmix-lib's libpmix.so.2,
    --rounds of each interleaved (goal: 0.8x mpirun's each); skipped,
    saying so, without mpirun, mpicc or the library;
  - kill -9: a job with --continuous whose rank 0 on a1 prints when its
    handler sees each rank's termination; --kills ranks on a2 are sent
    SIGKILL one by one (after one unmeasured), and each time is from the
    signal to rank 0's handler seeing PMIX_ERR_PROC_ABORTED_BY_SIG (goal:
    median at most 20 ms);
  - node down: a2 is killed abruptly --node-downs times (its NATS
    connection closed, no Shutdown: its liveness key expires) and each
    time is until a handler of a client on a1 sees PMIX_EVENT_NODE_DOWN
    (goal: at most twice --ttl);
  - link cut: a job with a rank on a1 and one on the last agent, whose
    link to NATS (a TCP proxy here) then stops passing bytes without
    closing, as a switch port that goes down; the time until the run
    reports the node lost, --cuts times (goal: at most the job TTL,
    3 s, + 1 s), and that the agent, back, ends the rank it kept.`+"\n"+benchDescription)
	cfg := bench.LaunchConfig{Sizes: []int{2, 16, 64}}
	fs.Func("sizes", "comma-separated rank `counts`, increasing (default 2,16,64)", countsFlag(&cfg.Sizes))
	fs.IntVar(&cfg.Rounds, "rounds", 5, "launches `n` of each size, and as many floors; the medians are reported")
	fs.IntVar(&cfg.Kills, "kills", 10, "ranks `n` killed with SIGKILL, one at a time, after one unmeasured")
	fs.IntVar(&cfg.NodeDowns, "node-downs", 3, "times `n` an agent is killed")
	fs.DurationVar(&cfg.LivenessInterval, "interval", liveness.DefaultInterval, "the agents' liveness refresh `interval`")
	fs.DurationVar(&cfg.LivenessTTL, "ttl", liveness.DefaultTTL, "the agents' liveness `ttl` (whole seconds)")
	fs.IntVar(&cfg.Agents, "agents", 4, "agents `n` of the cluster, 2 to 4")
	fs.Func("peer-sizes", "comma-separated rank `counts` of the MPI launch against mpirun (default 16,64)", countsFlag(&cfg.PeerSizes))
	fs.StringVar(&cfg.LibDir, "pmix-lib", defaultPMIxLib(), "`dir` of pmixbus's libpmix.so.2 (default: lib/ beside the pmixbus binary)")
	fs.StringVar(&cfg.Include, "pmix-include", "", "`dir` of PMIx headers where OpenPMIx's are not installed (pmixbus's cabi/include)")
	fs.StringVar(&cfg.Mpirun, "mpirun", "", "the peer's `launcher` (default: mpirun on PATH)")
	fs.IntVar(&cfg.Cuts, "cuts", 3, "times `n` the last agent's link is cut")
	return runBenchmark(fs, args, stdout, stderr, []minFlag{{"rounds", &cfg.Rounds, 1}, {"kills", &cfg.Kills, 1}, {"node-downs", &cfg.NodeDowns, 1}, {"cuts", &cfg.Cuts, 1}, {"agents", &cfg.Agents, 2}}, func() (*bench.Report, error) {
		var err error
		if cfg.Rank, err = selfCommand(bench.LaunchRankCommand); err != nil {
			return nil, err
		}
		return bench.Launch(ctx, cfg)
	})
}

func runBenchLaunchRank(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(bench.LaunchRankCommand, "[plain|watch|write N|lines N]", `
A rank of "pmixbus bench launch" and "pmixbus bench iof", started by an
agent: Init, Finalize, exit; "plain" exits at once (the floor's process);
"watch" waits until SIGTERM, rank 0 printing every termination event its
handler sees; "write N" writes N bytes of 100-byte lines and exits;
"lines N" writes N lines holding the time each was written, 5 ms apart.`)
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if err := bench.LaunchRank(ctx, strings.Join(fs.Args(), " "), stdout); err != nil {
		fmt.Fprintf(stderr, "pmixbus %s: %v\n", bench.LaunchRankCommand, err)
		return exitFail
	}
	return exitOK
}
