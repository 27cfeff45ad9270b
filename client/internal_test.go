package client

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
)

const codeX = pmix.ExternalErrBase - 1

func named(n string, more ...pmix.Info) []pmix.Info {
	return append([]pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String(n))}, more...)
}

var appendAt = pmix.NewInfo(pmix.KeyEventHdlrAppend, pmix.Bool(true))

// mustRegister registers h under name for codes.
func mustRegister(t *testing.T, c *Client, codes []pmix.Status, info []pmix.Info, h bus.Handler) {
	t.Helper()
	if _, err := c.RegisterEventHandler(t.Context(), codes, info, h); err != nil {
		t.Fatal(err)
	}
}

// recordTo returns a handler that sends its name on ch and completes.
func recordTo(ch chan<- string) bus.Handler {
	return func(call *bus.Call, done bus.Done) {
		ch <- call.Name
		done(pmix.EventNoActionTaken, nil)
	}
}

func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(waitTime):
		t.Fatal("no handler ran")
		return ""
	}
}

// none checks that nothing is on ch by now.
func none(t *testing.T, ch <-chan string) {
	t.Helper()
	select {
	case s := <-ch:
		t.Fatalf("%s ran", s)
	default:
	}
}

// TestLocalChainTimeout: the client's own chains pass over a handler that
// never completes, after the same default as the agent's chains
// (bus.DefaultHandlerTimeout) or WithHandlerTimeout's.
func TestLocalChainTimeout(t *testing.T) {
	_, c := startFakeAgent(t)
	if c.handlerTimeout != bus.DefaultHandlerTimeout {
		t.Fatalf("default local handler timeout %v, want bus.DefaultHandlerTimeout (%v)", c.handlerTimeout, bus.DefaultHandlerTimeout)
	}
	if _, err := Init(t.Context(), WithEnv(map[string]string{}), WithHandlerTimeout(-time.Second)); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("negative timeout: %v", err)
	}

	_, c = startFakeAgent(t, WithHandlerTimeout(50*time.Millisecond))
	ran := make(chan string, 4)
	mustRegister(t, c, []pmix.Status{codeX}, named("silent"), func(call *bus.Call, _ bus.Done) { ran <- call.Name })
	mustRegister(t, c, []pmix.Status{codeX}, named("next", appendAt), recordTo(ran))
	ctx, cancel := context.WithTimeout(t.Context(), waitTime)
	defer cancel()
	if err := c.NotifyEvent(ctx, codeX, pmix.RangeProcLocal, nil); err != nil {
		t.Fatalf("the local chain stalled on a silent handler: %v", err)
	}
	if a, b := next(t, ran), next(t, ran); a != "silent" || b != "next" {
		t.Fatalf("ran %s, %s", a, b)
	}
}

// TestFailedComm: a frame from the agent that cannot be decoded raises
// PMIX_ERR_COMM_FAILURE (RFC0002's PMIX_ERR_FAILED_COMM) in the client's
// own handlers; the connection goes on when the stream is still in step,
// and ends (PMIX_ERR_LOST_CONNECTION) when it is not.
func TestFailedComm(t *testing.T) {
	a, c := startFakeAgent(t)
	ran := make(chan string, 8)
	mustRegister(t, c, []pmix.Status{pmix.FailedComm}, named("failed-comm"), recordTo(ran))
	mustRegister(t, c, []pmix.Status{pmix.LostServerConnection}, named("lost"), recordTo(ran))
	mustRegister(t, c, []pmix.Status{codeX}, named("x"), recordTo(ran))

	a.garble()
	if got := next(t, ran); got != "failed-comm" {
		t.Fatalf("%s ran", got)
	}
	// Still attached: a request gets its reply, an invoke its answer.
	if err := c.NotifyEvent(t.Context(), codeX, pmix.RangeGlobal, nil); err != nil {
		t.Fatalf("notify after a bad frame: %v", err)
	}
	if f := a.invoke("x", codeX); f.Status != pmix.EventNoActionTaken {
		t.Fatalf("invoke after a bad frame: %+v", f)
	}
	if got := next(t, ran); got != "x" {
		t.Fatalf("%s ran", got)
	}
	none(t, ran)

	a.oversize()
	if got := next(t, ran); got != "failed-comm" {
		t.Fatalf("%s ran", got)
	}
	if got := next(t, ran); got != "lost" {
		t.Fatalf("%s ran", got)
	}
	select {
	case <-c.Lost():
	case <-time.After(waitTime):
		t.Fatal("connection not ended")
	}
}

