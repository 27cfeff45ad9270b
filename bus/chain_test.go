package bus

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
)

func statusInfo(key string, s pmix.Status) pmix.Info { return pmix.NewInfo(key, pmix.StatusValue(s)) }
func intInfo(key string, n int32) pmix.Info          { return pmix.NewInfo(key, pmix.Int32(n)) }

func wantInfos(t *testing.T, what string, got, want []pmix.Info) {
	t.Helper()
	if !pmix.InfosEqual(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, pmix.FormatInfos(got), pmix.FormatInfos(want))
	}
}

func TestResultsEntries(t *testing.T) {
	r := newTestRegistry(t)
	var seen [][]pmix.Info
	record := func(status pmix.Status, results ...pmix.Info) Handler {
		return func(c *Call, done Done) {
			seen = append(seen, slices.Clone(c.Results))
			done(status, results)
		}
	}
	mustRegister(t, r, codes(codeA), "h1", record(pmix.EventPartialActionTaken, intInfo("x", 1), intInfo("y", 2)), appendAt)
	u := mustRegister(t, r, codes(codeA), "", record(pmix.EventNoActionTaken), appendAt)
	mustRegister(t, r, codes(codeA), "h3", record(pmix.EventActionDeferred), appendAt)
	mustRegister(t, r, nil, "h4", record(pmix.ErrNotSupported, pmix.Info{Key: "", Value: pmix.Int32(9)}), appendAt)

	o := run(t, r, Event{Code: codeA})
	ukey := fmt.Sprintf("%s%d", UnnamedPrefix, u)
	e1 := []pmix.Info{statusInfo("h1", pmix.EventPartialActionTaken), intInfo("x", 1), intInfo("y", 2)}
	e2 := append(slices.Clone(e1), statusInfo(ukey, pmix.EventNoActionTaken))
	e3 := append(slices.Clone(e2), statusInfo("h3", pmix.EventActionDeferred))
	e4 := append(slices.Clone(e3), statusInfo("h4", pmix.ErrNotSupported)) // the keyless returned info is dropped
	wantInfos(t, "h1 sees", seen[0], nil)
	wantInfos(t, "h2 sees", seen[1], e1)
	wantInfos(t, "h3 sees", seen[2], e2)
	wantInfos(t, "h4 sees", seen[3], e3)
	wantInfos(t, "outcome", o.Results, e4)
	if o.Completed || o.Resolved || o.Status != pmix.Success || o.Code != codeA {
		t.Errorf("outcome %+v", o)
	}
	wantRan := []Ran{{1, "h1", pmix.EventPartialActionTaken, false}, {u, "", pmix.EventNoActionTaken, false},
		{3, "h3", pmix.EventActionDeferred, false}, {4, "h4", pmix.ErrNotSupported, false}}
	if !slices.Equal(o.Ran, wantRan) {
		t.Errorf("Ran = %+v, want %+v", o.Ran, wantRan)
	}
}

func TestResultsEditing(t *testing.T) {
	r := newTestRegistry(t)
	var thirdSaw []pmix.Info
	mustRegister(t, r, codes(codeA), "h1", completeWith(pmix.EventPartialActionTaken, intInfo("a", 1), intInfo("b", 2), intInfo("c", 3)), appendAt)
	mustRegister(t, r, codes(codeA), "h2", func(c *Call, done Done) {
		for i := range c.Results {
			switch c.Results[i].Key {
			case "a":
				c.Results[i].Value = pmix.Int32(10) // change a value
			case "b", "h1":
				c.Results[i].Key = "" // mark for removal
			}
		}
		c.Results = append(c.Results, intInfo("ignored", 0)) // appending to the copy adds nothing
		done(pmix.EventNoActionTaken, []pmix.Info{intInfo("d", 4)})
	}, appendAt)
	mustRegister(t, r, codes(codeA), "h3", func(c *Call, done Done) {
		thirdSaw = slices.Clone(c.Results)
		c.Results[0].Value = pmix.Int32(100)
		done(pmix.EventNoActionTaken, nil)
	}, appendAt)

	o := run(t, r, Event{Code: codeA})
	want := []pmix.Info{intInfo("a", 10), intInfo("c", 3), statusInfo("h2", pmix.EventNoActionTaken), intInfo("d", 4)}
	wantInfos(t, "h3 sees", thirdSaw, want)
	want[0] = intInfo("a", 100)
	wantInfos(t, "outcome", o.Results, append(want, statusInfo("h3", pmix.EventNoActionTaken)))
}

