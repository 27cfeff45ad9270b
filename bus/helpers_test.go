package bus

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
)

// Application event codes for tests (below PMIX_EXTERNAL_ERR_BASE).
const (
	codeA pmix.Status = pmix.ExternalErrBase - 1
	codeB pmix.Status = pmix.ExternalErrBase - 2
	codeC pmix.Status = pmix.ExternalErrBase - 3
)

var (
	selfProc   = pmix.Proc{Nspace: "A:job1", Rank: 3}
	selfOrigin = Origin{Cluster: "A", Node: "n1", Session: "s1", Proc: selfProc}
)

// tWriter sends a logger's output to t.Log.
type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) { w.t.Helper(); w.t.Log(string(p)); return len(p), nil }

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newTestRegistry returns a registry owned by selfOrigin with no default
// timeout, logging to t, closed when the test ends.
func newTestRegistry(t testing.TB, mod ...func(*Config)) *Registry {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Self = selfOrigin
	cfg.DefaultTimeout = 0
	cfg.Logger = testLogger(t)
	for _, m := range mod {
		m(&cfg)
	}
	r, err := NewRegistry(cfg)
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

// Attribute shorthands.
func name(n string) pmix.Info   { return pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String(n)) }
func flag(key string) pmix.Info { return pmix.NewInfo(key, pmix.Bool(true)) }
func before(n string) pmix.Info { return pmix.NewInfo(pmix.KeyEventHdlrBefore, pmix.String(n)) }
func after(n string) pmix.Info  { return pmix.NewInfo(pmix.KeyEventHdlrAfter, pmix.String(n)) }
func codes(cs ...pmix.Status) []pmix.Status {
	return cs
}

var (
	first     = flag(pmix.KeyEventHdlrFirst)
	last      = flag(pmix.KeyEventHdlrLast)
	firstInCt = flag(pmix.KeyEventHdlrFirstInCategory)
	lastInCt  = flag(pmix.KeyEventHdlrLastInCategory)
	prepend   = flag(pmix.KeyEventHdlrPrepend)
	appendAt  = flag(pmix.KeyEventHdlrAppend)
)

// completeWith returns a handler that completes within its call.
func completeWith(status pmix.Status, results ...pmix.Info) Handler {
	return func(_ *Call, done Done) { done(status, results) }
}

var noAction = completeWith(pmix.EventNoActionTaken)

// mustRegister registers a handler named n (unnamed when n is "").
func mustRegister(t testing.TB, r *Registry, cs []pmix.Status, n string, h Handler, attrs ...pmix.Info) ID {
	t.Helper()
	if n != "" {
		attrs = append([]pmix.Info{name(n)}, attrs...)
	}
	if h == nil {
		h = noAction
	}
	id, err := r.Register(cs, attrs, h)
	if err != nil {
		t.Fatalf("Register(%v, %q, %v): %v", cs, n, pmix.FormatInfos(attrs), err)
	}
	return id
}

// run runs a chain for ev and fails the test if it does not end in time.
func run(t testing.TB, r *Registry, ev Event) Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o, err := r.Run(ctx, ev)
	if err != nil && !errors.Is(err, ErrClosed) {
		t.Fatalf("Run(%v): %v", ev.Code, err)
	}
	return o
}

// ranNames lists the handlers of an outcome by name, "#id" when unnamed.
func ranNames(o Outcome) []string {
	out := make([]string, 0, len(o.Ran))
	for _, r := range o.Ran {
		if r.Name == "" {
			out = append(out, "#"+strconv.FormatUint(uint64(r.ID), 10))
		} else {
			out = append(out, r.Name)
		}
	}
	return out
}

func wantStatus(t testing.TB, err error, want pmix.Status) {
	t.Helper()
	switch {
	case want == pmix.Success && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != pmix.Success && err == nil:
		t.Fatalf("no error, want %v", want)
	case want != pmix.Success && !errors.Is(err, want):
		t.Fatalf("error %v, want status %v", err, want)
	}
	var pe *pmix.Error
	if err != nil && !errors.As(err, &pe) {
		t.Fatalf("error %T %v is not a *pmix.Error", err, err)
	}
}

// fakeClock is a manual Clock: timers fire only in Advance, on the caller's
// goroutine.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	i := slices.Index(t.c.timers, t)
	if i < 0 {
		return false
	}
	t.c.timers = slices.Delete(t.c.timers, i, i+1)
	t.stopped = true
	return true
}

// Advance moves the clock on and fires the timers that fall due, in order.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool {
		if !t.at.After(c.now) {
			due = append(due, t)
			return true
		}
		return false
	})
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *fakeTimer) int { return a.at.Compare(b.at) })
	for _, t := range due {
		t.f()
	}
}

// Pending returns the number of armed timers.
func (c *fakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
