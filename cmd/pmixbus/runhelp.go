package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// pmixbus run's help reads as mpirun's: `--help` lists the general
// options and the categories, `--help <category>` one category's, each
// option with its aliases ("-n|--np|-c <N>") and its text wrapped beside
// them. Every option takes one dash or two, as mpirun's.

// runCategory is one category of run's options, in the order --help all
// shows them.
type runCategory struct {
	name, about string
	options     []string // primary flag names
}

var runCategories = []runCategory{
	{"general", "Defaults to this option", []string{"n", "help", "version", "timeout", "continuous", "notify-termination", "nats", "nkey"}},
	{"output", "the ranks' output", []string{"output", "tag-output", "timestamp-output", "xml", "merge-stderr-to-stdout", "output-filename", "no-aggregate-help", "iof-limit", "iof-drop"}},
	{"input", "the ranks' input", []string{"stdin"}},
	{"mapping", "where the ranks run", []string{"host", "hostfile", "map-by", "oversubscribe", "cluster", "nspace"}},
	{"launch", "how the ranks start", []string{"x", "env", "wdir", "allow-run-as-root"}},
}

// runAliases are the other names of run's flags, mpirun's and prterun's.
var runAliases = map[string][]string{
	"n":               {"np", "c"},
	"host":            {"H"},
	"hostfile":        {"machinefile", "default-hostfile"},
	"wdir":            {"wd"},
	"version":         {"V"},
	"output-filename": {"output-directory"},
}

// addAliases declares the aliases of every flag of fs that has some: the
// same value under another name.
func addAliases(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		for _, a := range runAliases[f.Name] {
			if fs.Lookup(a) == nil {
				fs.Var(f.Value, a, "alias of --"+f.Name)
			}
		}
	})
}

// printRunHelp writes run's help for category ("" is general) and reports
// whether the category exists.
func printRunHelp(w io.Writer, fs *flag.FlagSet, category string) bool {
	var cats []runCategory
	for _, c := range runCategories {
		if category == "all" || c.name == category || category == "" && c.name == "general" {
			cats = append(cats, c)
		}
	}
	if len(cats) == 0 {
		return false
	}
	fmt.Fprintf(w, "Usage: pmixbus run [OPTION]... PROGRAM [ARG]... [: [OPTION]... PROGRAM [ARG]...]...\n")
	fmt.Fprintf(w, "Start PROGRAM as a job through the pmixbus agents, as mpirun does (pmixbus %s)\n", pmixbusVersion())
	for _, c := range cats {
		if category == "all" {
			fmt.Fprintf(w, "\n%s:\n", strings.ToUpper(c.name[:1])+c.name[1:])
		} else {
			fmt.Fprintln(w)
		}
		for _, name := range c.options {
			f := fs.Lookup(name)
			if f == nil {
				if name == "help" {
					writeOption(w, "-h|--help", "[<category>]", "This help message, or a category's")
				}
				continue
			}
			arg, usage := flag.UnquoteUsage(f)
			if arg != "" {
				arg = "<" + arg + ">"
			}
			if isZeroDefault(f) {
				usage += " [default: " + f.DefValue + "]"
			}
			writeOption(w, optionNames(f.Name), arg, usage)
		}
	}
	if category == "" || category == "general" {
		var names []string
		for _, c := range runCategories {
			names = append(names, c.name)
		}
		fmt.Fprintf(w, "\nFor the other options, run 'pmixbus run --help <category>'. The categories:\n    %s, all.\n", strings.Join(names, ", "))
		fmt.Fprint(w, `
App contexts separated by ':' run together. SIGINT ends the job; a second
SIGINT, or SIGTERM, kills it and exits within seconds. Exit status, as
mpirun's: 0 when every rank exited 0, else the first failing rank's code
(128+signal); 124 after --timeout, 130 interrupted, 143 terminated; 68 a node
went down, 69 the local agent whose NATS server the run used is gone, 75 the
NATS server was lost (docs/launch.md).
`)
	}
	return true
}

// isZeroDefault reports whether f's default is worth showing.
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s":
		return false
	}
	return true
}

// optionNames is "-n|-c|--np": one dash for a one-letter name, two for a
// long one.
func optionNames(name string) string {
	dash := func(n string) string {
		if utf8.RuneCountInString(n) == 1 {
			return "-" + n
		}
		return "--" + n
	}
	names := append([]string{name}, runAliases[name]...)
	slices.SortStableFunc(names, func(a, b string) int {
		return utf8.RuneCountInString(a) - utf8.RuneCountInString(b)
	}) // one-letter names first, as mpirun's
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = dash(n)
	}
	return strings.Join(out, "|")
}

// writeOption writes one option as mpirun's help does: names and argument
// in a column of 25, the text beside them wrapped at 79 columns, on the
// next line when the names are wider.
func writeOption(w io.Writer, names, arg, text string) {
	const col, width = 25, 79
	head := names
	if arg != "" {
		head += " " + arg
	}
	r, size := utf8.DecodeRuneInString(text)
	text = string(unicode.ToUpper(r)) + text[size:]
	words := strings.Fields(text)
	var lines []string
	cur := ""
	for _, wd := range words {
		if cur != "" && col+len(cur)+1+len(wd) > width {
			lines = append(lines, cur)
			cur = wd
			continue
		}
		if cur != "" {
			cur += " "
		}
		cur += wd
	}
	lines = append(lines, cur)
	if strings.HasPrefix(names, "--") {
		head = "   " + head // one-letter options start at the margin, as mpirun's
	}
	if len(head) >= col-1 {
		fmt.Fprintf(w, "%s\n", head)
	} else {
		fmt.Fprintf(w, "%-*s", col, head)
		fmt.Fprintln(w, lines[0])
		lines = lines[1:]
	}
	for _, l := range lines {
		fmt.Fprintf(w, "%*s%s\n", col, "", l)
	}
}

// helpCategory is the category a help request names: the argument after
// -h/--help on the command line, or its "=value".
func helpCategory(args []string) string {
	for i, a := range args {
		name, val, hasVal := strings.Cut(a, "=")
		if !slices.Contains([]string{"-h", "-help", "--help"}, name) {
			continue
		}
		if hasVal {
			return val
		}
		if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			return args[i+1]
		}
		return ""
	}
	return ""
}
