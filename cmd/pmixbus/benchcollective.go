package main

import (
	"context"
	"io"

	"github.com/pmixbus/pmixbus/bench"
)

func init() {
	registerBench(&command{
		name:    "collective",
		summary: "connect and fence: messages per connect, time against a raw NATS barrier, fence with data",
		run:     runBenchCollective,
	})
}

func runBenchCollective(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench collective", "[flags]", `
Measure the collective engine on two embedded clusters, A and B, linked by
a leaf node, with --agents agents (half in each) and --procs in-process
clients (jobA on A, jobB on B):

  - messages on pmix.coll.> per connect of every process (goal: at most
    2 per agent + 2, whatever the number of processes);
  - a connect and a fence of every process, each against a raw NATS
    barrier over one connection per agent (each publishes once, one
    collector releases all), interleaved round by round;
  - the fence against a raw request-reply across the leaf link times
    the engine's 2 levels (the direct exchange and the release check),
    and one more fence traced: when its contributions, its release and
    the clients' returns came;
  - a fence with PMIX_COLLECT_DATA of --data-procs processes that each put
    --data-size bytes: its time, and its bytes on pmix.coll.>.

With --c-ranks, then a fence of C ranks: one job of that many processes
of bench/peer/pmixops.c, loading --pmix-lib's libpmix.so.2, launched over
--c-agents agents of one cluster (default --agents; one NATS server),
each doing --c-fences fences without data back to back; the slowest
rank's p50 against a raw NATS request-reply between two connections to
the same server, per level (1: a direct exchange among the agents), and
each fence cycle split at the contributions and the release on
pmix.coll.>. --c-only skips the in-process clients.`+"\n"+benchDescription)
	var cfg bench.CollectiveConfig
	fs.IntVar(&cfg.Procs, "procs", 1024, "processes `n` that connect and fence")
	fs.IntVar(&cfg.Agents, "agents", 8, "agents `n`, half in each cluster")
	fs.IntVar(&cfg.Rounds, "rounds", 5, "connects and fences `n` measured; the median is reported")
	fs.IntVar(&cfg.DataProcs, "data-procs", 64, "processes `n` in the fence with PMIX_COLLECT_DATA")
	fs.IntVar(&cfg.DataSize, "data-size", 1024, "bytes `n` each of them puts")
	fs.StringVar(&cfg.ProfileDir, "profile-dir", "", "write CPU profiles of the process over the measured connects and fences to `dir` (connect.cpu.pprof, fence.cpu.pprof; fencec.cpu.pprof over the C ranks' measured runs)")
	fs.IntVar(&cfg.CRanks, "c-ranks", 0, "C ranks `n` in the fence of C ranks (0: none; 1024 for issue 31's goal)")
	fs.IntVar(&cfg.CAgents, "c-agents", 0, "agents `n` the C ranks run on (default: --agents; 1: the node's barrier alone, no target)")
	fs.IntVar(&cfg.CFences, "c-fences", 200, "fences `n` each C rank times")
	fs.BoolVar(&cfg.COnly, "c-only", false, "only the fence of C ranks, no in-process clients")
	fs.StringVar(&cfg.LibDir, "pmix-lib", defaultPMIxLib(), "`dir` of pmixbus's libpmix.so.2 (default: lib/ beside the pmixbus binary)")
	fs.StringVar(&cfg.Include, "pmix-include", "", "`dir` of PMIx headers where OpenPMIx's are not installed (pmixbus's cabi/include)")
	return runBenchmark(fs, args, stdout, stderr, []minFlag{{"procs", &cfg.Procs, 2}, {"agents", &cfg.Agents, 2}, {"rounds", &cfg.Rounds, 1}, {"data-procs", &cfg.DataProcs, 1}, {"data-size", &cfg.DataSize, 1}, {"c-fences", &cfg.CFences, 1}}, func() (*bench.Report, error) { return bench.Collective(ctx, cfg) })
}
