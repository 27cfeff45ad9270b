package main

import (
	"context"
	"io"

	"github.com/pmixbus/pmixbus/bench"
)

func init() {
	registerBench(&command{
		name:    "stalled",
		summary: "a client's event latency alone and with readers that never read attached",
		run:     runBenchStalled,
	})
}

func runBenchStalled(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench stalled", "[flags]", `
Measure one healthy client's notify-to-handler latency on one agent (one
embedded NATS server) while the host RM notifies local events at --rate
per second, each with --payload bytes of text: --events alone, and as
many with --stalled readers attached that registered a default handler
and never read their socket again. The two alternate in --windows
windows each, fresh stalled readers in each, so that the machine's
hiccups fall on both alike. The agent writes to each client from a
goroutine of its own, so the target is that the healthy client's p99
with the stalled readers is at most twice its p99 alone.`+"\n"+benchDescription)
	var cfg bench.StalledConfig
	fs.IntVar(&cfg.Events, "events", 6000, "events `n` notified alone, and as many with stalled readers")
	fs.IntVar(&cfg.Windows, "windows", 6, "alternating windows `n` of each")
	fs.IntVar(&cfg.Rate, "rate", 1000, "events notified per second `n`")
	fs.IntVar(&cfg.Payload, "payload", 1000, "bytes `n` of text each event carries")
	fs.IntVar(&cfg.Stalled, "stalled", 3, "readers `n` that never read, in the second phase")
	return runBenchmark(fs, args, stdout, stderr, []minFlag{{"events", &cfg.Events, 10}, {"windows", &cfg.Windows, 1}, {"rate", &cfg.Rate, 1}, {"payload", &cfg.Payload, 1}, {"stalled", &cfg.Stalled, 1}}, func() (*bench.Report, error) { return bench.Stalled(ctx, cfg) })

}
