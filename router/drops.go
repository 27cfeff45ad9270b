package router

import "github.com/nats-io/nats.go"

// Events the agent dropped (docs/cache.md). Every Subscription feeds one
// inbox; when a flood outruns the dispatch goroutine, NATS drops what does
// not fit (a slow consumer). A dropped copy of a cached event leaves a gap
// in the sequence, which the next copy reveals and the dispatch fetches
// from the cache (sequence.go); a gap at the tail is looked for here. A
// dropped transient event is lost: no stream holds it.

// SlowConsumer is called by NATS's error handler when a Subscription
// dropped events (once each time one of them starts dropping).
func (r *Router) SlowConsumer(*nats.Subscription) {
	r.CheckTail() // what followed the drop, if no copy came since
}

// checkDrops looks for a gap at the tail if NATS dropped events since the
// last check. The dispatch goroutine calls it before it handles an event
// it found the inbox full for.
func (r *Router) checkDrops() {
	if d := r.dropped(); d != r.dropsSeen {
		r.dropsSeen = d
		r.CheckTail()
	}
}

// droppedByKind counts the events NATS dropped from the Subscriptions of
// transient events, job events and environment events apart; the copies
// of cached events are counted apart (Stats.CopiesDropped).
func (r *Router) droppedByKind() (job, env uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	job, env = r.stats.droppedJobGone.Load(), r.stats.droppedEnvGone.Load()
	for subj, sub := range r.subs {
		d, err := sub.Dropped()
		if err != nil {
			continue
		}
		if r.scopes[subj].IsEnvironment() {
			env += uint64(d)
		} else {
			job += uint64(d)
		}
	}
	return job, env
}