// Each handler's copy is its own: a handler completing asynchronously that
// keeps editing until it calls done does not disturb what others saw or see.
func TestResultsCopiesAreIndependent(t *testing.T) {
	r := newTestRegistry(t)
	release := make(chan struct{})
	var firstCopy []pmix.Info
	mustRegister(t, r, codes(codeA), "h1", func(c *Call, done Done) {
		firstCopy = c.Results
		done(pmix.EventNoActionTaken, []pmix.Info{intInfo("x", 1)})
	}, appendAt)
	mustRegister(t, r, codes(codeA), "h2", func(c *Call, done Done) {
		go func() {
			<-release
			c.Results[0].Value = pmix.StatusValue(pmix.ErrGeneral)
			done(pmix.EventNoActionTaken, nil)
		}()
	}, appendAt)
	var thirdSaw []pmix.Info
	mustRegister(t, r, codes(codeA), "h3", func(c *Call, done Done) {
		thirdSaw = slices.Clone(c.Results)
		done(pmix.EventNoActionTaken, nil)
	}, appendAt)
	got := make(chan Outcome, 1)
	r.Notify(Event{Code: codeA}, func(o Outcome) { got <- o })
	close(release)
	o := <-got
	if len(firstCopy) != 0 {
		t.Errorf("h1's copy changed: %v", firstCopy)
	}
	wantInfos(t, "h3 sees", thirdSaw, []pmix.Info{
		statusInfo("h1", pmix.ErrGeneral), intInfo("x", 1), statusInfo("h2", pmix.EventNoActionTaken)})
	if len(o.Results) != 4 {
		t.Errorf("results %v", pmix.FormatInfos(o.Results))
	}
}

func TestResolvedFlag(t *testing.T) {
	resolved := func(c *Call) (bool, int) {
		n := 0
		var v bool
		for _, in := range c.Info {
			if in.Key == pmix.KeyEventResolved {
				n++
				v, _ = in.Value.Bool()
			}
		}
		return v, n
	}
	t.Run("starts false and a handler can set it", func(t *testing.T) {
		r := newTestRegistry(t)
		var views [][]pmix.Info
		var flags []bool
		h := func(results ...pmix.Info) Handler {
			return func(c *Call, done Done) {
				v, n := resolved(c)
				if n != 1 {
					t.Errorf("%s: %d resolved entries in %v", c.Name, n, pmix.FormatInfos(c.Info))
				}
				views = append(views, c.Info)
				flags = append(flags, v)
				done(pmix.EventPartialActionTaken, results)
			}
		}
		mustRegister(t, r, codes(codeA), "h1", h(), appendAt)
		mustRegister(t, r, codes(codeA), "h2", h(pmix.NewInfo(pmix.KeyEventResolved, pmix.Bool(true))), appendAt)
		mustRegister(t, r, codes(codeA), "h3", h(), appendAt)
		// A resolved flag arriving with the event is replaced by the chain's own.
		o := run(t, r, Event{Code: codeA, Info: []pmix.Info{intInfo("k", 1), pmix.NewInfo(pmix.KeyEventResolved, pmix.Bool(true))}})
		if !slices.Equal(flags, []bool{false, false, true}) {
			t.Errorf("resolved as seen by h1..h3: %v", flags)
		}
		if v, _ := pmix.LookupValue(views[0], pmix.KeyEventResolved); !v.Equal(pmix.Bool(false)) {
			t.Errorf("h1's info changed after the fact: %v", pmix.FormatInfos(views[0]))
		}
		if views[0][0].Key != "k" {
			t.Errorf("event info not passed on: %v", pmix.FormatInfos(views[0]))
		}
		if !o.Resolved || o.Completed || len(o.Ran) != 3 {
			t.Errorf("outcome: resolved %v completed %v ran %v", o.Resolved, o.Completed, ranNames(o))
		}
	})
	t.Run("ACTION_COMPLETE sets it and ends the chain", func(t *testing.T) {
		r := newTestRegistry(t)
		mustRegister(t, r, nil, "last", nil, last)
		mustRegister(t, r, nil, "default", nil)
		mustRegister(t, r, codes(codeA), "done", completeWith(pmix.EventActionComplete))
		mustRegister(t, r, codes(codeA), "before", nil)
		o := run(t, r, Event{Code: codeA})
		if got := ranNames(o); !slices.Equal(got, []string{"before", "done"}) {
			t.Errorf("ran %v", got)
		}
		if !o.Completed || !o.Resolved {
			t.Errorf("Completed %v Resolved %v", o.Completed, o.Resolved)
		}
		if got := ranNames(run(t, r, Event{Code: codeB})); !slices.Equal(got, []string{"default", "last"}) {
			t.Errorf("other code ran %v", got)
		}
	})
}

