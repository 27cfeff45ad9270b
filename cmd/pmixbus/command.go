package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// command is one subcommand of pmixbus.
type command struct {
	name    string
	summary string // one line, for the top-level usage
	hidden  bool   // left out of the top-level usage: run by pmixbus itself

	// run runs the command with the arguments that follow its name and
	// returns the exit code. It stops when ctx ends.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands holds every registered command by name.
var commands = map[string]*command{}

// register adds c; each command's file calls it from init.
func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("pmixbus: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

func sortedCommands() []*command {
	cs := make([]*command, 0, len(commands))
	for _, c := range commands {
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	return cs
}

// newFlagSet returns the flag set of command name, whose usage shows
// synopsis (the arguments after the command name) and description above the
// flags.
func newFlagSet(name, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet("pmixbus "+name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: pmixbus %s %s\n\n%s\n", name, synopsis, strings.TrimSpace(description))
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprint(w, "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args with fs. When the command must not go on it
// returns done and the exit code: 0 after printing the usage to stdout for
// -h or --help, 2 after reporting a bad flag on stderr.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return exitOK, true
	default:
		return usageError(fs, stderr, "%v", err), true
	}
}

// usageError reports a bad command line for fs's command and returns the
// exit code for it.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, a ...any) int {
	fmt.Fprintf(stderr, "%s: %s\nRun '%s -h' for usage.\n", fs.Name(), fmt.Sprintf(format, a...), fs.Name())
	return exitUsage
}

// noArgs reports positional arguments left after the flags, for commands
// that take none.
func noArgs(fs *flag.FlagSet, stderr io.Writer) (code int, done bool) {
	if fs.NArg() == 0 {
		return 0, false
	}
	return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0)), true
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}
