package bench

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Target is one goal a benchmark checks.
type Target struct {
	Name     string
	Measured float64
	Op       string // "<=" or ">="
	Goal     float64
}

// OK reports whether the measurement meets the goal.
func (t Target) OK() bool {
	if t.Op == "<=" {
		return t.Measured <= t.Goal
	}
	return t.Measured >= t.Goal
}

// String is the target line: "target <name> <measured> <op> <goal> ok|MISS".
func (t Target) String() string {
	verdict := "ok"
	if !t.OK() {
		verdict = "MISS"
	}
	return fmt.Sprintf("target %s %.3f %s %.3f %s", t.Name, t.Measured, t.Op, t.Goal, verdict)
}

// Report is the result of one benchmark run.
type Report struct {
	Lines   []string // what was measured, for people
	Targets []Target
}

func (r *Report) addf(format string, args ...any) {
	r.Lines = append(r.Lines, fmt.Sprintf(format, args...))
}

// Print writes the lines, then the target lines.
func (r *Report) Print(w io.Writer) {
	for _, l := range r.Lines {
		fmt.Fprintln(w, l)
	}
	for _, t := range r.Targets {
		fmt.Fprintln(w, t)
	}
}

// OK reports whether every target was met.
func (r *Report) OK() bool {
	for _, t := range r.Targets {
		if !t.OK() {
			return false
		}
	}
	return true
}

// percentile returns the p-th percentile (0..100) of ds, sorting ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(float64(len(ds)-1) * p / 100)
	return ds[i]
}
