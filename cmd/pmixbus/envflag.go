package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
)

// envBindings maps flag names to the environment variables that stand in
// for them: a flag given on the command line wins, otherwise a set variable
// does, otherwise the flag's default.
type envBindings map[string]string

// apply sets every flag of fs that the command line left alone from its
// variable, when that variable is set and not empty. It is called after
// fs.Parse. The error names the variable and says what was wrong with it.
func (b envBindings) apply(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, name := range slices.Sorted(maps.Keys(b)) {
		if given[name] {
			continue
		}
		v := os.Getenv(b[name])
		if v == "" {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("%s=%q: invalid value for --%s: %v", b[name], v, name, err)
		}
	}
	return nil
}

// given reports whether flag name was set on the command line or through
// its variable (after apply).
func given(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// hostname is the default node name.
func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}