// TestAbortFromRunningHandler: a handler that notifies the abort event
// PROC_LOCAL before it completes gets the abort added to its results (so
// the chain's registry raises it when the chain ends) and no abort chain
// runs meanwhile; outside handlers, the abort chain runs at once.
func TestAbortFromRunningHandler(t *testing.T) {
	a, c := startFakeAgent(t, WithHandlerTimeout(time.Second))
	ran := make(chan string, 8)
	abort := func(t *testing.T) {
		t.Helper()
		if err := c.NotifyEvent(t.Context(), pmix.EventAbortRequested, pmix.RangeProcLocal, nil); err != nil {
			t.Error(err)
		}
	}
	mustRegister(t, c, []pmix.Status{pmix.EventAbortRequested}, named("aborter"), recordTo(ran))
	mustRegister(t, c, []pmix.Status{codeX}, named("asks"), func(call *bus.Call, done bus.Done) {
		ran <- call.Name
		abort(t)
		done(pmix.EventPartialActionTaken, []pmix.Info{pmix.NewInfo("mine", pmix.Int32(1))})
	})
	mustRegister(t, c, []pmix.Status{codeX}, named("after", appendAt), recordTo(ran))

	t.Run("invoked by the agent", func(t *testing.T) {
		f := a.invoke("asks", codeX)
		if got := next(t, ran); got != "asks" {
			t.Fatalf("%s ran", got)
		}
		none(t, ran) // not the aborter: the agent raises it after the chain
		want := []pmix.Info{pmix.NewInfo("mine", pmix.Int32(1)), pmix.NewInfo(pmix.KeyEventAbortRequested, pmix.Bool(true))}
		if !pmix.InfosEqual(f.Results, want) {
			t.Fatalf("results %v, want %v", pmix.FormatInfos(f.Results), pmix.FormatInfos(want))
		}
	})
	t.Run("in a local chain", func(t *testing.T) {
		if err := c.NotifyEvent(t.Context(), codeX, pmix.RangeProcLocal, nil); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"asks", "after", "aborter"} {
			if got := next(t, ran); got != want {
				t.Fatalf("%s ran, want %s", got, want)
			}
		}
	})
	t.Run("outside handlers", func(t *testing.T) {
		abort(t)
		if got := next(t, ran); got != "aborter" {
			t.Fatalf("%s ran", got)
		}
	})
	t.Run("a handler passed over is not running", func(t *testing.T) {
		mustRegister(t, c, []pmix.Status{codeX - 1}, named("hangs"), func(*bus.Call, bus.Done) {})
		a.send("hangs", codeX-1)
		running := func() int { c.mu.Lock(); defer c.mu.Unlock(); return c.running.n }
		waitUntil(t, "the handler runs", func() bool { return running() == 1 })
		// As if its timeout (the client's default, which the agent is
		// assumed to share) had passed: the agent has moved on, so the
		// abort runs now.
		c.mu.Lock()
		for inv := range c.running.all {
			inv.started -= time.Hour
		}
		c.mu.Unlock()
		abort(t)
		if got := next(t, ran); got != "aborter" {
			t.Fatalf("%s ran", got)
		}
		if running() != 0 {
			t.Error("the passed-over invocation is still recorded")
		}
	})
}

// TestInvocations: the running list holds what was added and not removed,
// in order; removing twice, or while walking it, is harmless.
func TestInvocations(t *testing.T) {
	var l invocations
	inv := make([]invocation, 5)
	for i := range inv {
		inv[i].local = bus.ID(i)
		l.add(&inv[i])
	}
	l.remove(&inv[1])
	l.remove(&inv[1])
	for v := range l.all {
		if v.local == 2 {
			l.remove(v)
		}
	}
	var got []bus.ID
	for v := range l.all {
		got = append(got, v.local)
	}
	if !slices.Equal(got, []bus.ID{0, 3, 4}) || l.n != 3 {
		t.Fatalf("list holds %v (n %d), want [0 3 4]", got, l.n)
	}
	for i := range inv {
		l.remove(&inv[i])
	}
	for v := range l.all {
		t.Fatalf("%d left in an emptied list", v.local)
	}
	if l.n != 0 {
		t.Fatalf("n %d", l.n)
	}
}
