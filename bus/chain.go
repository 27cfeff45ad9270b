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
	if r.ownAbort(&ev) && r.deferOwnAbort(ev, done) {
		return
	}
	r.notify(ev, done)
}

func (r *Registry) notify(ev Event, done func(Outcome)) {
	c := &chain{r: r, p: Prepare(ev), done: done}
	if !r.start(c, ev.Code) {
		done(Outcome{Code: ev.Code, Status: pmix.ErrInit})
		return
	}
	c.run()
}

// Prepared is an event read once for delivery to many registries: the
// filters' view of it and the info its handlers see, with the resolved flag
// false (see Call.Info). Chains share it read-only; a chain that sets the
// resolved flag works on its own copy of the info from then on, so the flag
// one registry's handler sets never reaches another registry's chain. An
// agent prepares each event once and starts it in every client's registry.
type Prepared struct {
	ev         Event
	view       eventView // of ev
	info       []pmix.Info
	resolvedAt int // index of the resolved flag in info
}

// Prepare reads ev for Start. The caller must not modify ev.Info
// afterwards.
func Prepare(ev Event) *Prepared {
	p := &Prepared{ev: ev}
	p.view = newEventView(&p.ev)
	info := make([]pmix.Info, 0, len(ev.Info)+1)
	for _, in := range ev.Info {
		if in.Key != pmix.KeyEventResolved {
			info = append(info, in)
		}
	}
	p.resolvedAt = len(info)
	p.info = append(info, pmix.NewInfo(pmix.KeyEventResolved, pmix.Bool(false)))
	return p
}

// Event returns the prepared event.
func (p *Prepared) Event() Event { return p.ev }

// Chain is a chain that Start found wants to run: Run runs it.
type Chain struct{ c chain }

// Start is Wants and Notify in one, for an event prepared once for many
// registries: it returns the chain of ev, its snapshot taken now, when it
// would invoke at least one handler, and nil when it would invoke none or
// the registry is closed. A non-nil chain must be run with Run, once (until
// then it counts as running, for Close and for the abort event's wait).
func (r *Registry) Start(ev *Prepared) *Chain {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.snapshotLocked(ev)
	if !ok {
		return nil
	}
	return r.startFromLocked(ev, s)
}

// Snapshot is a chain's snapshot taken without starting it: the handlers
// of its code in order, and the registrations active then. It holds no
// chain state (a slice the registry never modifies and two integers), so
// a caller that cannot run every chain at once can keep many of them
// cheaply, one per waiting event, and start each later with StartFrom.
type Snapshot struct {
	steps []*entry
	epoch uint64
	first int // the first step that wanted the event
}

// Snapshot takes the snapshot a chain of ev started now would run on,
// and reports whether such a chain would invoke at least one handler (as
// Start, which is Snapshot and StartFrom in one). It is false after Close.
func (r *Registry) Snapshot(ev *Prepared) (Snapshot, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snapshotLocked(ev)
}

// StartFrom returns the chain of ev on snapshot s, which Snapshot took
// for ev: the chain runs as if it had started then — registrations made
// or released since are not in it, and those deregistered since are
// skipped, as in any chain that has not reached them yet. It returns nil
// after Close. A non-nil chain must be run with Run, once; it counts as
// running from StartFrom on, not from Snapshot.
func (r *Registry) StartFrom(ev *Prepared, s Snapshot) *Chain {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return nil
	}
	return r.startFromLocked(ev, s)
}

// SnapshotSince is Snapshot restricted to the registrations active from
// epoch from on (released at or after stamp from by ReleaseAt): the chain
// an event owes the registrations that came after a chain of it ran
// already. Start it with StartFrom.
func (r *Registry) SnapshotSince(ev *Prepared, from uint64) (Snapshot, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.snapshotLocked(ev)
	if !ok || from == 0 {
		return s, ok
	}
	var steps []*entry
	for _, e := range s.steps[s.first:] {
		if a := e.activeFrom.Load(); a >= from && a <= s.epoch {
			steps = append(steps, e)
		}
	}
	for i, e := range steps {
		if e.activeIn(s.epoch) && ev.view.passes(e.cat, &e.filter, &r.self) {
			return Snapshot{steps: steps, epoch: s.epoch, first: i}, true
		}
	}
	return Snapshot{}, false
}

func (r *Registry) snapshotLocked(ev *Prepared) (Snapshot, bool) {
	if r.closed.Load() {
		return Snapshot{}, false
	}
	steps := r.planLocked(ev.ev.Code)
	epoch := r.epoch.Load()
	for i, e := range steps {
		if e.activeIn(epoch) && ev.view.passes(e.cat, &e.filter, &r.self) {
			return Snapshot{steps: steps, epoch: epoch, first: i}, true
		}
	}
	return Snapshot{}, false
}

func (r *Registry) startFromLocked(ev *Prepared, s Snapshot) *Chain {
	ch := &Chain{c: chain{r: r, p: ev, steps: s.steps, epoch: s.epoch, next: s.first}}
	if !r.ownAbort(&ev.ev) {
		r.trackLocked(&ch.c)
	}
	return ch
}

