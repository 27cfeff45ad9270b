package main

import (
	"context"
	"io"

	"github.com/pmixbus/pmixbus/bench"
)

func init() {
	registerBench(&command{
		name:    "iof",
		summary: "job output: 16 ranks' lines against raw JetStream publishes; one line's latency against a NATS round trip",
		run:     runBenchIOF,
	})
}

func runBenchIOF(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench iof", "[flags]", `
Measure job output on one embedded NATS server with two agents, a1 and a2,
whose output stream is on files. Every rank is this executable run as
"pmixbus `+bench.LaunchRankCommand+`":

  - throughput: --ranks ranks write --bytes in all, 100-byte lines through
    a 64 KiB stdio buffer, as a program writing to a pipe does; the rate
    is the bytes pmixbus run's stdout receives from the first to the last,
    against raw JetStream async publishes of the same bytes in 8 KiB
    messages to a file stream on the same server, until every ack (goal:
    at least 0.5 of it); --rounds rounds, the median ratio reported;
  - latency: one rank writes --lines lines, one every 5 ms, each holding
    the time it was written; the delay until pmixbus run's stdout has it,
    against a raw NATS request/reply round trip (goal: median at most 2x).`+"\n"+benchDescription)
	var cfg bench.IOFConfig
	fs.IntVar(&cfg.Ranks, "ranks", 16, "ranks `n` writing")
	fs.Int64Var(&cfg.Bytes, "bytes", 64<<20, "`bytes` written by all ranks together")
	fs.IntVar(&cfg.Rounds, "rounds", 3, "throughput rounds `n`")
	fs.IntVar(&cfg.Lines, "lines", 200, "lines `n` whose latency is measured")
	return runBenchmark(fs, args, stdout, stderr, []minFlag{{"ranks", &cfg.Ranks, 1}, {"rounds", &cfg.Rounds, 1}, {"lines", &cfg.Lines, 1}}, func() (*bench.Report, error) {
		var err error
		if cfg.Rank, err = selfCommand(bench.LaunchRankCommand); err != nil {
			return nil, err
		}
		return bench.IOF(ctx, cfg)
	})
}
