package main

import (
	"context"
	"io"

	"github.com/pmixbus/pmixbus/bench"
)

func init() {
	registerBench(&command{
		name:    "lookup",
		summary: "publish/lookup: lookup, publish and PMIX_WAIT wake-up against raw JetStream KV",
		run:     runBenchLookup,
	})
}

func runBenchLookup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench lookup", "[flags]", `
Measure publish/lookup on one embedded NATS server, with two agents and a
client on each (a publisher and a looker), against raw JetStream KV on the
same bucket, interleaved round by round:

  - a lookup that finds its key, against a KV Get;
  - a publish of a fresh key, against a KV Create;
  - the wake-up of a PMIX_WAIT lookup, from the start of the publish that
    satisfies it to the lookup's return, against the delivery of a KV
    Create to a watch made beforehand.`+"\n"+benchDescription)
	var cfg bench.LookupConfig
	fs.IntVar(&cfg.Rounds, "rounds", 2000, "lookups `n`, and publishes, each against as many raw operations")
	fs.IntVar(&cfg.WaitRounds, "wait-rounds", 200, "PMIX_WAIT wake-ups `n`, against as many raw watch deliveries")
	return runBenchmark(fs, args, stdout, stderr, []minFlag{{"rounds", &cfg.Rounds, 1}, {"wait-rounds", &cfg.WaitRounds, 1}}, func() (*bench.Report, error) { return bench.Lookup(ctx, cfg) })

}