func TestTermination(t *testing.T) {
	want := pmix.NewInfo(pmix.KeyEventWantTermination, pmix.Bool(true))
	wantReq := pmix.Required(want)
	no := pmix.NewInfo(pmix.KeyEventNoTermination, pmix.Bool(true))
	noFalse := pmix.NewInfo(pmix.KeyEventNoTermination, pmix.Bool(false))
	wantStr := pmix.NewInfo(pmix.KeyEventWantTermination, pmix.String("yes"))
	cases := []struct {
		name     string
		returns  [][]pmix.Info // per handler, in chain order
		decision Decision
		required bool
		by       string
	}{
		{"nobody says", [][]pmix.Info{nil, nil}, Undecided, false, ""},
		{"want", [][]pmix.Info{nil, {want}, nil}, WantTermination, false, "h2"},
		{"no", [][]pmix.Info{{no}}, NoTermination, false, "h1"},
		{"no overrides want", [][]pmix.Info{{want}, {no}}, NoTermination, false, "h2"},
		{"want overrides no", [][]pmix.Info{{no}, {want}}, WantTermination, false, "h2"},
		{"required want is final", [][]pmix.Info{{wantReq}, {no}, {want}, {no}}, WantTermination, true, "h1"},
		{"required want after no", [][]pmix.Info{{no}, {wantReq}, {no}}, WantTermination, true, "h2"},
		{"last of one handler's infos counts", [][]pmix.Info{{want, no}}, NoTermination, false, "h1"},
		{"false and malformed flags say nothing", [][]pmix.Info{{want}, {noFalse, wantStr}}, WantTermination, false, "h1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRegistry(t)
			for i, ret := range c.returns {
				mustRegister(t, r, codes(codeA), fmt.Sprintf("h%d", i+1), completeWith(pmix.EventPartialActionTaken, ret...), appendAt)
			}
			o := run(t, r, Event{Code: codeA})
			got := o.Termination
			if got.Decision != c.decision || got.Required != c.required || got.ByName != c.by {
				t.Errorf("Termination = %+v, want %v required=%v by %q", got, c.decision, c.required, c.by)
			}
			if got.Want() != (c.decision == WantTermination) {
				t.Errorf("Want() = %v", got.Want())
			}
		})
	}
	// Removing every entry does not undo a required decision: that entry
	// stays, the others go.
	r := newTestRegistry(t)
	mustRegister(t, r, codes(codeA), "h1", completeWith(pmix.EventPartialActionTaken, wantReq), appendAt)
	mustRegister(t, r, codes(codeA), "h2", func(c *Call, done Done) {
		for i := range c.Results {
			c.Results[i].Key = ""
		}
		done(pmix.EventNoActionTaken, []pmix.Info{no})
	}, appendAt)
	o := run(t, r, Event{Code: codeA})
	if !o.Termination.Want() || !o.Termination.Required || o.Termination.ByName != "h1" {
		t.Errorf("required want lost to an edit: %+v", o.Termination)
	}
	wantInfos(t, "results", o.Results, []pmix.Info{wantReq, statusInfo("h2", pmix.EventNoActionTaken), no})
}

// TestTerminationFollowsEdits: the decision is read from the consolidated
// array, so edits by later handlers count, except to a required
// WANT_TERMINATION, which stays as it was; the array and the decision agree.
func TestTerminationFollowsEdits(t *testing.T) {
	want := pmix.NewInfo(pmix.KeyEventWantTermination, pmix.Bool(true))
	wantReq := pmix.Required(want)
	no := pmix.NewInfo(pmix.KeyEventNoTermination, pmix.Bool(true))
	// edit applies f to every entry of the handler's copy with key k.
	edit := func(k string, f func(*pmix.Info)) Handler {
		return func(c *Call, done Done) {
			for i := range c.Results {
				if c.Results[i].Key == k {
					f(&c.Results[i])
				}
			}
			done(pmix.EventNoActionTaken, nil)
		}
	}
	remove := func(in *pmix.Info) { in.Key = "" }
	setFalse := func(in *pmix.Info) { in.Value = pmix.Bool(false) }
	cases := []struct {
		name     string
		handlers []Handler // h1, h2, … in chain order
		decision Decision
		required bool
		by       string
		kept     pmix.Info // what the array holds of the first termination entry, if anything
	}{
		{"no withdrawn by an edit", []Handler{completeWith(0, no), edit(pmix.KeyEventNoTermination, setFalse)},
			Undecided, false, "", pmix.NewInfo(pmix.KeyEventNoTermination, pmix.Bool(false))},
		{"want removed", []Handler{completeWith(0, want), edit(pmix.KeyEventWantTermination, remove)},
			Undecided, false, "", pmix.Info{}},
		{"later want removed, earlier no stands", []Handler{completeWith(0, no), completeWith(0, want), edit(pmix.KeyEventWantTermination, remove)},
			NoTermination, false, "h1", no},
		{"required want cannot be removed", []Handler{completeWith(0, wantReq), edit(pmix.KeyEventWantTermination, remove)},
			WantTermination, true, "h1", wantReq},
		{"required want cannot be set false", []Handler{completeWith(0, wantReq), edit(pmix.KeyEventWantTermination, setFalse)},
			WantTermination, true, "h1", wantReq},
		{"required want cannot lose its flag", []Handler{completeWith(0, wantReq), edit(pmix.KeyEventWantTermination, func(in *pmix.Info) { in.Flags = 0 }),
			completeWith(0, no)}, WantTermination, true, "h1", wantReq},
		{"required want cannot be renamed", []Handler{completeWith(0, wantReq), edit(pmix.KeyEventWantTermination, func(in *pmix.Info) { in.Key = pmix.KeyEventNoTermination })},
			WantTermination, true, "h1", wantReq},
		{"no set back to true by an edit", []Handler{completeWith(0, pmix.NewInfo(pmix.KeyEventNoTermination, pmix.Bool(false))), completeWith(0, want),
			edit(pmix.KeyEventNoTermination, func(in *pmix.Info) { in.Value = pmix.Bool(true) })},
			WantTermination, false, "h2", no},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRegistry(t)
			for i, h := range c.handlers {
				mustRegister(t, r, codes(codeA), fmt.Sprintf("h%d", i+1), h, appendAt)
			}
			o := run(t, r, Event{Code: codeA})
			got := o.Termination
			if got.Decision != c.decision || got.Required != c.required || got.ByName != c.by {
				t.Errorf("Termination = %+v, want %v required=%v by %q", got, c.decision, c.required, c.by)
			}
			var first pmix.Info
			for _, in := range o.Results {
				if in.Key == pmix.KeyEventWantTermination || in.Key == pmix.KeyEventNoTermination {
					first = in
					break
				}
			}
			if !first.Equal(c.kept) {
				t.Errorf("array holds %v, want %v (results %v)", first, c.kept, pmix.FormatInfos(o.Results))
			}
		})
	}
}

