package main

import (
	"context"
	"io"

	"github.com/pmixbus/pmixbus/bench"
)

func init() {
	registerBench(&command{
		name:    "replicas",
		summary: "what three replicas of the streams and buckets cost: notify, publish and lookup on R3 against R1",
		run:     runBenchReplicas,
	})
}

func runBenchReplicas(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench replicas", "[flags]", `
Measure what replicating pmixbus's streams and buckets costs: two routed
clusters of three embedded NATS servers, one with every stream and bucket
at one replica (R1) and one at three (R3, what --replicas defaults to on a
cluster of three), two agents on different servers in each, the same
operations on both, round by round:

  - notify -> first handler of a cached event (the event cache on its path)
    and of a PMIX_EVENT_DO_NOT_CACHE one (no store: the reference);
  - publish of a fresh key and lookup of a found one (the publish/lookup
    bucket).`+"\n"+benchDescription)
	var cfg bench.ReplicasConfig
	fs.IntVar(&cfg.Rounds, "rounds", 1000, "serial operations `n` of each kind on each cluster")
	return runBenchmark(fs, args, stdout, stderr, []minFlag{{"rounds", &cfg.Rounds, 1}}, func() (*bench.Report, error) { return bench.Replicas(ctx, cfg) })
}
