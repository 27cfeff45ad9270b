package bus

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
)

// Notify runs the chain for ev and returns at once, or after the handlers
// that complete synchronously have run. done is called exactly once with
// the outcome: on the calling goroutine if every handler completed within
// its call (or none matched), otherwise on the goroutine of the last
// asynchronous completion or timeout. A nil done discards the outcome.
//
// The chain runs on a snapshot of the registrations taken now: handlers
// registered while it runs are not called; handlers deregistered before
// their turn are skipped.
//
// The abort event of this process (pmix.EventAbortRequested from
// Config.Self, as a handler's PMIx_Notify_event asks for it in the
// 2016-04-07 minutes) never starts in the middle of this registry's chains:
// notified while chains run, it starts once those chains have ended.
//
// After Close, done is called at once with an Outcome whose Status is
// pmix.ErrInit.
func (r *Registry) Notify(ev Event, done func(Outcome)) {
	if done == nil {
		done = func(Outcome) {}
	}
	if ev.Code == pmix.EventAbortRequested && r.deferOwnAbort(ev, done) {
		return
	}
	r.notify(ev, done)
}

func (r *Registry) notify(ev Event, done func(Outcome)) {
	c := &chain{r: r, ev: ev, done: done}
	if !r.start(c, ev.Code) {
		done(Outcome{Code: ev.Code, Status: pmix.ErrInit})
		return
	}
	c.run()
}

// Replay runs ev through the handler of registration id alone, if its
// filters accept it: the way to deliver a cached event to a late
// registration without running the rest of the chain again. done is called
// as for Notify. It returns an *pmix.Error with pmix.ErrNotFound for an
// unknown id, and ErrClosed after Close; done is not called then.
func (r *Registry) Replay(id ID, ev Event, done func(Outcome)) error {
	if done == nil {
		done = func(Outcome) {}
	}
	c := &chain{r: r, ev: ev, done: done, replay: true}
	r.mu.Lock()
	if r.closed.Load() {
		r.mu.Unlock()
		return ErrClosed
	}
	e, ok := r.byID[id]
	if !ok {
		r.mu.Unlock()
		return pmix.Errorf(pmix.ErrNotFound, "no registration with id %d", id)
	}
	c.steps = []*entry{e}
	r.trackLocked(c)
	r.mu.Unlock()
	c.run()
	return nil
}

// Run is Notify for callers that can wait: it returns the outcome once the
// chain has ended. It returns ctx.Err() if ctx ends first (the chain goes on
// and its outcome is dropped), and ErrClosed, with the outcome so far, if
// the registry was closed before or during the chain.
func (r *Registry) Run(ctx context.Context, ev Event) (Outcome, error) {
	ch := make(chan Outcome, 1)
	r.Notify(ev, func(o Outcome) { ch <- o })
	select {
	case o := <-ch:
		if o.Status == pmix.ErrInit {
			return o, ErrClosed
		}
		return o, nil
	case <-ctx.Done():
		return Outcome{Code: ev.Code}, ctx.Err()
	}
}

// chain is one running notification.
//
// Ownership: the chain's state (everything above mu) belongs to exactly one
// party at a time. The goroutine in run owns it while it walks the steps.
// While a handler's invocation is open, it passes to whichever of the
// handler's done, its timer, or Close first marks the step finished under
// mu; that party records the step and carries the chain on. The step's
// flags are the only state mu guards.
type chain struct {
	r     *Registry
	ev    Event
	view  eventView
	steps []*entry // the snapshot: never modified
	epoch uint64   // registry epoch at start: held entries released later are skipped
	// replay: a Replay chain, which reaches its one entry even if held.
	replay bool
	next   int
	done   func(Outcome)

	info       []pmix.Info // ev.Info plus the resolved flag; copied on write
	resolvedAt int
	results    []pmix.Info // the consolidated results
	spare      []pmix.Info // a free buffer for the next handler's copy
	// owners[i] added results[i]; nil until a termination entry is added.
	owners  []*entry
	pinned  int // required WANT_TERMINATION entries handlers returned
	out     Outcome
	abortBy *entry

	mu      sync.Mutex
	waiting *step // the step whose handler returned without completing

	prevActive, nextActive *chain // the registry's ring of running chains
	// aborts waits for this chain to end (guarded by Registry.mu).
	aborts []*pendingAbort
}