func TestAbort(t *testing.T) {
	abortReq := pmix.NewInfo(pmix.KeyEventAbortRequested, pmix.Bool(true))
	r := newTestRegistry(t)
	var order []string
	var abortCall Call
	mustRegister(t, r, codes(codeA), "asks", func(c *Call, done Done) {
		order = append(order, "asks")
		done(pmix.EventPartialActionTaken, []pmix.Info{abortReq})
	})
	mustRegister(t, r, codes(codeA), "after", func(c *Call, done Done) {
		order = append(order, "after")
		done(pmix.EventNoActionTaken, nil)
	}, appendAt)
	// The abort handler asks for an abort too: that must not loop.
	mustRegister(t, r, codes(pmix.EventAbortRequested), "aborter", func(c *Call, done Done) {
		order = append(order, "aborter")
		abortCall = *c
		done(pmix.EventActionComplete, []pmix.Info{abortReq})
	}, pmix.NewInfo(pmix.KeyRange, pmix.RangeValue(pmix.RangeProcLocal)))

	o := run(t, r, Event{Code: codeA})
	if !slices.Equal(order, []string{"asks", "after", "aborter"}) {
		t.Fatalf("order %v", order)
	}
	if o.Abort == nil {
		t.Fatal("no abort outcome")
	}
	if o.Abort.Code != pmix.EventAbortRequested || !o.Abort.Completed || o.Abort.Abort != nil {
		t.Errorf("abort outcome %+v", *o.Abort)
	}
	if abortCall.Source != selfProc || abortCall.Code != pmix.EventAbortRequested {
		t.Errorf("abort call from %v code %v", abortCall.Source, abortCall.Code)
	}
	if v, _ := pmix.LookupValue(abortCall.Info, pmix.KeyEventAffectedProc); !v.Equal(pmix.ProcValue(selfProc)) {
		t.Errorf("abort event info %v", pmix.FormatInfos(abortCall.Info))
	}
	if v, _ := pmix.LookupValue(abortCall.Info, pmix.KeyEventTextMessage); !strings.Contains(v.String(), "asks") {
		t.Errorf("abort event text %v", v)
	}
	// Notifying the abort event directly runs its chain once, no more.
	order = nil
	if o := run(t, r, Event{Code: pmix.EventAbortRequested, Source: selfOrigin}); o.Abort != nil || !slices.Equal(order, []string{"aborter"}) {
		t.Errorf("direct abort event: ran %v, Abort %v", order, o.Abort)
	}
	// Without a handler for it, the abort event runs an empty chain.
	r2 := newTestRegistry(t)
	mustRegister(t, r2, codes(codeA), "asks", completeWith(pmix.EventNoActionTaken, abortReq))
	if o := run(t, r2, Event{Code: codeA}); o.Abort == nil || len(o.Abort.Ran) != 0 || o.Abort.Code != pmix.EventAbortRequested {
		t.Errorf("abort with no handler: %+v", o.Abort)
	}
	// A default handler that always asks runs again in the abort chain,
	// and asks again, and that is the end of it.
	r3 := newTestRegistry(t)
	mustRegister(t, r3, nil, "always", completeWith(pmix.EventNoActionTaken, abortReq))
	o = run(t, r3, Event{Code: codeA})
	if o.Abort == nil || !slices.Equal(ranNames(*o.Abort), []string{"always"}) || o.Abort.Abort != nil {
		t.Errorf("abort from a default handler: %+v", o.Abort)
	}
}

