package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes. pmixbus run's own are named as sysexits.h names them; a
// rank's exit code may be any of them too (docs/launch.md, "Exit status").
const (
	exitOK          = 0
	exitFail        = 1   // the command ran and failed
	exitUsage       = 2   // bad command line
	exitNodeLost    = 68  // EX_NOHOST: a node of the job went down
	exitAgentLost   = 69  // EX_UNAVAILABLE: the local agent whose NATS server run used is gone
	exitNATSLost    = 75  // EX_TEMPFAIL: the NATS server stayed unreachable for the job TTL
	exitTimeout     = 124 // --timeout, as timeout(1)
	exitInterrupted = 130 // SIGINT: 128+2
	exitTerminated  = 143 // SIGTERM: 128+15
)

// interrupted is the cause of main's context once a signal ended it:
// which one (a command acts on SIGINT and SIGTERM differently).
type interrupted struct{ sig os.Signal }

func (e interrupted) Error() string { return e.sig.String() + " received" }

// signalOf is the signal that ended ctx, nil if none did.
func signalOf(ctx context.Context) os.Signal {
	var in interrupted
	if errors.As(context.Cause(ctx), &in) {
		return in.sig
	}
	return nil
}

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal ends ctx; later ones are the commands' (a
		// command that wants them registers for them), and do not kill
		// the process meanwhile.
		s := <-sigs
		cancel(interrupted{s})
		for range sigs {
		}
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	os.Exit(code)
}

// run dispatches args to a command and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "pmixbus: no command given")
		printUsage(stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help":
		printUsage(stdout)
		return exitOK
	case "-V", "-version", "--version":
		return runVersion(ctx, rest, stdout, stderr)
	case "help":
		if len(rest) == 0 {
			printUsage(stdout)
			return exitOK
		}
		cmd, ok := commands[rest[0]]
		if !ok {
			return unknownCommand(stderr, rest[0])
		}
		return cmd.run(ctx, []string{"-h"}, stdout, stderr)
	}
	cmd, ok := commands[name]
	if !ok {
		return unknownCommand(stderr, name)
	}
	return cmd.run(ctx, rest, stdout, stderr)
}

func unknownCommand(stderr io.Writer, name string) int {
	what := "command"
	if len(name) > 0 && name[0] == '-' {
		what = "flag"
	}
	fmt.Fprintf(stderr, "pmixbus: unknown %s %q\nRun 'pmixbus -h' for usage.\n", what, name)
	return exitUsage
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: pmixbus <command> [flags]
       pmixbus help [command]

pmixbus carries PMIx events, publish/lookup and I/O across clusters over NATS.

Commands:
`)
	for _, c := range sortedCommands() {
		if c.hidden {
			continue
		}
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'pmixbus <command> -h' for a command's flags.\n")
}