// pendingAbort is an abort event of the registry's own process notified
// while chains ran; it starts when the last of them has ended.
type pendingAbort struct {
	ev      Event
	done    func(Outcome)
	waiting int // chains still running (guarded by Registry.mu)
}

// deferOwnAbort holds ev, an abort event, until the chains running now
// have ended, if it comes from the registry's own process and chains are
// running. It reports whether it held it.
func (r *Registry) deferOwnAbort(ev Event, done func(Outcome)) bool {
	if !sourceInRange(pmix.RangeProcLocal, nil, &ev.Source, &r.self) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return false
	}
	p := &pendingAbort{ev: ev, done: done}
	for c := r.active.nextActive; c != &r.active; c = c.nextActive {
		c.aborts = append(c.aborts, p)
		p.waiting++
	}
	return p.waiting > 0
}

// step is one handler invocation. Its done func and timer refer to it, not
// to the chain's current position, so a late completion finds its own step
// finished and is ignored.
type step struct {
	c       *chain
	e       *entry
	call    Call
	buf     []pmix.Info // the results copy handed to the handler, full capacity
	timeout time.Duration
	// Guarded by c.mu.
	finished bool // recorded: by done, the timer, or Close
	returned bool // the handler returned before completing
	timer    Timer
}

func (r *Registry) trackLocked(c *chain) {
	c.prevActive, c.nextActive = r.active.prevActive, &r.active
	r.active.prevActive.nextActive = c
	r.active.prevActive = c
}

// start takes the snapshot for a chain and records the chain as running, in
// one critical section so that Close sees every chain that started. It
// returns false after Close.
func (r *Registry) start(c *chain, code pmix.Status) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return false
	}
	c.steps = r.planLocked(code)
	c.epoch = r.epoch.Load()
	if len(c.steps) > 0 {
		r.trackLocked(c)
	}
	return true
}

// untrack removes a chain that ended from the running ones, and returns the
// pending aborts that waited for it last.
func (r *Registry) untrack(c *chain) (due []*pendingAbort) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.nextActive == nil {
		return nil
	}
	c.prevActive.nextActive = c.nextActive
	c.nextActive.prevActive = c.prevActive
	c.prevActive, c.nextActive = nil, nil
	for _, p := range c.aborts {
		if p.waiting--; p.waiting == 0 {
			due = append(due, p)
		}
	}
	c.aborts = nil
	return due
}

// prepare reads the event once: its filter view, and the info the handlers
// see, with the resolved flag set to false (2016-04-07 minutes).
func (c *chain) prepare() {
	c.view = newEventView(&c.ev)
	info := make([]pmix.Info, 0, len(c.ev.Info)+1)
	for _, in := range c.ev.Info {
		if in.Key != pmix.KeyEventResolved {
			info = append(info, in)
		}
	}
	c.resolvedAt = len(info)
	c.info = append(info, pmix.NewInfo(pmix.KeyEventResolved, pmix.Bool(false)))
}