// TestOwnAbortWaitsForChains: the minutes' abort, notified by a handler of
// this process while its chain runs, starts once that chain (and any other
// running then) has ended; an abort event from another process starts at
// once; Close starts the held ones, which report pmix.ErrInit.
func TestOwnAbortWaitsForChains(t *testing.T) {
	abortFrom := func(src Origin) Event {
		return Event{Code: pmix.EventAbortRequested, Source: src, Range: pmix.RangeProcLocal}
	}
	peer := Origin{Cluster: "A", Node: "n2", Proc: pmix.Proc{Nspace: "A:job1", Rank: 4}}
	for _, c := range []struct {
		name  string
		src   Origin
		async bool // the asking handler completes later, from another goroutine
		want  []string
	}{
		{"own, synchronous", selfOrigin, false, []string{"asks", "after", "aborter", "abort outcome"}},
		{"own, asynchronous", selfOrigin, true, []string{"asks", "after", "aborter", "abort outcome"}},
		{"from a peer", peer, false, []string{"asks", "aborter", "abort outcome", "after"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRegistry(t)
			var mu sync.Mutex
			var order []string
			note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
			aborted := make(chan struct{})
			mustRegister(t, r, codes(codeA), "asks", func(_ *Call, done Done) {
				note("asks")
				r.Notify(abortFrom(c.src), func(o Outcome) { note("abort outcome"); close(aborted) })
				if c.async {
					go done(pmix.EventNoActionTaken, nil)
					return
				}
				done(pmix.EventNoActionTaken, nil)
			})
			mustRegister(t, r, codes(codeA), "after", func(_ *Call, done Done) { note("after"); done(pmix.EventNoActionTaken, nil) }, appendAt)
			mustRegister(t, r, codes(pmix.EventAbortRequested), "aborter", func(_ *Call, done Done) { note("aborter"); done(pmix.EventNoActionTaken, nil) })
			run(t, r, Event{Code: codeA})
			select {
			case <-aborted:
			case <-time.After(10 * time.Second):
				t.Fatal("the abort chain never ended")
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(order, c.want) {
				t.Errorf("order %v, want %v", order, c.want)
			}
		})
	}

	t.Run("waits for every chain running when it came", func(t *testing.T) {
		r := newTestRegistry(t)
		var held []Done
		var mu sync.Mutex
		mustRegister(t, r, codes(codeA), "slow", func(_ *Call, done Done) { mu.Lock(); held = append(held, done); mu.Unlock() })
		ran := make(chan Outcome, 1)
		r.Notify(Event{Code: codeA}, nil)
		r.Notify(Event{Code: codeA}, nil)
		r.Notify(abortFrom(selfOrigin), func(o Outcome) { ran <- o })
		mu.Lock()
		first, second := held[0], held[1]
		mu.Unlock()
		first(pmix.EventNoActionTaken, nil)
		select {
		case <-ran:
			t.Fatal("abort started while a chain still ran")
		default:
		}
		r.Notify(Event{Code: codeA}, nil) // started after the abort: not waited for
		second(pmix.EventNoActionTaken, nil)
		if o := <-ran; o.Status != pmix.Success {
			t.Errorf("abort outcome %+v", o)
		}
	})

	t.Run("Close releases it", func(t *testing.T) {
		r := newTestRegistry(t)
		mustRegister(t, r, codes(codeA), "never", func(*Call, Done) {})
		r.Notify(Event{Code: codeA}, nil)
		ran := make(chan Outcome, 1)
		r.Notify(abortFrom(selfOrigin), func(o Outcome) { ran <- o })
		r.Close()
		if o := <-ran; o.Status != pmix.ErrInit {
			t.Errorf("abort outcome after Close %+v", o)
		}
	})
}

func TestTimeouts(t *testing.T) {
	clock := newFakeClock()
	r := newTestRegistry(t, func(c *Config) { c.Clock = clock; c.DefaultTimeout = 5 * time.Second })
	var lateDone []Done
	hang := func(c *Call, done Done) {
		c.Results = append(c.Results[:0:0], intInfo("scribble", 1))
		lateDone = append(lateDone, done)
	}
	mustRegister(t, r, codes(codeA), "quick", completeWith(pmix.EventNoActionTaken), appendAt)
	mustRegister(t, r, codes(codeA), "own", hang, appendAt, pmix.NewInfo(pmix.KeyEventActionTimeout, pmix.Int32(2)))
	mustRegister(t, r, codes(codeA), "dflt", hang, appendAt)
	var seenByLast []pmix.Info
	mustRegister(t, r, codes(codeA), "end", func(c *Call, done Done) {
		seenByLast = slices.Clone(c.Results)
		done(pmix.EventNoActionTaken, nil)
	}, appendAt)

	got := make(chan Outcome, 1)
	r.Notify(Event{Code: codeA}, func(o Outcome) { got <- o })
	if clock.Pending() != 1 {
		t.Fatalf("%d timers pending, want 1", clock.Pending())
	}
	clock.Advance(1999 * time.Millisecond)
	if len(lateDone) != 1 {
		t.Fatalf("chain moved on before the timeout")
	}
	clock.Advance(time.Millisecond) // "own" times out after 2s, "dflt" starts
	if len(lateDone) != 2 || clock.Pending() != 1 {
		t.Fatalf("after 2s: %d handlers waiting, %d timers", len(lateDone), clock.Pending())
	}
	lateDone[0](pmix.EventActionComplete, []pmix.Info{intInfo("late", 1)}) // after its timeout: ignored
	clock.Advance(4 * time.Second)
	select {
	case <-got:
		t.Fatal("default timeout fired early")
	default:
	}
	clock.Advance(time.Second)
	o := <-got
	if clock.Pending() != 0 {
		t.Errorf("%d timers left", clock.Pending())
	}
	lateDone[1](pmix.EventNoActionTaken, nil) // after the chain ended: ignored
	want := []pmix.Info{statusInfo("quick", pmix.EventNoActionTaken), statusInfo("own", pmix.ErrTimeout), statusInfo("dflt", pmix.ErrTimeout)}
	wantInfos(t, "end sees", seenByLast, want)
	wantRan := []Ran{{1, "quick", pmix.EventNoActionTaken, false}, {2, "own", pmix.ErrTimeout, true}, {3, "dflt", pmix.ErrTimeout, true}, {4, "end", pmix.EventNoActionTaken, false}}
	if !slices.Equal(o.Ran, wantRan) || o.Completed {
		t.Errorf("Ran = %+v, Completed %v", o.Ran, o.Completed)
	}
}

func TestTimeoutOfASynchronousOverrun(t *testing.T) {
	clock := newFakeClock()
	r := newTestRegistry(t, func(c *Config) { c.Clock = clock })
	// The handler keeps the goroutine past its timeout and returns without
	// completing: it is passed over at once.
	mustRegister(t, r, codes(codeA), "slow", func(c *Call, done Done) { clock.Advance(3 * time.Second) },
		pmix.NewInfo(pmix.KeyEventActionTimeout, pmix.Int32(1)))
	o := run(t, r, Event{Code: codeA})
	if len(o.Ran) != 1 || !o.Ran[0].TimedOut || clock.Pending() != 0 {
		t.Errorf("Ran %+v, %d timers", o.Ran, clock.Pending())
	}
}

func TestTimeoutRealClock(t *testing.T) {
	r := newTestRegistry(t)
	release := make(chan Done, 1)
	mustRegister(t, r, codes(codeA), "hang", func(c *Call, done Done) { release <- done },
		pmix.NewInfo(pmix.KeyEventActionTimeout, pmix.Float64(0.05)))
	mustRegister(t, r, codes(codeA), "next", nil, appendAt)
	start := time.Now()
	o := run(t, r, Event{Code: codeA})
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Errorf("chain ended after %v, before the 50ms timeout", el)
	}
	if got := ranNames(o); !slices.Equal(got, []string{"hang", "next"}) || !o.Ran[0].TimedOut {
		t.Errorf("ran %v %+v", got, o.Ran)
	}
	(<-release)(pmix.EventNoActionTaken, nil) // late: ignored without harm
}

