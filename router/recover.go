package router

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/subjects"
)

// Recovering the job events NATS dropped (docs/cache.md, "Events the agent
// dropped"). Every Subscription feeds the one inbox; when it is full NATS
// drops what arrives (a slow consumer). Cacheable job events are in the
// cache, so the router reads them back and runs those it never received
// through the chains of the clients they are for:
//
//  1. The dispatch goroutine pauses: from the first event it takes from a
//     full inbox after NATS counted a drop, it decodes what arrives and
//     keeps it, in order (pending), instead of running chains. A drop
//     happens only while the inbox is full, so an event that arrived after
//     a dropped one is never run before the pause.
//  2. A goroutine of the router's fixes the events stream's read point (a
//     barrier, as a replay does) and sends a fence to the inbox; every
//     event the read can return that also reached the agent live is ahead
//     of it, so once the fence is back, each such event has been received
//     (its id is remembered) or was dropped. Then it fixes the job-events
//     stream's read point: publishers have sent the copies of the events
//     read by then (jetstream.ReplayOptions.JobsAfterMarked).
//  3. It reads the job events of the attached clients' scopes past the
//     anchor by direct get, oldest first, and hands them to the dispatch goroutine, which
//     merges them with pending: an event that is pending runs in its place,
//     after the pending events before it; one it remembers receiving is
//     skipped; one it does not is recovered, and runs the chains there.
//     Skipped too: events at or below the anchor (the cache's read point
//     when the agent started, then each round's), accounted for already;
//     once more than receivedIDs job events came since the anchor, events
//     older than the first one it remembers (it cannot tell them from
//     events it received and forgot); and events it replayed to a new
//     registration.
//  4. When the read is done, another round reads again if NATS dropped
//     more meanwhile; else the rest of pending runs and the pause ends. An
//     event recovered before it came live is dropped when it comes.
//
// So each cacheable job event runs a client's chain once, in the order
// received, if one of the streams still holds it when it is read: the
// events stream keeps the last --event-cache-size events, the job-events
// stream only those retained for a client of the job not attached yet
// (docs/cache.md). Transient events (PMIX_EVENT_DO_NOT_CACHE) and
// environment events are not recovered. The error handler of the NATS
// connection only makes the dispatch goroutine check for drops.

const (
	// receivedIDs is how many job events the router remembers receiving:
	// the window in which a dropped one can be told apart.
	receivedIDs = 1 << 16
	// maxPending bounds the events a recovery holds back; beyond it the
	// pause ends, and what is recovered comes after what overtook it.
	maxPending = 1 << 17
	// roundTimeout bounds one round of a recovery.
	roundTimeout = time.Minute
)

// readPoint is a point in the cache's streams: for anchor, everything at
// or below it was received, recovered, or is lost.
type readPoint struct {
	events, jobs uint64
	known        bool
}

// accounts reports whether c is at or below p.
func (p readPoint) accounts(c cachedEvent) bool {
	if !p.known {
		return false
	}
	if c.cp {
		return c.seq <= p.jobs
	}
	return c.seq <= p.events
}

// recovery is a recovery under way: one round, or more while events are
// still being dropped. Only the dispatch goroutine touches it.
type recovery struct {
	seq         string        // names the current round's fence
	fenced      chan struct{} // closed when it is back
	dropsAt     uint64        // dropped() when the round began
	pending     []pendingMsg
	pendingIDs  map[string]int // index in pending
	next        int            // pending[:next] has run
	paused      bool           // pending holds what arrives
	horizon     bool           // this round met a remembered event: what follows and is not remembered was dropped
	addsAtFence uint64         // received.adds when the round's fence was back
	read        readPoint      // the round's read point, once read to the end
}

// pendingMsg is what arrived during a recovery: a decoded event, or a
// fence (msg).
type pendingMsg struct {
	msg *nats.Msg
	sc  subjects.Scope
	m   *event.Message
}

// recoveryState counts recoveries, for Agent.Stats.
type recoveryState struct {
	recovered atomic.Uint64 // job events recovered
	rounds    atomic.Uint64 // recovery rounds done
}

// slowConsumer is called by NATS's error handler when a Subscription
// dropped events (once each time one of them starts dropping): the
// dispatch goroutine checks, as it does whenever it finds the inbox full.
func (r *Router) SlowConsumer(*nats.Subscription) {
	if r.seq != nil {
		r.CheckTail() // what followed the drop, if no copy came since
		return
	}
	r.post(r.checkDrops)
}

