package iof

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// DefaultHelpInterval is how often duplicate help messages are counted out:
// OpenPMIx's show_help_interval, and ORTE's "every ~5 seconds".
const DefaultHelpInterval = 5 * time.Second

// HelpHint is printed once, after the first count, as OpenPMIx prints
// `Set MCA parameter "base_help_aggregate" to 0 to see all help / error
// messages`; it names the flag that does it here.
const HelpHint = "Use --no-aggregate-help to see all help / error messages\n"

// HelpConfig configures an Aggregator.
type HelpConfig struct {
	Out      io.Writer        // where messages and counts go (the launcher's stderr)
	Interval time.Duration    // 0 means DefaultHelpInterval
	All      bool             // --no-aggregate-help: show every message, count nothing
	Now      func() time.Time // nil means time.Now
}

// Aggregator shows help messages (orte_show_help, PMIx_Log with
// PMIX_LOG_AGG) once per (file, topic) and counts the duplicates, as
// OpenPMIx's pmix_show_help does: the first message of a pair is written at
// once; later ones are counted and written as
// "N more processes have sent help message FILE / TOPIC" when Tick finds
// the interval since the last count has passed, and unconditionally at
// Close. It does not run a timer: its owner calls Tick at Next, so tests
// drive it with explicit times. Key a whole multi-cluster run on one
// Aggregator so that one failure on every rank prints once.
//
// An Aggregator is safe for concurrent use.
type Aggregator struct {
	cfg HelpConfig

	mu      sync.Mutex
	tuples  map[helpKey]*helpTuple
	order   []helpKey // first-seen order, the order counts are printed in
	last    time.Time // when counts were last written
	pending bool      // some tuple has a count to write
	hinted  bool
	closed  bool
}

type helpKey struct{ file, topic string }

type helpTuple struct{ count int }

// NewAggregator returns an Aggregator writing to cfg.Out.
func NewAggregator(cfg HelpConfig) *Aggregator {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultHelpInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Aggregator{cfg: cfg, tuples: map[helpKey]*helpTuple{}, last: cfg.Now()}
}

// Show takes one rendered help message from a process. The first of its
// (file, topic) is written now (with a newline added if it lacks one); a
// duplicate is counted, and the counts are written at once when the last
// ones are older than the interval (OpenPMIx does the same). It returns the
// writer's error.
func (a *Aggregator) Show(file, topic, text string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := helpKey{file, topic}
	t, seen := a.tuples[k]
	if !seen || a.cfg.All || a.closed {
		if !seen {
			a.tuples[k] = &helpTuple{}
			a.order = append(a.order, k)
		}
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		_, err := io.WriteString(a.cfg.Out, text)
		return err
	}
	t.count++
	a.pending = true
	if now := a.cfg.Now(); !now.Before(a.last.Add(a.cfg.Interval)) {
		return a.flushLocked(now)
	}
	return nil
}

// Next says when the owner should call Tick: the time the counted
// duplicates become due, and false when nothing is counted.
func (a *Aggregator) Next() (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last.Add(a.cfg.Interval), a.pending
}

// Tick writes the counts if the interval since the last ones has passed at
// now. It returns the writer's error.
func (a *Aggregator) Tick(now time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.pending || now.Before(a.last.Add(a.cfg.Interval)) {
		return nil
	}
	return a.flushLocked(now)
}

// Flush writes the counts now, whatever the interval. It returns the
// writer's error.
func (a *Aggregator) Flush(now time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.flushLocked(now)
}

// Close writes the counts that remain, as OpenPMIx does at termination;
// later messages are written as they come. Safe to call twice.
func (a *Aggregator) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	return a.flushLocked(a.cfg.Now())
}

func (a *Aggregator) flushLocked(now time.Time) error {
	a.last = now
	if !a.pending {
		return nil
	}
	a.pending = false
	var b strings.Builder
	for _, k := range a.order {
		t := a.tuples[k]
		if t.count == 0 {
			continue
		}
		b.WriteString(HelpCount(t.count, k.file, k.topic))
		t.count = 0
		if !a.hinted {
			b.WriteString(HelpHint)
			a.hinted = true
		}
	}
	_, err := io.WriteString(a.cfg.Out, b.String())
	return err
}

// HelpCount is OpenPMIx's count line, byte for byte:
// "%d more process%s sent help message %s / %s\n".
func HelpCount(n int, file, topic string) string {
	verb := "es have"
	if n == 1 {
		verb = " has"
	}
	return fmt.Sprintf("%d more process%s sent help message %s / %s\n", n, verb, file, topic)
}