func TestNoTimeout(t *testing.T) {
	clock := newFakeClock()
	r := newTestRegistry(t, func(c *Config) { c.Clock = clock; c.DefaultTimeout = 0 })
	var pending Done
	mustRegister(t, r, codes(codeA), "waits", func(c *Call, done Done) { pending = done })
	got := make(chan Outcome, 1)
	r.Notify(Event{Code: codeA}, func(o Outcome) { got <- o })
	if clock.Pending() != 0 {
		t.Fatal("a timer was armed with no timeout configured")
	}
	clock.Advance(time.Hour)
	pending(pmix.EventNoActionTaken, nil)
	if o := <-got; len(o.Ran) != 1 || o.Ran[0].TimedOut {
		t.Errorf("Ran %+v", o.Ran)
	}
}

func TestAsynchronousCompletion(t *testing.T) {
	r := newTestRegistry(t)
	var calls atomic.Int32
	async := func(c *Call, done Done) {
		calls.Add(1)
		go done(pmix.EventPartialActionTaken, []pmix.Info{intInfo(c.Name, 1)})
	}
	var late sync.WaitGroup // the ignored completion logs: it must not outlive the test
	defer late.Wait()
	twice := func(c *Call, done Done) {
		calls.Add(1)
		done(pmix.EventNoActionTaken, nil)
		done(pmix.EventActionComplete, nil) // ignored
		late.Go(func() { done(pmix.EventActionComplete, nil) })
	}
	mustRegister(t, r, codes(codeA), "a1", async, appendAt)
	mustRegister(t, r, codes(codeA), "t", twice, appendAt)
	mustRegister(t, r, codes(codeA), "a2", async, appendAt)
	mustRegister(t, r, nil, "d", async, appendAt)
	o := run(t, r, Event{Code: codeA})
	if got := ranNames(o); !slices.Equal(got, []string{"a1", "t", "a2", "d"}) || o.Completed {
		t.Errorf("ran %v, completed %v", got, o.Completed)
	}
	if calls.Load() != 4 {
		t.Errorf("%d calls", calls.Load())
	}
}

// Handlers completing within their call are chained by a loop: the last of
// a long chain runs at the same stack depth as the first.
func TestLongSynchronousChain(t *testing.T) {
	r := newTestRegistry(t)
	const n = 2000
	var depths []int
	pcs := make([]uintptr, 512)
	for range n {
		mustRegister(t, r, codes(codeA), "", func(c *Call, done Done) {
			if len(depths) == 0 || c.ID == 1 {
				depths = append(depths, runtime.Callers(0, pcs))
			}
			done(pmix.EventNoActionTaken, nil)
		})
	}
	o := run(t, r, Event{Code: codeA})
	if len(o.Ran) != n || len(o.Results) != n {
		t.Errorf("ran %d, %d results", len(o.Ran), len(o.Results))
	}
	if len(depths) != 2 || depths[0] != depths[1] {
		t.Errorf("stack depth of the first and last handler: %v", depths)
	}
}

// A registration made while a chain runs does not join it; a deregistration
// before a handler's turn removes it.
func TestChainSnapshot(t *testing.T) {
	r := newTestRegistry(t)
	var lateID ID
	var idC ID
	mustRegister(t, r, codes(codeA), "a", func(c *Call, done Done) {
		var err error
		lateID, err = r.Register(codes(codeA), []pmix.Info{name("late"), appendAt}, noAction)
		if err != nil {
			t.Error(err)
		}
		if err := r.Deregister(idC); err != nil {
			t.Error(err)
		}
		done(pmix.EventNoActionTaken, nil)
	}, appendAt)
	mustRegister(t, r, codes(codeA), "b", nil, appendAt)
	idC = mustRegister(t, r, codes(codeA), "c", nil, appendAt)
	mustRegister(t, r, nil, "d", nil)
	if got := ranNames(run(t, r, Event{Code: codeA})); !slices.Equal(got, []string{"a", "b", "d"}) {
		t.Errorf("first chain ran %v", got)
	}
	if err := r.Deregister(lateID); err != nil {
		t.Fatal(err)
	}
}

