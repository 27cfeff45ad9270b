package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/pmixbus/pmixbus/bench"
)

func init() {
	registerBench(&command{
		name:    "scale",
		summary: "one agent with 1k, 5k, 10k clients: memory per client, registration, one event to all",
		run:     runBenchScale,
	})
	register(&command{
		name:    bench.ScaleHelperCommand,
		summary: "a helper process of 'pmixbus bench scale'",
		hidden:  true,
		run:     runBenchScaleHelper,
	})
}

func runBenchScale(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench scale", "[flags]", `
Attach more and more clients to one agent, each registering one handler,
and at each count in --clients measure:

  - memory per client: the live heap after GC of the agent's process, of
    the NATS server's and of the clients' (the client library), each in
    a process of its own: the helpers are this executable run as
    "pmixbus `+bench.ScaleHelperCommand+`"; again once a burst of --burst
    events to every client is over;
  - registration: one more client registering a handler, --register-rounds
    times, for a code the others took and for one nobody took;
  - one event to all: the host RM notifies a local event, and the time
    until every client's handler ran, --event-rounds times.

Targets: at most 16 KiB of the agent's heap per client, registration p50
at the most clients at most twice that at the fewest, and one event to
all of the most clients within 100 ms. The agent's process needs one open
file per client, and so does the clients' process; the limit is raised
if the system lets it.`+"\n"+benchDescription)
	cfg := bench.ScaleConfig{Clients: []int{1000, 5000, 10000}}
	fs.Func("clients", "comma-separated client `counts`, increasing (default 1000,5000,10000)", countsFlag(&cfg.Clients))
	fs.IntVar(&cfg.RegisterRounds, "register-rounds", 200, "registrations `n` timed at each count")
	fs.IntVar(&cfg.EventRounds, "event-rounds", 5, "events `n` sent to all clients at each count; the median is reported")
	fs.IntVar(&cfg.Burst, "burst", 16, "events `n` then sent to all clients at once, before the memory is measured again")
	fs.StringVar(&cfg.ProfileDir, "profile-dir", "", "write heap profiles of the processes at each count to `dir` (agent-<n>.pprof, clients-<n>.pprof, nats-<n>.pprof), and CPU profiles of the agent's and the clients' while events go to every client (agent-<n>.cpu.pprof, clients-<n>.cpu.pprof)")
	return runBenchmark(fs, args, stdout, stderr, []minFlag{{"register-rounds", &cfg.RegisterRounds, 1}, {"event-rounds", &cfg.EventRounds, 1}, {"burst", &cfg.Burst, 1}}, func() (*bench.Report, error) {
		var err error
		if cfg.Helper, err = selfCommand(bench.ScaleHelperCommand); err != nil {
			return nil, err
		}
		return bench.Scale(ctx, cfg)
	})

}

func runBenchScaleHelper(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(bench.ScaleHelperCommand, "", `
A helper process of "pmixbus bench scale", which starts two: one runs the
NATS server, the other attaches the clients. It does what it is asked on
its standard input and reports on its standard output (JSON lines),
until its input ends.`)
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if code, done := noArgs(fs, stderr); done {
		return code
	}
	if err := bench.ScaleHelper(ctx, os.Stdin, stdout); err != nil {
		fmt.Fprintf(stderr, "pmixbus %s: %v\n", bench.ScaleHelperCommand, err)
		return exitFail
	}
	return exitOK
}

// countsFlag sets *counts from a flag's comma-separated, increasing,
// positive counts ("2,16,64").
func countsFlag(counts *[]int) func(string) error {
	return func(s string) error {
		var out []int
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("%q: not a positive count", f)
			}
			if len(out) > 0 && n <= out[len(out)-1] {
				return fmt.Errorf("%d after %d: counts must increase", n, out[len(out)-1])
			}
			out = append(out, n)
		}
		*counts = out
		return nil
	}
}