// Run runs a chain Start returned, as Notify does: done (which may be nil)
// is called exactly once with the outcome.
func (ch *Chain) Run(done func(Outcome)) {
	c := &ch.c
	if done == nil {
		done = func(Outcome) {}
	}
	if c.nextActive == nil { // this process's abort event: Notify holds it
		c.r.Notify(c.p.ev, done)
		return
	}
	c.done = done
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
	c := &chain{r: r, p: Prepare(ev), done: done, replay: true}
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
// Ownership: the chain's state (everything above mu, and the storage after
// the ring) belongs to exactly one party at a time. The goroutine in run
// owns it while it walks the steps. While a handler's invocation is open,
// it passes to whichever of the handler's done, its timeout, or Close first
// marks the step finished under mu; that party records the step and
// carries the chain on. The step's flags are the only state mu guards.
type chain struct {
	r     *Registry
	p     *Prepared // shared with other registries' chains: read only
	steps []*entry  // the snapshot: never modified
	epoch uint64    // registry epoch at start: held entries released later are skipped
	next  int
	done  func(Outcome)

	results             []pmix.Info // the consolidated results
	ran                 []Ran       // Outcome.Ran
	status              pmix.Status // Outcome.Status
	completed, resolved bool        // Outcome.Completed, Outcome.Resolved
	// replay: a Replay chain, which reaches its one entry even if held.
	replay   bool
	res0Used bool // res0 was handed out
	x        *chainRare

	mu      sync.Mutex
	waiting *step // the step whose handler returned without completing

	prevActive, nextActive *chain // the registry's ring of running chains
	// aborts waits for this chain to end (guarded by Registry.mu).
	aborts *[]*pendingAbort

	// The storage of the first invocation, of Outcome.Ran and of the
	// results for a chain of one handler, the agent's usual case, so that
	// it costs one allocation.
	first step
	ran0  [1]Ran
	res0  [1]pmix.Info
}

// chainRare is the state that only some chains need: of more than one
// handler, or whose handlers resolve the event or ask for termination or
// an abort. (Kept out of the chain so that a one-handler chain fits the
// 512-byte size class.)
type chainRare struct {
	info  []pmix.Info // the chain's own copy of p.info, once setResolved made it
	spare []pmix.Info // a free buffer for the next handler's copy

	// owners[i] added results[i]; nil until a termination entry is added.
	owners  []*entry
	pinned  int // required WANT_TERMINATION entries handlers returned
	abortBy *entry
}

// info is the info the chain's handlers get: the prepared event's, until
// the chain sets the resolved flag.
func (c *chain) info() []pmix.Info {
	if c.x != nil && c.x.info != nil {
		return c.x.info
	}
	return c.p.info
}

// rare returns the chain's chainRare, making it if need be.
func (c *chain) rare() *chainRare {
	if c.x == nil {
		c.x = &chainRare{}
	}
	return c.x
}

// pendingAbort is an abort event of the registry's own process notified
// while chains ran; it starts when the last of them has ended.
type pendingAbort struct {
	ev      Event
	done    func(Outcome)
	waiting int // chains still running (guarded by Registry.mu)
}

// ownAbort reports whether ev is the abort event of the registry's own
// process.
func (r *Registry) ownAbort(ev *Event) bool {
	return ev.Code == pmix.EventAbortRequested && sourceInRange(pmix.RangeProcLocal, nil, &ev.Source, &r.self)
}

// deferOwnAbort holds ev, an abort event, until the chains running now
// have ended, if chains are running. It reports whether it held it. ev
// comes from the registry's own process (ownAbort).
func (r *Registry) deferOwnAbort(ev Event, done func(Outcome)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return false
	}
	p := &pendingAbort{ev: ev, done: done}
	for c := r.active.nextActive; c != &r.active; c = c.nextActive {
		if c.aborts == nil {
			c.aborts = new([]*pendingAbort)
		}
		*c.aborts = append(*c.aborts, p)
		p.waiting++
	}
	return p.waiting > 0
}

// step is one handler invocation. Its done func and its place in the
// timeout queue refer to it, not to the chain's current position, so a late
// completion finds its own step finished and is ignored.
type step struct {
	c    *chain
	e    *entry
	call Call
	buf  []pmix.Info // the results copy handed to the handler, full capacity
	// Guarded by c.mu.
	finished bool // recorded: by done, the timer, or Close
	returned bool // the handler returned before completing
	// The timeout queue of the registration (see timeout.go); guarded by
	// Registry.tmu.
	queued             bool
	deadline           time.Duration // since Registry.t0
	prevWait, nextWait *step
}

// timeout is how long the step's handler may take; 0 for no limit.
func (s *step) timeout() time.Duration {
	if s.e.timeout != 0 {
		return s.e.timeout
	}
	return s.c.r.defaultTimeout
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
	if c.aborts != nil {
		for _, p := range *c.aborts {
			if p.waiting--; p.waiting == 0 {
				due = append(due, p)
			}
		}
		c.aborts = nil
	}
	return due
}

