package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and failed
	exitUsage = 2 // bad command line
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
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