// checkDrops starts a recovery if NATS dropped events since the last
// check. The dispatch goroutine calls it before it handles an event it
// found the inbox full for: a drop happens only then, so an event that
// arrived after one is never handled before the pause begins. (While a
// recovery runs, its rounds check.)
func (r *Router) checkDrops() {
	d := r.dropped()
	if d == r.dropsSeen || r.recov != nil {
		return
	}
	if r.seq != nil {
		// The next copy shows the gap; the tail is checked.
		r.dropsSeen = d
		r.CheckTail()
		return
	}
	r.dropsSeen = d
	if !r.dropBurst {
		r.dropBurst = true
		job, env := r.droppedByKind()
		r.log.Warn("the agent is not keeping up: NATS is dropping events from its inbox; job events are recovered from the cache, environment events are lost",
			"job_dropped_total", job, "environment_dropped_total", env)
	}
	rc := &recovery{pendingIDs: map[string]int{}, paused: true}
	r.recov = rc
	r.startRound(rc)
}

// startRound starts a round of rc's: its read, on a goroutine of its own.
func (r *Router) startRound(rc *recovery) {
	rc.seq = "r" + strconv.FormatUint(r.holdSeq.Add(1), 10)
	rc.fenced = make(chan struct{})
	rc.dropsAt = r.dropped()
	rc.horizon = false
	// What is at or below the anchor is accounted for: not read again.
	seq, fenced, after := rc.seq, rc.fenced, r.anchor
	if !r.host.GoFunc(func() { r.recoverRound(rc, seq, fenced, after) }) {
		r.endRecovery(rc)
	}
}

// recoverRound reads the cache for a round of rc (see the top of this
// file) and has the dispatch goroutine merge it, a batch at a time.
func (r *Router) recoverRound(rc *recovery, seq string, fenced chan struct{}, after readPoint) {
	ctx, cancel := context.WithTimeout(context.Background(), roundTimeout)
	defer cancel()
	var read readPoint
	defer func() { r.post(func() { rc.read = read; r.roundDone(rc) }) }()
	r.rec.rounds.Add(1)
	filters, jobFilters := r.jobFilters()
	if len(filters) == 0 {
		return
	}
	events, jobs, err := r.cache.readJobEvents(ctx, filters, jobFilters, after, func() error {
		return r.awaitRecoveryFence(ctx, seq, fenced)
	}, func(b []cachedEvent) error {
		done := make(chan struct{})
		r.post(func() { r.mergeRecovered(rc, b); close(done) })
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-r.done: // the dispatch goroutine is gone
			return context.Canceled
		}
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		r.log.Warn("recovering dropped job events from the cache; those not read are lost", "err", err)
	}
	if err == nil {
		read = readPoint{events: events, jobs: jobs, known: true}
	}
}

// roundDone runs on the dispatch goroutine when a round's read is over: if
// events were dropped meanwhile, another round reads again, the pause
// going on; else what is pending runs and the recovery ends.
func (r *Router) roundDone(rc *recovery) {
	if r.recov != rc {
		return
	}
	if rc.read.known {
		// Every event at or below the read point was ahead of the fence:
		// received, or merged since.
		r.anchor, r.anchorAdds = rc.read, rc.addsAtFence
	}
	d := r.dropped()
	if d != rc.dropsAt && rc.paused && !r.isDone() {
		r.startRound(rc)
		return
	}
	r.dropsSeen = d // a drop since makes the next check start another recovery
	r.endRecovery(rc)
}

// endRecovery runs what is still pending and ends the pause; a burst of
// drops that is over is summed up in the log.
func (r *Router) endRecovery(rc *recovery) {
	if r.recov != rc {
		return
	}
	r.recov = nil
	r.runPending(rc, len(rc.pending))
	if r.dropBurst {
		r.dropBurst = false
		job, env := r.droppedByKind()
		r.log.Warn("the agent caught up after dropping events",
			"job_dropped_total", job, "job_recovered_total", r.rec.recovered.Load(), "environment_dropped_total", env)
	}
}

