package bus

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
)

// startRun runs a prepared event through r with Start and Run, and returns
// the outcome, or false when Start found nothing to run.
func startRun(t *testing.T, r *Registry, p *Prepared) (Outcome, bool) {
	t.Helper()
	c := r.Start(p)
	if c == nil {
		return Outcome{}, false
	}
	got := make(chan Outcome, 1)
	c.Run(func(o Outcome) { got <- o })
	select {
	case o := <-got:
		return o, true
	case <-time.After(10 * time.Second):
		t.Fatal("the chain never ended")
	}
	return Outcome{}, false
}

func resolvedIn(info []pmix.Info) (seen, resolved bool) {
	for _, in := range info {
		if in.Key == pmix.KeyEventResolved {
			seen, resolved = true, flagSet(in)
		}
	}
	return seen, resolved
}

// TestPreparedIsShared: one prepared event runs in several registries; the
// resolved flag one registry's handler sets reaches the handlers after it in
// that chain only, never another registry's chain, and the prepared info is
// never written.
func TestPreparedIsShared(t *testing.T) {
	info := []pmix.Info{pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String("shared")), pmix.NewInfo(pmix.KeyEventResolved, pmix.Bool(true))}
	p := Prepare(Event{Code: codeA, Info: info})
	if seen, resolved := resolvedIn(p.info); !seen || resolved || len(p.info) != 2 {
		t.Fatalf("prepared info %s: the event's own resolved entry must be replaced by false", pmix.FormatInfos(p.info))
	}
	before := slices.Clone(p.info)

	var mu sync.Mutex
	saw := map[string]bool{} // handler name -> resolved flag it saw
	note := func(n string) Handler {
		return func(c *Call, done Done) {
			_, res := resolvedIn(c.Info)
			mu.Lock()
			saw[n] = res
			mu.Unlock()
			done(pmix.EventNoActionTaken, nil)
		}
	}
	// Registry 1 resolves in its first handler (two ways); 2 and 3 never do.
	r1 := newTestRegistry(t)
	mustRegister(t, r1, codes(codeA), "r1-resolves", completeWith(pmix.EventNoActionTaken, flag(pmix.KeyEventResolved)))
	mustRegister(t, r1, codes(codeA), "r1-after", note("r1-after"), appendAt)
	r2 := newTestRegistry(t)
	mustRegister(t, r2, codes(codeA), "r2", note("r2"))
	r3 := newTestRegistry(t)
	mustRegister(t, r3, codes(codeA), "r3-completes", completeWith(pmix.EventActionComplete))
	r4 := newTestRegistry(t)
	mustRegister(t, r4, codes(codeA), "r4", note("r4"))

	for _, r := range []*Registry{r1, r2, r3, r4} {
		if _, ok := startRun(t, r, p); !ok {
			t.Fatal("Start found nothing to run")
		}
	}
	if !saw["r1-after"] || saw["r2"] || saw["r4"] {
		t.Errorf("resolved flags seen: %v; want only r1-after's true", saw)
	}
	if !slices.EqualFunc(p.info, before, func(a, b pmix.Info) bool { return a.Key == b.Key && a.Value.String() == b.Value.String() }) {
		t.Errorf("prepared info written: %s, was %s", pmix.FormatInfos(p.info), pmix.FormatInfos(before))
	}
}

