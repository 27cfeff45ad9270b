package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/pmixbus/pmixbus/internal/demo"
)

func init() {
	register(&command{
		name:    "demo",
		summary: "run two clusters, agents and client processes; trace events at every range",
		run:     runDemo,
	})
	register(&command{
		name:    "demo-client",
		summary: "one client process of 'pmixbus demo'",
		hidden:  true,
		run:     runDemoClient,
	})
}

const demoDescription = `
Show pmixbus at work, in one command. It starts two PMIx clusters, east and
west, each with its own embedded NATS server and JetStream domain, joined by
leaf nodes through a hub; two agents per cluster; and one client process
per proc of three jobs, launched the way a host RM launches them: with the
environment its agent issued. The clients register ordered event handlers
(FIRST, LAST, BEFORE/AFTER, PREPEND/APPEND, default handlers, source-range
filters, environment- and job-level handlers, one that resolves the event,
others that vote on termination).

It then sends events at every range - local, namespace, session, custom
across clusters, global, rm, an environment event, and a proc_local one
from inside a client - and prints, for each, which client's handlers ran,
where, in which order and with what statuses and results.

What it expects is derived from the declared jobs, handlers and events: the
range decides which clients an event reaches, and the bus engine, run
in-process on each client's declared registrations, decides the chain. It
exits 0 when the trace matches, 1 saying what differed. Everything it
started - processes, servers, temp files - is gone when it exits, also on
failure or interrupt.`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", "[flags]", demoDescription)
	logLevel := fs.String("log-level", "off", "log `level` of the servers and agents, to stderr: off, error, warn, info, debug or trace")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this `duration`")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if code, done := noArgs(fs, stderr); done {
		return code
	}
	level, ok := parseLogLevel(*logLevel)
	if !ok {
		return usageError(fs, stderr, "--log-level: unknown level %q; want off, error, warn, info, debug or trace", *logLevel)
	}
	if *timeout <= 0 {
		return usageError(fs, stderr, "--timeout: %v; want a positive duration", *timeout)
	}
	var log *slog.Logger
	if level != nil {
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: *level}))
	}
	// The client processes are this executable, as "pmixbus demo-client".
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "pmixbus demo: finding the pmixbus executable to launch clients with: %v\n", err)
		return exitFail
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	err = demo.Run(ctx, demo.Config{Out: stdout, Logger: log, Client: []string{exe, "demo-client"}})
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, demo.ErrTraceDiffers):
		fmt.Fprintf(stderr, "pmixbus demo: %v\n", err)
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "pmixbus demo: stopped: %v\n", err)
	default:
		fmt.Fprintf(stderr, "pmixbus demo: %v\n", err)
	}
	return exitFail
}

func runDemoClient(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo-client", "", `
One client process of "pmixbus demo", which starts it the way a host RM
would: with the environment its agent issued (PMIX_NAMESPACE, PMIX_RANK,
PMIXBUS_AGENT, PMIXBUS_CREDENTIAL) and `+demo.RoleEnv+` naming the handlers
to register. It prints "ready" once registered, runs the notify commands it
reads on stdin, reports every handler it runs on stdout (JSON lines), and
finalizes at the end of its input.`)
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if code, done := noArgs(fs, stderr); done {
		return code
	}
	role := os.Getenv(demo.RoleEnv)
	if !demo.IsRole(role) {
		return usageError(fs, stderr, "%s=%q: not a demo role", demo.RoleEnv, role)
	}
	if err := demo.RunClient(ctx, role, os.Stdin, stdout); err != nil {
		fmt.Fprintf(stderr, "pmixbus demo-client: %v\n", err)
		return exitFail
	}
	return exitOK
}