func (r *Router) isDone() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// jobFilters are the cached job-event subjects of every attached client's
// scopes, in the events stream and the job-events stream.
func (r *Router) jobFilters() (filters, jobFilters []string) {
	seen := map[string]bool{}
	for _, rc := range r.host.Recipients() {
		proc, session, _, ok := rc.Target()
		if !ok {
			continue
		}
		for _, sc := range event.ClientScopes(r.place, proc.Nspace, session) {
			p := sc.CachedWildcard()
			if !seen[p] {
				seen[p] = true
				filters = append(filters, p)
				jobFilters = append(jobFilters, subjects.JobCacheSubject(string(r.place.Cluster), p))
			}
		}
	}
	return filters, jobFilters
}

// awaitRecoveryFence sends a round's fence and waits until it is back, sending
// it again every refenceInterval (a fence can be dropped like an event).
func (r *Router) awaitRecoveryFence(ctx context.Context, seq string, fenced chan struct{}) error {
	send := func() { _ = r.nc.PublishMsg(&nats.Msg{Subject: r.fenceSubj, Data: []byte(seq)}) }
	if err := r.ensureFenceSub(); err != nil {
		return err
	}
	send()
	again := time.NewTicker(refenceInterval)
	defer again.Stop()
	for {
		select {
		case <-fenced:
			return nil
		case <-again.C:
			send()
		case <-ctx.Done():
			return ctx.Err()
		case <-r.done:
			return context.Canceled
		}
	}
}

// Below, on the dispatch goroutine.

// take keeps what arrives while rc is paused, and reports whether it did.
func (rc *recovery) take(p pendingMsg) bool {
	if rc == nil || !rc.paused {
		return false
	}
	if p.m != nil {
		rc.pendingIDs[p.m.ID] = len(rc.pending)
	}
	rc.pending = append(rc.pending, p)
	return true
}

// recoveryFenced handles a fence of a recovery; false if seq names none.
func (r *Router) recoveryFenced(seq string) bool {
	rc := r.recov
	if rc == nil || rc.seq != seq {
		return len(seq) > 0 && seq[0] == 'r' // a recovery's, sent again or late
	}
	select {
	case <-rc.fenced:
	default:
		rc.addsAtFence = r.received.adds
		close(rc.fenced)
	}
	return true
}

// mergeRecovered merges a batch of cached job events with what is pending
// (see the top of this file).
func (r *Router) mergeRecovered(rc *recovery, b []cachedEvent) {
	if r.recov != rc {
		return
	}
	for _, c := range b {
		if i, ok := rc.pendingIDs[c.m.ID]; ok {
			rc.horizon = true
			r.runPending(rc, i+1)
			continue
		}
		if r.received.has(c.m.ID) {
			rc.horizon = true
			continue
		}
		// Every job event received since the anchor is remembered while
		// fewer than receivedIDs came; else only those after the first
		// one remembered are.
		remembered := r.anchor.known && r.received.adds-r.anchorAdds <= receivedIDs
		if r.anchor.accounts(c) || !(remembered || rc.horizon) || c.sc.IsEnvironment() || r.replayedIDs.has(c.m.ID) {
			// Accounted for by an earlier round, or before the agent
			// started; older than what it remembers; not recoverable;
			// or replayed to a new registration (published before it
			// subscribed, so never on its way live).
			continue
		}
		r.received.add(c.m.ID)
		if r.deliver(c.sc, c.m) > 0 {
			r.rec.recovered.Add(1)
		}
	}
	if len(rc.pending)-rc.next > maxPending {
		r.runPending(rc, len(rc.pending))
		rc.paused = false
		r.log.Warn("recovering dropped job events is taking long; live events go on, and the recovered ones come after them")
	}
}

// runPending runs what is pending up to end.
func (r *Router) runPending(rc *recovery, end int) {
	for ; rc.next < end; rc.next++ {
		p := rc.pending[rc.next]
		rc.pending[rc.next] = pendingMsg{}
		if p.m == nil {
			r.handleFence(p.msg)
			continue
		}
		r.deliver(p.sc, p.m)
	}
	if rc.next == len(rc.pending) {
		rc.pending, rc.next = rc.pending[:0], 0
		clear(rc.pendingIDs)
	}
}

// receivedSet remembers the ids of the last job events received (or
// recovered), in order, and counts them. Only the dispatch goroutine
// touches it.
type receivedSet struct {
	recentIDs
	adds uint64
}

func (s *receivedSet) add(id string) bool {
	if !s.recentIDs.add(id) {
		return false
	}
	s.adds++
	return true
}

func (s *receivedSet) has(id string) bool {
	_, ok := s.set[id]
	return ok
}

// droppedByKind splits dropped() by the kind of Subscription: job events,
// environment events.
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