// TestStartAgreesWithWantsAndNotify: Start returns a chain exactly when
// Wants says one would run, and Run gives Notify's outcome.
func TestStartAgreesWithWantsAndNotify(t *testing.T) {
	r := newTestRegistry(t)
	mustRegister(t, r, codes(codeA), "a", completeWith(pmix.EventNoActionTaken, pmix.NewInfo(pmix.KeyEventNoTermination, pmix.Bool(true))))
	mustRegister(t, r, codes(codeA, codeB), "ab", nil, appendAt)
	mustRegister(t, r, nil, "dflt", nil)
	mustRegister(t, r, codes(codeC), "env", nil, flag(pmix.KeyEventEnviroLevel))
	held, err := r.RegisterHeld(codes(codeC-1), nil, noAction)
	if err != nil {
		t.Fatal(err)
	}
	nonDefault := []pmix.Info{flag(pmix.KeyEventNonDefault)}
	for _, ev := range []Event{
		{Code: codeA}, {Code: codeB}, {Code: codeC}, {Code: codeC, Environment: true},
		{Code: codeC - 1}, {Code: codeC - 1, Info: nonDefault}, {Code: codeC, Info: nonDefault},
	} {
		o, ok := startRun(t, r, Prepare(ev))
		if ok != r.Wants(ev) {
			t.Errorf("%v env=%v %s: Start ran %v, Wants %v", ev.Code, ev.Environment, pmix.FormatInfos(ev.Info), ok, r.Wants(ev))
		}
		want := run(t, r, ev)
		if !ok {
			if len(want.Ran) != 0 {
				t.Errorf("%v: Start ran nothing, Notify ran %v", ev.Code, ranNames(want))
			}
			continue
		}
		if !slices.Equal(ranNames(o), ranNames(want)) || o.Termination != want.Termination || o.Code != want.Code || o.Status != want.Status ||
			pmix.FormatInfos(o.Results) != pmix.FormatInfos(want.Results) {
			t.Errorf("%v: Start/Run outcome %+v, Notify %+v", ev.Code, o, want)
		}
	}
	if err := r.Release(held); err != nil {
		t.Fatal(err)
	}
	if _, ok := startRun(t, r, Prepare(Event{Code: codeC - 1, Info: nonDefault})); !ok {
		t.Error("a released registration is not started")
	}
	r.Close()
	if r.Start(Prepare(Event{Code: codeA})) != nil {
		t.Error("Start after Close returned a chain")
	}
}

// TestStartThenClose: a chain Start returned counts as running: Close before
// Run ends it with ErrInit, having run nothing.
func TestStartThenClose(t *testing.T) {
	r := newTestRegistry(t)
	mustRegister(t, r, codes(codeA), "a", nil)
	c := r.Start(Prepare(Event{Code: codeA}))
	r.Close()
	got := make(chan Outcome, 1)
	c.Run(func(o Outcome) { got <- o })
	if o := <-got; o.Status != pmix.ErrInit || len(o.Ran) != 0 {
		t.Errorf("outcome %+v", o)
	}
}

// TestStartOwnAbort: the registry's own abort event, started with Start
// while a chain runs, waits for that chain as Notify's does.
func TestStartOwnAbort(t *testing.T) {
	r := newTestRegistry(t)
	var held Done
	mustRegister(t, r, codes(codeA), "slow", func(_ *Call, done Done) { held = done })
	aborted := make(chan Outcome, 1)
	mustRegister(t, r, codes(pmix.EventAbortRequested), "aborter", nil)
	r.Notify(Event{Code: codeA}, nil)
	c := r.Start(Prepare(Event{Code: pmix.EventAbortRequested, Source: selfOrigin, Range: pmix.RangeProcLocal}))
	if c == nil {
		t.Fatal("Start found nothing to run")
	}
	c.Run(func(o Outcome) { aborted <- o })
	noOutcome(t, aborted, "the abort ran while a chain still ran")
	held(pmix.EventNoActionTaken, nil)
	if o := <-aborted; !slices.Equal(ranNames(o), []string{"aborter"}) {
		t.Errorf("abort outcome %+v", o)
	}
}

