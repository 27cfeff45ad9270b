package agent

import (
	"os"
	"runtime/debug"
)

// GCPercent is the garbage collector's target (GOGC) a process running
// agents takes unless its environment sets GOGC. An agent's live heap is
// small (its clients' registrations, a few KiB each) while every delivery
// allocates its chain, frames and outcome, so at Go's default of 100 it
// collects every few thousand deliveries and the collector takes about a
// third of its CPU under fan-out. At 400 the heap peaks at about five times
// the live heap (some 400 MiB with 10k clients attached) and fan-out
// delivers about half as much again (docs/PERFORMANCE.md, *The
// collector's target*).
const GCPercent = 400

// ApplyGCPercent sets the process's collector target to GCPercent unless
// GOGC is set in the environment, and reports whether it did. It is for
// main packages (pmixbus agent, pmixbus bench): the collector is the
// whole process's, which a library must not decide for its host.
func ApplyGCPercent() bool {
	if _, ok := os.LookupEnv("GOGC"); ok {
		return false
	}
	debug.SetGCPercent(GCPercent)
	return true
}