// run walks the chain from its current position. Handlers that complete
// within their call are followed in this loop, so a long synchronous chain
// does not grow the stack; the first handler that returns without completing
// ends the loop, and its completion (or timeout) calls run again.
func (c *chain) run() {
	r := c.r
	for {
		e := c.advance()
		if e == nil {
			c.finish()
			return
		}
		if r.closed.Load() {
			c.status = pmix.ErrInit
			c.finish()
			return
		}
		s := &c.first
		if s.c == nil {
			*s = step{c: c, e: e}
		} else {
			s = &step{c: c, e: e}
		}
		timeout := s.timeout()
		n := len(c.results)
		s.buf = c.handout()
		s.call = Call{ID: e.id, Name: e.name, Code: c.p.ev.Code, Source: c.p.ev.Source.Proc, Info: c.info(), Results: s.buf[:n:n]}
		var started time.Duration
		if timeout > 0 {
			started = r.since()
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
			c.status = pmix.ErrInit
			c.mu.Unlock()
			c.finish()
			return
		}
		if timeout > 0 {
			s.deadline = started + timeout
			now := r.since()
			if now >= s.deadline {
				s.finished = true
				c.recordLost(s, pmix.ErrTimeout, true)
				c.mu.Unlock()
				c.logTimeout(s)
				continue
			}
			r.enqueue(s, now)
		}
		c.waiting = s
		c.mu.Unlock()
		return
	}
}

// advance returns the next handler to invoke, or nil at the end of the
// chain or after EventActionComplete.
func (c *chain) advance() *entry {
	if c.completed {
		return nil
	}
	for c.next < len(c.steps) {
		e := c.steps[c.next]
		c.next++
		if (c.replay && !e.removed.Load() || !c.replay && e.activeIn(c.epoch)) && c.p.view.passes(e.cat, &e.filter, &c.r.self) {
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
	var buf []pmix.Info
	if c.x != nil {
		buf, c.x.spare = c.x.spare, nil
	}
	if n == 0 && !c.res0Used && len(c.steps) == c.next {
		// The last handler, with no results so far: the chain's own
		// storage, which is all a one-handler chain needs.
		c.res0Used = true
		buf = c.res0[:0]
	} else if cap(buf) < n+1 {
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
			"id", s.e.id, "name", s.e.name, "code", c.p.ev.Code, "status", status)
		return
	}
	s.finished = true
	c.recordCompletion(s, status, results)
	async := s.returned
	if async {
		c.waiting = nil
	}
	c.mu.Unlock()
	if async {
		if s.timeout() > 0 {
			c.r.dequeue(s)
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
		"id", s.e.id, "name", s.e.name, "code", c.p.ev.Code, "timeout", s.timeout())
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
	c.status = pmix.ErrInit
	c.mu.Unlock()
	if s.timeout() > 0 {
		c.r.dequeue(s)
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
	if c.results != nil {
		c.rare().spare = c.results
	}
	c.results = buf
	c.appendRan(Ran{ID: s.e.id, Name: s.e.name, Status: status})
	if status == pmix.EventActionComplete {
		c.completed = true
		c.setResolved()
	}
}

// recordLost records a handler that will not complete in this chain. The
// copy it holds is abandoned, since it may still write to it.
func (c *chain) recordLost(s *step, status pmix.Status, timedOut bool) {
	c.results = c.appendResult(c.results, pmix.NewInfo(s.e.key, pmix.StatusValue(status)), s.e)
	c.appendRan(Ran{ID: s.e.id, Name: s.e.name, Status: status, TimedOut: timedOut})
}

func (c *chain) appendRan(r Ran) {
	if c.ran == nil {
		if left := len(c.steps) - c.next + 1; left > 1 {
			c.ran = make([]Ran, 0, left)
		} else {
			c.ran = c.ran0[:0]
		}
	}
	c.ran = append(c.ran, r)
}

// observe applies one returned info to the chain's flow: the abort request
// and the resolved flag. (Termination is read from the array as the chain
// ends.)
func (c *chain) observe(e *entry, in pmix.Info) {
	switch in.Key {
	case pmix.KeyEventAbortRequested:
		if flagSet(in) && (c.x == nil || c.x.abortBy == nil) {
			c.rare().abortBy = e
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
	if c.resolved {
		return
	}
	c.resolved = true
	info := slices.Clone(c.info())
	info[c.p.resolvedAt].Value = pmix.Bool(true)
	c.rare().info = info
}

// finish delivers the outcome, after raising the abort event if a handler
// asked for it, then starts the abort events that waited for this chain.
// The abort event's own chain never raises another.
func (c *chain) finish() {
	r := c.r
	due := r.untrack(c)
	out := Outcome{
		Code: c.p.ev.Code, Status: c.status, Results: c.results,
		Completed: c.completed, Resolved: c.resolved,
		Termination: c.termination(), Ran: c.ran,
	}
	if c.x != nil && c.x.abortBy != nil && c.p.ev.Code != pmix.EventAbortRequested {
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
	c.r.notify(c.r.abortEvent(c.p.ev.Code, c.x.abortBy), func(ab Outcome) {
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