// TestSnapshotStartsLater: a chain started from a snapshot runs as if it
// had started when the snapshot was taken: a registration made or released
// since is not in it, one deregistered since is skipped, and it counts as
// running only from StartFrom on. After Close, StartFrom returns nil.
func TestSnapshotStartsLater(t *testing.T) {
	r := newTestRegistry(t)
	mustRegister(t, r, codes(codeA), "a", nil)
	gone := mustRegister(t, r, codes(codeA), "gone", nil, flag(pmix.KeyEventHdlrAppend))
	held, err := r.RegisterHeld(codes(codeA), []pmix.Info{name("held"), flag(pmix.KeyEventHdlrFirst)}, completeWith(pmix.EventNoActionTaken))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Snapshot(Prepare(Event{Code: codeB})); ok {
		t.Error("a snapshot of a code nobody registered for wants to run")
	}
	p := Prepare(Event{Code: codeA})
	s, ok := r.Snapshot(p)
	if !ok {
		t.Fatal("the snapshot wants nothing")
	}
	// Not running yet: the own abort event does not wait for it.
	aborted := make(chan Outcome, 1)
	r.Notify(Event{Code: pmix.EventAbortRequested, Source: selfOrigin, Range: pmix.RangeProcLocal}, func(o Outcome) { aborted <- o })
	select {
	case <-aborted:
	case <-time.After(10 * time.Second):
		t.Fatal("the abort waited for a chain only snapshotted")
	}

	mustRegister(t, r, codes(codeA), "later", nil, flag(pmix.KeyEventHdlrLast))
	if err := r.Release(held); err != nil {
		t.Fatal(err)
	}
	if err := r.Deregister(gone); err != nil {
		t.Fatal(err)
	}
	c := r.StartFrom(p, s)
	got := make(chan Outcome, 1)
	c.Run(func(o Outcome) { got <- o })
	if o := <-got; !slices.Equal(ranNames(o), []string{"a"}) {
		t.Errorf("ran %v, want [a]", ranNames(o))
	}
	if o, _ := startRun(t, r, Prepare(Event{Code: codeA})); !slices.Equal(ranNames(o), []string{"held", "a", "later"}) {
		t.Errorf("a chain started now ran %v", ranNames(o))
	}
	s, _ = r.Snapshot(p)
	r.Close()
	if r.StartFrom(p, s) != nil {
		t.Error("StartFrom after Close returned a chain")
	}
	if _, ok := r.Snapshot(p); ok {
		t.Error("Snapshot after Close wants to run")
	}
}

// TestTimeoutQueue: invocations of one registration wait in one queue with
// one timer; those that complete leave it, the others are passed over at
// their own deadlines, also when they were queued out of deadline order.
func TestTimeoutQueue(t *testing.T) {
	clock := newFakeClock()
	r := newTestRegistry(t, func(c *Config) { c.Clock = clock; c.DefaultTimeout = 10 * time.Second })
	var mu sync.Mutex
	var pending []Done
	var slow chan struct{} // when set, the next invocation keeps the goroutine until it is closed
	mustRegister(t, r, codes(codeA), "waits", func(_ *Call, done Done) {
		mu.Lock()
		pending = append(pending, done)
		s := slow
		slow = nil
		mu.Unlock()
		if s != nil {
			<-s
		}
	})
	got := make(chan Outcome, 8)
	notify := func() { r.Notify(Event{Code: codeA}, func(o Outcome) { got <- o }) }
	for range 3 { // deadlines 10 s, 11 s, 12 s
		notify()
		clock.Advance(time.Second)
	}
	if clock.Pending() != 1 {
		t.Fatalf("%d timers for one registration's queue, want 1", clock.Pending())
	}
	pending[0](pmix.EventNoActionTaken, nil) // the head completes
	if o := <-got; o.Ran[0].TimedOut {
		t.Fatalf("completed invocation timed out: %+v", o)
	}
	clock.Advance(7 * time.Second) // t=10 s: the timer finds nothing due
	noOutcome(t, got, "an invocation passed over before its deadline")
	if clock.Pending() != 1 {
		t.Fatalf("%d timers after re-arming, want 1", clock.Pending())
	}
	clock.Advance(time.Second) // t=11 s: the second is due
	if o := <-got; !o.Ran[0].TimedOut {
		t.Fatalf("outcome %+v, want a timeout", o)
	}
	noOutcome(t, got, "the third passed over early")
	clock.Advance(time.Second)
	if o := <-got; !o.Ran[0].TimedOut {
		t.Fatalf("outcome %+v, want a timeout", o)
	}
	if clock.Pending() != 0 {
		t.Errorf("%d timers left with an empty queue", clock.Pending())
	}

	// Out of order: the first invocation starts, keeps the goroutine while
	// a second one starts and returns, then returns itself: queued after
	// the second but due before it.
	release := make(chan struct{})
	mu.Lock()
	slow = release
	mu.Unlock()
	start := clock.Now()
	go notify()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(pending) == 4 })
	clock.Advance(time.Second)
	notify() // deadline start+11 s, queued first
	close(release)
	waitFor(t, func() bool {
		r.tmu.Lock()
		defer r.tmu.Unlock()
		return r.byID[1].waits.head != nil && r.byID[1].waits.head != r.byID[1].waits.tail
	})
	clock.Advance(start.Add(10 * time.Second).Sub(clock.Now()))
	if o := <-got; !o.Ran[0].TimedOut {
		t.Fatalf("outcome %+v, want a timeout", o)
	}
	noOutcome(t, got, "the later deadline passed over early")
	r.Close()
	if o := <-got; o.Status != pmix.ErrInit {
		t.Errorf("outcome after Close %+v", o)
	}
	if clock.Pending() != 0 {
		t.Errorf("Close left %d timers", clock.Pending())
	}
}

