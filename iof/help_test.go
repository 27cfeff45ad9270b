package iof

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is the Aggregator's clock in tests: it moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

func newTestAggregator(all bool) (*Aggregator, *bytes.Buffer, *fakeClock) {
	var out bytes.Buffer
	clock := &fakeClock{now: when}
	return NewAggregator(HelpConfig{Out: &out, All: all, Now: clock.Now}), &out, clock
}

const helpText = "--------------------------------------------------------------------------\n" +
	"MPI_INIT has failed because at least one MPI process is unreachable.\n" +
	"--------------------------------------------------------------------------\n"

func show(t *testing.T, a *Aggregator, file, topic, text string) {
	t.Helper()
	if err := a.Show(file, topic, text); err != nil {
		t.Fatal(err)
	}
}

func take(out *bytes.Buffer) string {
	s := out.String()
	out.Reset()
	return s
}

// 16 ranks in two clusters fail the same way: one message, one count.
func TestAggregatorAcrossClusters(t *testing.T) {
	a, out, clock := newTestAggregator(false)
	var wg sync.WaitGroup
	for cluster := range 2 {
		for rank := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				text := strings.Replace(helpText, "process", fmt.Sprintf("process (%c rank %d)", 'A'+cluster, rank), 1)
				if err := a.Show("help-mpi-runtime.txt", "mpi_init:startup:pml-add-procs-fail", text); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	first := take(out)
	if strings.Count(first, "MPI_INIT has failed") != 1 {
		t.Fatalf("want exactly one message, got:\n%s", first)
	}
	clock.Advance(time.Second)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	want := "15 more processes have sent help message help-mpi-runtime.txt / mpi_init:startup:pml-add-procs-fail\n" + HelpHint
	if got := take(out); got != want {
		t.Fatalf("at Close got %q; want %q", got, want)
	}
	if err := a.Close(); err != nil || out.Len() != 0 {
		t.Fatalf("second Close wrote %q, %v", out, err)
	}
}

func TestAggregatorInterval(t *testing.T) {
	a, out, clock := newTestAggregator(false)
	steps := []struct {
		name string
		do   func() error
		want string
	}{
		{"first is shown at once", func() error { return a.Show("f.txt", "t", "help one") }, "help one\n"},
		{"a duplicate is counted", func() error { return a.Show("f.txt", "t", "help one") }, ""},
		{"other topic shown at once", func() error { return a.Show("f.txt", "u", helpText) }, helpText},
		{"a duplicate of it is counted", func() error { return a.Show("f.txt", "u", helpText) }, ""},
		{"and another", func() error { return a.Show("f.txt", "t", "help one") }, ""},
		{"tick before the interval is quiet", func() error { return a.Tick(clock.Advance(4 * time.Second)) }, ""},
		{"tick at the interval counts, in first-seen order, hint once", func() error { return a.Tick(clock.Advance(time.Second)) },
			"2 more processes have sent help message f.txt / t\n" + HelpHint + "1 more process has sent help message f.txt / u\n"},
		{"nothing pending: tick is quiet", func() error { return a.Tick(clock.Advance(time.Hour)) }, ""},
		{"a duplicate long after the last count is counted out at once", func() error { return a.Show("f.txt", "t", "x") },
			"1 more process has sent help message f.txt / t\n"},
		{"a duplicate soon after is held", func() error { clock.Advance(time.Second); return a.Show("f.txt", "u", "y") }, ""},
		{"Flush writes whatever the interval, no second hint", func() error { return a.Flush(clock.Now()) },
			"1 more process has sent help message f.txt / u\n"},
		{"Close with nothing pending is quiet", a.Close, ""},
		{"after Close messages are shown as they come", func() error { return a.Show("f.txt", "t", "late") }, "late\n"},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := take(out); got != s.want {
			t.Fatalf("%s: wrote %q; want %q", s.name, got, s.want)
		}
	}
}

func TestAggregatorNext(t *testing.T) {
	a, _, clock := newTestAggregator(false)
	if _, due := a.Next(); due {
		t.Fatal("due with nothing counted")
	}
	show(t, a, "f", "t", "m")
	show(t, a, "f", "t", "m")
	at, due := a.Next()
	if !due || !at.Equal(when.Add(DefaultHelpInterval)) {
		t.Fatalf("Next = %v, %v; want %v, true", at, due, when.Add(DefaultHelpInterval))
	}
	if err := a.Tick(clock.Advance(DefaultHelpInterval)); err != nil {
		t.Fatal(err)
	}
	if _, due := a.Next(); due {
		t.Fatal("due after the counts were written")
	}
}

func TestAggregatorShowAll(t *testing.T) {
	a, out, _ := newTestAggregator(true)
	for range 3 {
		show(t, a, "f", "t", "m\n")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "m\nm\nm\n" {
		t.Fatalf("got %q; want every message and no count", got)
	}
}

func TestHelpCount(t *testing.T) {
	// OpenPMIx: "%d more process%s sent help message %s / %s\n".
	tests := []struct {
		n    int
		want string
	}{
		{1, "1 more process has sent help message help-prted.txt / timedout\n"},
		{3, "3 more processes have sent help message help-prted.txt / timedout\n"},
	}
	for _, tt := range tests {
		if got := HelpCount(tt.n, "help-prted.txt", "timedout"); got != tt.want {
			t.Errorf("HelpCount(%d) = %q; want %q", tt.n, got, tt.want)
		}
	}
}