// run walks the chain from its current position. Handlers that complete
// within their call are followed in this loop, so a long synchronous chain
// does not grow the stack; the first handler that returns without completing
// ends the loop, and its completion (or timeout) calls run again.
func (c *chain) run() {
	r := c.r
	if c.info == nil {
		c.prepare()
	}
	for {
		e := c.advance()
		if e == nil {
			c.finish()
			return
		}
		if r.closed.Load() {
			c.out.Status = pmix.ErrInit
			c.finish()
			return
		}
		s := &step{c: c, e: e, timeout: e.timeout}
		if s.timeout == 0 {
			s.timeout = r.defaultTimeout
		}
		n := len(c.results)
		s.buf = c.handout()
		s.call = Call{ID: e.id, Name: e.name, Code: c.ev.Code, Source: c.ev.Source.Proc, Info: c.info, Results: s.buf[:n:n]}
		var started time.Time
		if s.timeout > 0 {
			started = r.clock.Now()
		}

		e.h(&s.call, s.complete)

		c.mu.Lock()
		if s.finished { // completed within the call: carry on here
			c.mu.Unlock()
			continue
		}
		s.returned = true
		if r.closed.Load() {
			s.finished = true
			c.recordLost(s, pmix.ErrInit, false)
			c.out.Status = pmix.ErrInit
			c.mu.Unlock()
			c.finish()
			return
		}
		if s.timeout > 0 {
			left := s.timeout - r.clock.Now().Sub(started)
			if left <= 0 {
				s.finished = true
				c.recordLost(s, pmix.ErrTimeout, true)
				c.mu.Unlock()
				c.logTimeout(s)
				continue
			}
			s.timer = r.clock.AfterFunc(left, s.expire)
		}
		c.waiting = s
		c.mu.Unlock()
		return
	}
}

// advance returns the next handler to invoke, or nil at the end of the
// chain or after EventActionComplete.
func (c *chain) advance() *entry {
	if c.out.Completed {
		return nil
	}
	for c.next < len(c.steps) {
		e := c.steps[c.next]
		c.next++
		if (c.replay && !e.removed.Load() || !c.replay && e.activeIn(c.epoch)) && c.view.passes(e.cat, &e.filter, &c.r.self) {
			return e
		}
	}
	return nil
}

// handout returns a copy of the results for the next handler: the spare
// buffer when it is large enough, so that a chain mostly alternates between
// two buffers instead of allocating a copy per handler. The result has
// length len(c.results) and room for the rest of the chain's entries.
func (c *chain) handout() []pmix.Info {
	n := len(c.results)
	buf := c.spare
	c.spare = nil
	if cap(buf) < n+1 {
		// Room for one status entry per handler left; a handler that adds
		// results grows it (a floor of 4 cost a one-handler chain, the
		// fan-out's case, 400 bytes per delivery).
		buf = make([]pmix.Info, n, n+len(c.steps)-c.next+1)
	} else {
		buf = buf[:n]
	}
	copy(buf, c.results)
	return buf
}

// complete is the step's Done.
func (s *step) complete(status pmix.Status, results []pmix.Info) {
	c := s.c
	c.mu.Lock()
	if s.finished {
		c.mu.Unlock()
		c.r.log.Debug("bus: completion ignored: the handler already completed or was passed over",
			"id", s.e.id, "name", s.e.name, "code", c.ev.Code, "status", status)
		return
	}
	s.finished = true
	c.recordCompletion(s, status, results)
	async := s.returned
	if async {
		c.waiting = nil
	}
	t := s.timer
	c.mu.Unlock()
	if async {
		if t != nil {
			t.Stop()
		}
		c.run()
	}
}

// expire passes over a handler that did not complete in time.
func (s *step) expire() {
	c := s.c
	c.mu.Lock()
	if s.finished {
		c.mu.Unlock()
		return
	}
	s.finished = true
	c.waiting = nil
	c.recordLost(s, pmix.ErrTimeout, true)
	c.mu.Unlock()
	c.logTimeout(s)
	c.run()
}

func (c *chain) logTimeout(s *step) {
	c.r.log.Warn("bus: handler timed out; chain moves on",
		"id", s.e.id, "name", s.e.name, "code", c.ev.Code, "timeout", s.timeout)
}

// interrupt ends a chain that waits on a handler, for Close.
func (c *chain) interrupt() {
	c.mu.Lock()
	s := c.waiting
	if s == nil || s.finished {
		c.mu.Unlock()
		return // inside a handler call: run sees the close when it returns
	}
	s.finished = true
	c.waiting = nil
	c.recordLost(s, pmix.ErrInit, false)
	c.out.Status = pmix.ErrInit
	t := s.timer
	c.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	c.finish()
}

