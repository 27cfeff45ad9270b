package main

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/pmixbus/pmixbus/bench"
)

func init() {
	registerBench(&command{
		name:    "peer",
		summary: "the same C programs under mpirun with OpenPMIx and under pmixbus: fence, MPI_Init, output, notify",
		run:     runBenchPeer,
	})
}

func runBenchPeer(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench peer", "[flags]", `
Compile small C programs against the installed OpenPMIx headers and run
each under mpirun (Open MPI with Debian's OpenPMIx) and under pmixbus (one
agent on an embedded NATS server, the ranks loading --pmix-lib's
libpmix.so.2), alternating --rounds times, and compare the medians:

  - fence: PMIx_Fence without data at --sizes ranks (goal: 0.5x mpirun's);
  - the first fence with PMIX_COLLECT_DATA at the smallest size (1.0x);
  - MPI_Init of 2 and of --launch ranks, and the launch of --launch ranks to
    their exit, of an Open MPI program built with mpicc (0.8x each);
  - MPI_Comm_spawn of 4 children from one rank, to the intercommunicator
    (1.0x; pmixbus's side goes through PMIx_Spawn and the launcher);
  - one output line, rank to the launcher's stdout (1.0x);
  - a rank's footprint after Init and a fence: peak RSS (1.0x OpenPMIx's),
    threads (at most 2), context switches of its library's threads while
    idle (at most 2 per 10 s);
  - notify: a LOCAL-range event and its answer from the handler, 2 ranks,
    OpenPMIx with TCP_NODELAY forced on its loopback sockets (1.0x; stock
    OpenPMIx's round trip is printed too, and pmixbus's with
    PMIX_EVENT_DO_NOT_CACHE, no store on its path);
  - fan-out: --fanout-events LOCAL-range events from one rank to the other
    --fanout-ranks minus one, deliveries per second (at least 3x OpenPMIx's,
    with TCP_NODELAY);
  - group construct: PMIx_Group_construct of --group-ranks ranks with a
    context id on --group-agents agents, --groups times a run (1.0x; Open
    MPI 4.1's mpirun has no group operations, which the report says).

Where mpirun or OpenPMIx's headers are not installed the peer side is
skipped, saying so (apt-get install openmpi-bin libopenmpi-dev libpmix-dev),
and pmixbus's times are printed alone. --only runs some of the
measurements: fence, mpi, footprint, output, notify, fanout, group.`+"\n"+benchDescription)
	cfg := bench.PeerConfig{Sizes: []int{4, 16, 64}}
	fs.StringVar(&cfg.LibDir, "pmix-lib", defaultPMIxLib(), "`dir` of pmixbus's libpmix.so.2 (default: lib/ beside the pmixbus binary)")
	fs.StringVar(&cfg.Include, "pmix-include", "", "`dir` of PMIx headers where OpenPMIx's are not installed (pmixbus's cabi/include)")
	fs.StringVar(&cfg.Mpirun, "mpirun", "", "the peer's `launcher` (default: mpirun on PATH)")
	fs.Func("sizes", "comma-separated rank `counts` of the fence, increasing (default 4,16,64)", countsFlag(&cfg.Sizes))
	fs.IntVar(&cfg.Fences, "fences", 200, "fences `n` timed in each run")
	fs.IntVar(&cfg.Notifies, "notifies", 500, "notify round trips `n` timed in each run")
	fs.IntVar(&cfg.Lines, "lines", 200, "output lines `n` timed in each run")
	fs.IntVar(&cfg.Launch, "launch", 16, "ranks `n` of the MPI launch")
	fs.DurationVar(&cfg.Idle, "idle", 2*time.Second, "how long an initialised rank sleeps while its context switches are counted")
	fs.IntVar(&cfg.Rounds, "rounds", 3, "runs `n` of each measurement on each side")
	fs.IntVar(&cfg.FanoutRanks, "fanout-ranks", 64, "ranks `n` of the fan-out, one sending")
	fs.IntVar(&cfg.FanoutEvents, "fanout-events", 1000, "events `n` of each fan-out run")
	fs.IntVar(&cfg.GroupRanks, "group-ranks", 64, "ranks `n` of the group construct")
	fs.IntVar(&cfg.GroupAgents, "group-agents", 4, "agents `n` the group construct's ranks spread over")
	fs.IntVar(&cfg.Groups, "groups", 20, "group constructs `n` timed in each run")
	fs.StringVar(&cfg.ProfileDir, "profile-dir", "", "write a CPU profile of the process over the fan-out measurement to `dir` (fanout.cpu.pprof)")
	fs.Func("only", "comma-separated `names` of the measurements to run (default: all)", func(v string) error {
		cfg.Only = strings.Split(v, ",")
		return nil
	})
	return runBenchmark(fs, args, stdout, stderr, []minFlag{{"fences", &cfg.Fences, 1}, {"notifies", &cfg.Notifies, 1}, {"lines", &cfg.Lines, 1}, {"launch", &cfg.Launch, 1}, {"rounds", &cfg.Rounds, 1},
		{"fanout-ranks", &cfg.FanoutRanks, 2}, {"fanout-events", &cfg.FanoutEvents, 1}, {"group-ranks", &cfg.GroupRanks, 1}, {"group-agents", &cfg.GroupAgents, 1}, {"groups", &cfg.Groups, 1}}, func() (*bench.Report, error) {
		return bench.Peer(ctx, cfg)
	})
}