// waitFor polls cond until it holds, 10 s at most.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if !cond() {
			return errors.New("condition does not hold")
		}
		return nil
	})
}

// noOutcome fails the test if an outcome has come on got.
func noOutcome(t *testing.T, got <-chan Outcome, what string) {
	t.Helper()
	select {
	case o := <-got:
		t.Fatalf("%s: %+v", what, o)
	default:
	}
}

// TestTimeoutQueueExpiresTogether: invocations due at one firing are all
// passed over, each chain moving on (all but one on goroutines of their
// own).
func TestTimeoutQueueExpiresTogether(t *testing.T) {
	clock := newFakeClock()
	r := newTestRegistry(t, func(c *Config) { c.Clock = clock; c.DefaultTimeout = time.Second })
	mustRegister(t, r, codes(codeA), "hangs", func(*Call, Done) {})
	mustRegister(t, r, codes(codeA), "next", nil, appendAt)
	got := make(chan Outcome, 3)
	for range 3 {
		r.Notify(Event{Code: codeA}, func(o Outcome) { got <- o })
	}
	clock.Advance(time.Second)
	for range 3 {
		select {
		case o := <-got:
			if !slices.Equal(ranNames(o), []string{"hangs", "next"}) || !o.Ran[0].TimedOut {
				t.Errorf("outcome %+v", o)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a chain never moved on")
		}
	}
	if clock.Pending() != 0 {
		t.Errorf("%d timers left", clock.Pending())
	}
}

// TestTimeoutsUnderLoad: invocations that never complete, started from
// several goroutines with timeouts of three lengths while timers fire and
// re-arm, are all passed over, each no sooner than its timeout; those that
// complete in time are not.
func TestTimeoutsUnderLoad(t *testing.T) {
	r := newTestRegistry(t)
	timeouts := []float64{0.02, 0.05, 0.01}
	for i, to := range timeouts {
		mustRegister(t, r, codes(codeA+pmix.Status(i)), fmt.Sprint("hang", i), func(*Call, Done) {},
			pmix.NewInfo(pmix.KeyEventActionTimeout, pmix.Float64(to)))
	}
	mustRegister(t, r, codes(codeB), "quick", func(_ *Call, done Done) { go done(pmix.EventNoActionTaken, nil) },
		pmix.NewInfo(pmix.KeyEventActionTimeout, pmix.Float64(5)))
	const perGoroutine, goroutines = 200, 6
	var wg sync.WaitGroup
	var timedOut, completed, early atomic.Int64
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perGoroutine {
				k := (g + i) % len(timeouts)
				start := time.Now()
				r.Notify(Event{Code: codeA + pmix.Status(k)}, func(o Outcome) {
					if time.Since(start) < time.Duration(timeouts[k]*float64(time.Second)) {
						early.Add(1)
					}
					if len(o.Ran) == 1 && o.Ran[0].TimedOut {
						timedOut.Add(1)
					}
				})
				r.Notify(Event{Code: codeB}, func(o Outcome) {
					if len(o.Ran) == 1 && !o.Ran[0].TimedOut {
						completed.Add(1)
					}
				})
				if i%50 == 0 {
					time.Sleep(time.Millisecond) // let timers fire between bursts
				}
			}
		}()
	}
	wg.Wait()
	waitFor(t, func() bool {
		return timedOut.Load() == perGoroutine*goroutines && completed.Load() == perGoroutine*goroutines
	})
	if n := early.Load(); n > 0 {
		t.Errorf("%d invocations passed over before their timeout", n)
	}
}