func TestReentrantHandlers(t *testing.T) {
	r := newTestRegistry(t)
	var nested Outcome
	var selfID ID
	selfID = mustRegister(t, r, codes(codeA), "once", func(c *Call, done Done) {
		if c.ID != selfID {
			t.Errorf("Call.ID %d, want %d", c.ID, selfID)
		}
		if err := r.Deregister(c.ID); err != nil { // deregisters itself
			t.Error(err)
		}
		if !r.Wants(Event{Code: codeB}) || len(r.Registrations()) != 2 {
			t.Error("registry state wrong inside a handler")
		}
		nested = run(t, r, Event{Code: codeB}) // a nested chain on the same registry
		done(pmix.EventNoActionTaken, nil)
	})
	mustRegister(t, r, codes(codeB), "inner", nil)
	mustRegister(t, r, nil, "closer", func(c *Call, done Done) {
		if c.Code == codeC {
			r.Close()
		}
		done(pmix.EventNoActionTaken, nil)
	})
	if got := ranNames(run(t, r, Event{Code: codeA})); !slices.Equal(got, []string{"once", "closer"}) {
		t.Errorf("ran %v", got)
	}
	if got := ranNames(nested); !slices.Equal(got, []string{"inner", "closer"}) {
		t.Errorf("nested ran %v", got)
	}
	if got := ranNames(run(t, r, Event{Code: codeA})); !slices.Equal(got, []string{"closer"}) {
		t.Errorf("second chain ran %v", got)
	}
	if o := run(t, r, Event{Code: codeC}); o.Status != pmix.Success || len(o.Ran) != 1 {
		t.Errorf("chain that closed its registry: %+v", o)
	}
}

func TestClose(t *testing.T) {
	clock := newFakeClock()
	r := newTestRegistry(t, func(c *Config) { c.Clock = clock; c.DefaultTimeout = time.Minute })
	var pending Done
	mustRegister(t, r, codes(codeA), "first", nil, appendAt)
	mustRegister(t, r, codes(codeA), "waits", func(c *Call, done Done) { pending = done }, appendAt)
	mustRegister(t, r, codes(codeA), "never", nil, appendAt)
	got := make(chan Outcome, 1)
	r.Notify(Event{Code: codeA}, func(o Outcome) { got <- o })
	if clock.Pending() != 1 {
		t.Fatal("no timer armed")
	}
	r.Close()
	o := <-got
	if o.Status != pmix.ErrInit || !slices.Equal(ranNames(o), []string{"first", "waits"}) || o.Ran[1].Status != pmix.ErrInit {
		t.Errorf("interrupted chain: %+v", o)
	}
	if clock.Pending() != 0 {
		t.Error("Close left a timer")
	}
	pending(pmix.EventNoActionTaken, nil) // ignored
	r.Close()                             // twice is fine

	o = run(t, r, Event{Code: codeA})
	if o.Status != pmix.ErrInit || len(o.Ran) != 0 {
		t.Errorf("Notify after Close: %+v", o)
	}
	if _, err := r.Run(context.Background(), Event{Code: codeA}); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
	if _, err := r.Register(nil, nil, noAction); !errors.Is(err, ErrClosed) {
		t.Errorf("Register after Close: %v", err)
	}
	if err := r.Replay(1, Event{Code: codeA}, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Replay after Close: %v", err)
	}
	if r.Wants(Event{Code: codeA}) {
		t.Error("Wants after Close")
	}
	if err := r.Deregister(1); err != nil {
		t.Errorf("Deregister after Close: %v", err)
	}
}

func TestCloseDuringSynchronousCall(t *testing.T) {
	r := newTestRegistry(t)
	mustRegister(t, r, codes(codeA), "closes", func(c *Call, done Done) { r.Close() }, appendAt) // and never completes
	mustRegister(t, r, codes(codeA), "never", nil, appendAt)
	o := run(t, r, Event{Code: codeA})
	if o.Status != pmix.ErrInit || !slices.Equal(ranNames(o), []string{"closes"}) {
		t.Errorf("%+v", o)
	}
}

func TestRunContext(t *testing.T) {
	r := newTestRegistry(t)
	var pending Done
	mustRegister(t, r, codes(codeA), "waits", func(c *Call, done Done) { pending = done })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Run(ctx, Event{Code: codeA}); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
	pending(pmix.EventNoActionTaken, nil) // the chain ends in the background
}

func TestNotifyWithNothingToRun(t *testing.T) {
	r := newTestRegistry(t)
	mustRegister(t, r, codes(codeB), "b", nil)
	called := 0
	r.Notify(Event{Code: codeA}, func(o Outcome) {
		called++
		if o.Code != codeA || o.Status != pmix.Success || len(o.Ran) != 0 || o.Results != nil {
			t.Errorf("%+v", o)
		}
	})
	if called != 1 {
		t.Errorf("done called %d times, synchronously", called)
	}
	r.Notify(Event{Code: codeA}, nil) // a nil callback is allowed
}

