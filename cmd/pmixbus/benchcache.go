package main

import (
	"context"
	"io"

	"github.com/pmixbus/pmixbus/bench"
)

func init() {
	registerBench(&command{
		name:    "cache",
		summary: "event cache: notify throughput with caching against raw JetStream, replay of a full cache",
		run:     runBenchCache,
	})
}

func runBenchCache(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench cache", "[flags]", `
Measure the JetStream event cache on one embedded NATS server and one agent:

  - throughput: the host RM notifies --events environment events, each
    captured by the cache, until all are stored; against raw JetStream async
    publish of as many messages, until all are acknowledged;
  - replay: a new registration receives --replay cached events; the time from
    its registration call to the last replayed invocation, --rounds times.`+"\n"+benchDescription)
	var cfg bench.CacheConfig
	fs.IntVar(&cfg.Events, "events", 20000, "events `n` sent in the throughput phase")
	fs.IntVar(&cfg.Replay, "replay", 512, "cached events `n` replayed (the cache size)")
	fs.IntVar(&cfg.Rounds, "rounds", 5, "replay measurements `n`; the median is reported")
	return runBenchmark(fs, args, stdout, stderr, []minFlag{{"events", &cfg.Events, 1}, {"replay", &cfg.Replay, 1}, {"rounds", &cfg.Rounds, 1}}, func() (*bench.Report, error) { return bench.Cache(ctx, cfg) })

}