// recordCompletion consolidates the handler's copy of the results (see
// consolidate), appends its entry and returned infos, and applies what they
// ask of the chain.
func (c *chain) recordCompletion(s *step, status pmix.Status, returned []pmix.Info) {
	buf := c.consolidate(s.buf)
	buf = c.appendResult(buf, pmix.NewInfo(s.e.key, pmix.StatusValue(status)), s.e)
	for _, in := range returned {
		if in.Key == "" {
			continue
		}
		buf = c.appendResult(buf, in, s.e)
		c.observe(s.e, in)
	}
	c.spare, c.results = c.results, buf
	c.out.Ran = c.appendRan(Ran{ID: s.e.id, Name: s.e.name, Status: status})
	if status == pmix.EventActionComplete {
		c.out.Completed = true
		c.setResolved()
	}
}

// recordLost records a handler that will not complete in this chain. The
// copy it holds is abandoned, since it may still write to it.
func (c *chain) recordLost(s *step, status pmix.Status, timedOut bool) {
	c.results = c.appendResult(c.results, pmix.NewInfo(s.e.key, pmix.StatusValue(status)), s.e)
	c.out.Ran = c.appendRan(Ran{ID: s.e.id, Name: s.e.name, Status: status, TimedOut: timedOut})
}

func (c *chain) appendRan(r Ran) []Ran {
	if c.out.Ran == nil {
		c.out.Ran = make([]Ran, 0, len(c.steps)-c.next+1)
	}
	return append(c.out.Ran, r)
}

// observe applies one returned info to the chain's flow: the abort request
// and the resolved flag. (Termination is read from the array as the chain
// ends.)
func (c *chain) observe(e *entry, in pmix.Info) {
	switch in.Key {
	case pmix.KeyEventAbortRequested:
		if flagSet(in) && c.abortBy == nil {
			c.abortBy = e
		}
	case pmix.KeyEventResolved:
		if flagSet(in) {
			c.setResolved()
		}
	}
}

// setResolved sets the resolved flag for the handlers still to come. The
// info slice is replaced, not written, because earlier handlers may still
// hold the old one.
func (c *chain) setResolved() {
	if c.out.Resolved {
		return
	}
	c.out.Resolved = true
	info := slices.Clone(c.info)
	info[c.resolvedAt].Value = pmix.Bool(true)
	c.info = info
}

// finish delivers the outcome, after raising the abort event if a handler
// asked for it, then starts the abort events that waited for this chain.
// The abort event's own chain never raises another.
func (c *chain) finish() {
	r := c.r
	due := r.untrack(c)
	out := c.out
	out.Code = c.ev.Code
	out.Results = c.results
	out.Termination = c.termination()
	if c.abortBy != nil && c.ev.Code != pmix.EventAbortRequested {
		c.raiseAbort(out)
	} else {
		c.done(out)
	}
	for _, p := range due {
		r.notify(p.ev, p.done)
	}
}

// raiseAbort runs the abort chain, then delivers out with its outcome. (A
// function of its own, so that only chains that abort pay for the closure.)
// The chain that asked has ended, so the abort starts now, whatever other
// chains run.
func (c *chain) raiseAbort(out Outcome) {
	c.r.notify(c.r.abortEvent(c.ev.Code, c.abortBy), func(ab Outcome) {
		out.Abort = &ab
		c.done(out)
	})
}

// abortEvent is the event of the 2016-04-07 minutes' PMIX_ABORT: code
// pmix.EventAbortRequested, from this process (range PROC_LOCAL), affecting
// it, with a text message that says who asked and why.
func (r *Registry) abortEvent(cause pmix.Status, by *entry) Event {
	info := []pmix.Info{pmix.NewInfo(pmix.KeyEventTextMessage,
		pmix.String(fmt.Sprintf("abort requested by handler %s while handling %v", by.describe(), cause)))}
	if !r.self.Proc.IsZero() {
		info = append(info, pmix.NewInfo(pmix.KeyEventAffectedProc, pmix.ProcValue(r.self.Proc)))
	}
	return Event{Code: pmix.EventAbortRequested, Source: r.self, Range: pmix.RangeProcLocal, Info: info}
}
