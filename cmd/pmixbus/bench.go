package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/bench"
)

func init() {
	register(&command{
		name:    "bench",
		summary: "measure pmixbus (events, cache, lookup, collective, scale, stalled, launch)",
		run:     runBench,
	})
	registerBench(&command{
		name:    "events",
		summary: "notify latency and fan-out throughput, each against raw NATS",
		run:     runBenchEvents,
	})
}

// benchmarks holds the sub-benchmarks of "pmixbus bench" by name. Each is a
// command whose run gets the arguments after its name.
var benchmarks = map[string]*command{}

// registerBench adds a sub-benchmark; its file calls it from init.
func registerBench(c *command) {
	if _, dup := benchmarks[c.name]; dup {
		panic("pmixbus: benchmark registered twice: " + c.name)
	}
	benchmarks[c.name] = c
}

const benchDescription = `
Run a benchmark on embedded NATS servers and print what it measured,
ending with one line per target:

    target <name> <measured> <op> <goal> ok|MISS

Most targets are ratios: to raw NATS measured on the same servers in the
same run, or between two conditions of the same run.
A MISS still exits 0: a benchmark measures, it does not judge. It exits 1
when the benchmark could not run.`

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	names := make([]string, 0, len(benchmarks))
	for n := range benchmarks {
		names = append(names, n)
	}
	slices.Sort(names)
	var list strings.Builder
	list.WriteString("\nBenchmarks:\n")
	for _, n := range names {
		fmt.Fprintf(&list, "  %-10s %s\n", n, benchmarks[n].summary)
	}
	list.WriteString("\nRun 'pmixbus bench <benchmark> -h' for its flags.")
	fs := newFlagSet("bench", "<benchmark> [flags]", benchDescription+"\n"+list.String())
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() == 0 {
		return usageError(fs, stderr, "no benchmark given; want one of %s", strings.Join(names, ", "))
	}
	b, ok := benchmarks[fs.Arg(0)]
	if !ok {
		return usageError(fs, stderr, "unknown benchmark %q; want one of %s", fs.Arg(0), strings.Join(names, ", "))
	}
	// The benchmarks' agents run in this process: measure them with the
	// collector target pmixbus agent runs with.
	agent.ApplyGCPercent()
	return b.run(ctx, fs.Args()[1:], stdout, stderr)
}

func runBenchEvents(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench events", "[flags]", `
Measure event notification on one embedded NATS server with --agents agents
and --clients clients of one job spread over them:

  - latency: a client on one agent notifies a client on another (custom
    range), serially, against raw NATS request-reply round trips;
  - fan-out: the host RM sends global events to every client, against raw
    NATS publish to as many subscribers.`+"\n"+benchDescription)
	var cfg bench.EventsConfig
	fs.IntVar(&cfg.LatencyRounds, "latency-rounds", 2000, "serial notify-to-handler round trips `n`")
	fs.IntVar(&cfg.FanoutEvents, "fanout-events", 1000, "events `n` sent in the fan-out phase")
	fs.IntVar(&cfg.Agents, "agents", 4, "`n` agents, one per node")
	fs.IntVar(&cfg.Clients, "clients", 64, "`n` clients, spread evenly over the agents (at least 2)")
	return runBenchmark(fs, args, stdout, stderr, []minFlag{{"latency-rounds", &cfg.LatencyRounds, 1}, {"fanout-events", &cfg.FanoutEvents, 1}, {"agents", &cfg.Agents, 1}, {"clients", &cfg.Clients, 2}}, func() (*bench.Report, error) { return bench.Events(ctx, cfg) })

}

// runBenchmark parses a benchmark's flags, checks their least values, runs
// it and prints its report: what every "pmixbus bench <name>" does once
// its flags are declared.
func runBenchmark(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, mins []minFlag, run func() (*bench.Report, error)) int {
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if code, done := noArgs(fs, stderr); done {
		return code
	}
	if code, bad := checkMins(fs, stderr, mins...); bad {
		return code
	}
	r, err := run()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return exitFail
	}
	r.Print(stdout)
	return exitOK
}

// minFlag is an integer flag of a benchmark and its least value.
type minFlag struct {
	name string
	n    *int // read after the flags are parsed
	min  int
}

// checkMins reports a usage error for the first flag below its minimum.
func checkMins(fs *flag.FlagSet, stderr io.Writer, flags ...minFlag) (int, bool) {
	for _, f := range flags {
		if *f.n < f.min {
			return usageError(fs, stderr, "--%s: %d; want at least %d", f.name, *f.n, f.min), true
		}
	}
	return 0, false
}

// selfCommand is this executable run as command: how a benchmark starts
// its helper processes.
func selfCommand(command string) ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the pmixbus executable to run %s with: %w", command, err)
	}
	return []string{exe, command}, nil
}