func TestReplay(t *testing.T) {
	r := newTestRegistry(t)
	mustRegister(t, r, codes(codeA), "other", nil)
	id := mustRegister(t, r, codes(codeA), "late", completeWith(pmix.EventPartialActionTaken),
		pmix.NewInfo(pmix.KeyEventAffectedProc, pmix.ProcValue(pmix.Proc{Nspace: "j", Rank: 1})))
	got := make(chan Outcome, 1)
	affected := []pmix.Info{pmix.NewInfo(pmix.KeyEventAffectedProc, pmix.ProcValue(pmix.Proc{Nspace: "j", Rank: pmix.RankWildcard}))}
	if err := r.Replay(id, Event{Code: codeA, Info: affected}, func(o Outcome) { got <- o }); err != nil {
		t.Fatal(err)
	}
	if o := <-got; !slices.Equal(ranNames(o), []string{"late"}) {
		t.Errorf("replay ran %v", ranNames(o))
	}
	if err := r.Replay(id, Event{Code: codeA}, func(o Outcome) { got <- o }); err != nil {
		t.Fatal(err)
	}
	if o := <-got; len(o.Ran) != 0 {
		t.Errorf("replay of a filtered event ran %v", ranNames(o))
	}
	wantStatus(t, r.Replay(99, Event{Code: codeA}, nil), pmix.ErrNotFound)
}

// Many chains at once on one registry, with handlers completing in and out
// of their calls, while registrations come and go. Run with -race.
func TestConcurrentChains(t *testing.T) {
	r := newTestRegistry(t, func(c *Config) { c.Logger = nil })
	const chains = 400
	mustRegister(t, r, nil, "first", nil, first)
	mustRegister(t, r, nil, "last", nil, last)
	for i := range 6 {
		h := noAction
		if i%2 == 1 {
			h = func(c *Call, done Done) { go done(pmix.EventNoActionTaken, []pmix.Info{intInfo(c.Name, 1)}) }
		}
		mustRegister(t, r, codes(codeA), fmt.Sprintf("s%d", i), h)
		mustRegister(t, r, codes(codeA, codeB), fmt.Sprintf("m%d", i), h)
	}

	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Add(1)
	go func() {
		defer churn.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cs := [][]pmix.Status{codes(codeA), codes(codeA, codeB), nil}[i%3]
			id, err := r.Register(cs, []pmix.Info{name(fmt.Sprintf("churn%d", i%5))}, noAction)
			if err == nil {
				r.Deregister(id)
			}
		}
	}()

	var wg sync.WaitGroup
	outcomes := make(chan Outcome, chains)
	for i := range chains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Notify(Event{Code: []pmix.Status{codeA, codeB}[i%2]}, func(o Outcome) { outcomes <- o })
		}()
	}
	wg.Wait()
	for range chains {
		o := <-outcomes
		names := ranNames(o)
		if len(names) < 2 || names[0] != "first" || names[len(names)-1] != "last" {
			t.Fatalf("chain %v", names)
		}
		seen := map[ID]bool{}
		for _, ran := range o.Ran {
			if seen[ran.ID] {
				t.Fatalf("handler %d ran twice: %v", ran.ID, names)
			}
			seen[ran.ID] = true
		}
		wantFixed := 8 // first, last, six multi
		if o.Code == codeA {
			wantFixed += 6
		}
		fixed := 0
		for _, n := range names {
			if !strings.HasPrefix(n, "churn") {
				fixed++
			}
		}
		if fixed != wantFixed {
			t.Fatalf("chain for %v ran %v", o.Code, names)
		}
	}
	close(stop)
	churn.Wait()
}

// Close racing chains whose handlers complete late, early, twice, or never
// (passed over by a real 1ms timeout): every Notify callback runs exactly
// once. Run with -race.
func TestCloseRacesCompletions(t *testing.T) {
	for round := range 20 {
		r := newTestRegistry(t, func(c *Config) { c.Logger = nil; c.DefaultTimeout = time.Millisecond })
		var release sync.WaitGroup
		gate := make(chan struct{})
		mustRegister(t, r, codes(codeA), "sync", nil)
		mustRegister(t, r, codes(codeA), "late", func(c *Call, done Done) {
			release.Add(1)
			go func() {
				defer release.Done()
				<-gate
				done(pmix.EventNoActionTaken, nil)
				done(pmix.EventNoActionTaken, nil)
			}()
		}, appendAt)
		mustRegister(t, r, codes(codeA), "never", func(*Call, Done) {}, appendAt)
		mustRegister(t, r, nil, "quick", func(c *Call, done Done) { go done(pmix.EventNoActionTaken, nil) }, appendAt)

		const chains = 50
		var calls [chains]atomic.Int32
		var all sync.WaitGroup
		all.Add(chains)
		for i := range chains {
			go r.Notify(Event{Code: codeA}, func(o Outcome) {
				if calls[i].Add(1) == 1 {
					all.Done()
				}
			})
		}
		if round%2 == 0 {
			close(gate)
			r.Close()
		} else {
			r.Close()
			close(gate)
		}
		finished := make(chan struct{})
		go func() { all.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: some callbacks never ran", round)
		}
		release.Wait()
		for i := range chains {
			if n := calls[i].Load(); n != 1 {
				t.Fatalf("round %d: chain %d: callback ran %d times", round, i, n)
			}
		}
	}
}
