package bus

import "time"

// Handler timeouts. An invocation that returns without completing waits in
// its registration's queue, in deadline order, until it completes, is
// interrupted by Close, or falls due. Each queue with invocations has one
// timer, armed for its head's deadline: when it fires it passes over every
// invocation that is due and re-arms for the new head. A completion only
// unlinks its invocation (O(1)); the timer, armed for a deadline that may
// have left the queue, finds nothing due then and re-arms. So a registration
// costs one timer firing per timeout period however many invocations it
// waits on, none of them allocates, and a timeout is as precise as the
// Clock's timers: an invocation is passed over when its own deadline's
// timer fires, never later.
//
// Deadlines are durations since the registry's creation (Registry.t0), so
// that a queued invocation costs 8 bytes of time, not a time.Time.

// waitQueue is a registration's invocations waiting on its handler, and
// their timer. Guarded by Registry.tmu.
type waitQueue struct {
	head, tail *step
	timer      Timer         // nil when not armed
	armedFor   time.Duration // the deadline the timer is armed for
	gen        uint64        // counts armings: a stopped timer's late call is stale
}

// since is the registry clock's time since t0. With the real clock it
// reads the monotonic clock alone (time.Since), half the cost of time.Now,
// which reads the wall clock too: an invocation with a timeout reads it
// twice.
func (r *Registry) since() time.Duration {
	if r.realClock {
		return time.Since(r.t0)
	}
	return r.clock.Now().Sub(r.t0)
}

// enqueue puts s, whose handler returned without completing at now, in its
// registration's queue, and arms the queue's timer if its head's deadline
// needs it. It is called with s.c.mu held, so that s is queued before its
// completion can look for it.
func (r *Registry) enqueue(s *step, now time.Duration) {
	e := s.e
	q := &e.waits
	r.tmu.Lock()
	defer r.tmu.Unlock()
	// At the tail, unless an invocation that started earlier (on another
	// goroutine) is queued after s.
	at := q.tail
	for at != nil && at.deadline > s.deadline {
		at = at.prevWait
	}
	s.prevWait = at
	if at == nil {
		s.nextWait, q.head = q.head, s
	} else {
		s.nextWait, at.nextWait = at.nextWait, s
	}
	if s.nextWait == nil {
		q.tail = s
	} else {
		s.nextWait.prevWait = s
	}
	s.queued = true
	if r.timersOff || q.timer != nil && q.armedFor <= q.head.deadline {
		return // Close stopped the timers; or the timer fires in time
	}
	if q.timer != nil {
		q.timer.Stop()
	} else {
		if r.armed == nil {
			r.armed = make(map[*entry]struct{})
		}
		r.armed[e] = struct{}{}
	}
	r.armLocked(e, now)
}

// armLocked arms e's queue timer for its head's deadline.
func (r *Registry) armLocked(e *entry, now time.Duration) {
	q := &e.waits
	q.gen++
	gen := q.gen
	q.armedFor = q.head.deadline
	q.timer = r.clock.AfterFunc(q.armedFor-now, func() { r.expireDue(e, gen) })
}

// dequeue takes s out of its queue, if it is still there.
func (r *Registry) dequeue(s *step) {
	r.tmu.Lock()
	if s.queued {
		r.unlinkLocked(s)
	}
	r.tmu.Unlock()
}

func (r *Registry) unlinkLocked(s *step) {
	q := &s.e.waits
	if s.prevWait == nil {
		q.head = s.nextWait
	} else {
		s.prevWait.nextWait = s.nextWait
	}
	if s.nextWait == nil {
		q.tail = s.prevWait
	} else {
		s.nextWait.prevWait = s.prevWait
	}
	s.prevWait, s.nextWait, s.queued = nil, nil, false
}

// expireDue is e's queue timer: it passes over the invocations that are
// due, and re-arms for the rest. Chains move on from their own goroutines,
// as each had its own timer, except the last, which moves on here.
func (r *Registry) expireDue(e *entry, gen uint64) {
	q := &e.waits
	r.tmu.Lock()
	if q.gen != gen || q.timer == nil {
		r.tmu.Unlock()
		return // stopped and re-armed, or stopped by Close
	}
	now := r.since()
	var due []*step
	for q.head != nil && q.head.deadline <= now {
		s := q.head
		r.unlinkLocked(s)
		due = append(due, s)
	}
	q.timer = nil
	if q.head != nil {
		r.armLocked(e, now)
	} else {
		delete(r.armed, e)
	}
	r.tmu.Unlock()
	for i, s := range due {
		if i < len(due)-1 {
			go s.expire()
		} else {
			s.expire()
		}
	}
}

// stopTimers stops every queue timer, for Close; none is armed after it.
func (r *Registry) stopTimers() {
	r.tmu.Lock()
	defer r.tmu.Unlock()
	r.timersOff = true
	for e := range r.armed {
		e.waits.timer.Stop()
		e.waits.timer = nil
	}
	r.armed = nil
}
