package router

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// The handoff by stream sequence (docs/cache.md). The cluster's events
// stream republishes every event it stores, in storing order, with its
// sequence (Nats-Sequence, contiguous); the router takes all its cluster's
// copies on one subscription and dispatches them strictly in that order:
//
//   - it keeps the next sequence it expects; a copy below it came already
//     (skipped); one above it leaves a gap, whose events it fetches by
//     sequence (seqSource) and dispatches, in order, before the copy. An
//     event neither stream holds any more is counted lost and logged;
//   - a gap at the tail, which no later copy reveals, is looked for when
//     NATS dropped messages (SlowConsumer), when the stream elected a
//     leader, after a reconnect, and every few seconds (CheckTail);
//   - a registration takes its place in the order: the sequence P the
//     dispatch has reached when it is added. Its cached events are those at
//     or below P, read by sequence; its client's events after P wait, in
//     order, and run its chain once it is released, the new registration
//     in it (replay.go). Nothing is both replayed and live, nothing is
//     missed, whichever NATS server of the cluster stored, republished or
//     answered.
//
// Transient events (DO_NOT_CACHE) are in no stream: they still come on the
// subjects of their ranges, subscribed per registration.

// seqSource is the events stream as the sequenced dispatch reads it:
// jsSeq over jetstream.EventCache, MemStream in memory.
type seqSource interface {
	// readSeqs passes to f, in order, the cached events whose sequences
	// are from to to, of every kind, and with jobFilters set only the job
	// events evicted from the events stream whose copies are on
	// jobFilters; it returns how many sequences of the range it found in
	// neither stream.
	readSeqs(ctx context.Context, from, to uint64, jobFilters []string, f func([]cachedEvent) error) (missing uint64, err error)
	// lastSeq is the events stream's last sequence.
	lastSeq(ctx context.Context) (uint64, error)
	// replayTo passes to f, in order, the cached events on filters whose
	// sequences are from from to upTo, and the copies on jobFilters of
	// the job events among them the events stream evicted: what a
	// registration placed at upTo is owed.
	replayTo(ctx context.Context, filters, jobFilters []string, from, upTo uint64, f func([]cachedEvent) error) error
}

// sequencer is the state of the sequenced dispatch. next is the dispatch
// goroutine's alone.
type sequencer struct {
	src     seqSource
	subject string // the cluster's copies: subjects.CopyPattern
	sub     Subscription
	next    uint64 // the sequence expected next; 0: the first copy's
	ctx     context.Context

	fetched, lost, dups atomic.Uint64
	tailDue             atomic.Bool // a CheckTail is posted and has not run
	lossy               atomic.Bool // NATS may have lost copies since the last tail's fetch
	// The previous tail check's: the stream's last sequence then, and
	// next then (the dispatch goroutine's).
	tailMark, tailNext uint64
}

const (
	// seqFetchTimeout bounds one fetch of a gap.
	seqFetchTimeout = 30 * time.Second
	// tailCheckInterval is how often the router looks for events the
	// stream stored and no copy brought (a slow check: drops, leader
	// elections and reconnects make it look at once).
	tailCheckInterval = 2 * time.Second
)

// Sequence switches the router to the sequenced dispatch over the
// cluster's event cache: it subscribes to the cluster's copies and
// dispatches what the events stream stores from now on; it looks for a
// gap at the tail when the stream elects a leader (its advisory) and
// every tailCheckInterval, on a goroutine of the host's; and it has the
// Retention of Config, if any, read the cache and stamp clients by its
// last sequence. Call it before Dispatch, and before any registration;
// ctx ends its reads of the cache.
//
// Errors: those of reading the stream's last sequence, or of subscribing.
func (r *Router) Sequence(ctx context.Context, cache *jetstream.EventCache) error {
	if r.retention != nil {
		r.retention.SetCache(cache)
		r.retention.SetStamp(cache.LastSeq)
	}
	return r.sequence(ctx, jsSeq{c: cache, log: r.log})
}

// LeaderElectedSubject is the advisory the events stream of cluster sends
// when it elects a leader.
func LeaderElectedSubject(cluster string) string {
	return "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED." + jetstream.EventStreamName(cluster)
}

func (r *Router) sequence(ctx context.Context, src seqSource) error {
	last, err := src.lastSeq(ctx)
	if err != nil {
		return err
	}
	s := &sequencer{src: src, subject: subjects.CopyPattern(string(r.place.Cluster)), next: last + 1, ctx: ctx}
	sub, err := r.nc.Subscribe(s.subject, r.msgs)
	if err != nil {
		return err
	}
	s.sub = sub
	r.seq = s
	// A new leader may have stored what the old one never republished.
	if _, err := r.nc.SubscribeFunc(LeaderElectedSubject(string(r.place.Cluster)), func(*nats.Msg) { r.CheckTail() }); err != nil {
		return err
	}
	every := r.tailEvery
	if every == 0 {
		every = tailCheckInterval
	}
	r.host.GoFunc(func() { tick(r.done, every, nil, func() bool { r.checkTail(false); return false }) })
	return nil
}

// SeqStats are the sequenced dispatch's counters.
type SeqStats struct {
	Next       uint64 // the sequence expected next
	Fetched    uint64 // events fetched for gaps
	Lost       uint64 // sequences neither stream held when fetched
	Duplicates uint64 // copies that came twice
}

// SeqStats reads the sequenced dispatch's counters (zero without it).
func (r *Router) SeqStats() SeqStats {
	if r.seq == nil {
		return SeqStats{}
	}
	done := make(chan uint64, 1)
	r.post(func() { done <- r.seq.next })
	var next uint64
	select {
	case next = <-done:
	case <-r.done:
	}
	return SeqStats{Next: next, Fetched: r.seq.fetched.Load(), Lost: r.seq.lost.Load(), Duplicates: r.seq.dups.Load()}
}

// CheckTail has the dispatch goroutine look for what the stream stored and
// no copy brought: after a slow consumer's drop, a leader election, a
// reconnect, and now and then. What the previous check saw stored is
// fetched if no copy came since.
func (r *Router) CheckTail() { r.checkTail(true) }

// checkTail is CheckTail; lossy says why: NATS may have lost copies (a
// drop, a reconnect, a leader election), or not (the periodic check).
//
// Copies come in the stream's order, so a gap that a later copy reveals
// is certain; a tail is not: its copies may still be on their way, behind
// a flood in the server's queues for seconds under load, and its events
// evicted meanwhile. So a tail's event found in neither stream is counted
// lost only after NATS may have lost copies; otherwise the fetch stops
// before it, and its copy, when it comes, is dispatched (a flood under
// the race detector lost 6,000–16,000 events so, with no drop at all).
func (r *Router) checkTail(lossy bool) {
	if r.seq == nil {
		return
	}
	if lossy {
		r.seq.lossy.Store(true)
	}
	if !r.seq.tailDue.CompareAndSwap(false, true) {
		return // one is due already: a flood's drops ask for many
	}
	r.post(func() {
		r.seq.tailDue.Store(false)
		ctx, cancel := context.WithTimeout(r.seq.ctx, seqFetchTimeout)
		defer cancel()
		last, err := r.seq.src.lastSeq(ctx)
		if err != nil {
			r.log.Warn("reading the events stream's last sequence", "err", err)
			return
		}
		// A tail is a gap only once its copies stopped coming: the
		// sequence reached at the previous check was not passed since,
		// and the inbox is empty. Copies on their way (in the inbox, in
		// the server's buffers behind a flood) are no gap, and fetched
		// ahead of them they could be found evicted already: a flood
		// under the race detector lost 23,000 of 30,300 events so. So
		// a tail is fetched, up to the last sequence the previous check
		// read, one check after it stopped moving.
		q := r.seq
		if q.next > last && len(r.msgs) == 0 {
			// Caught up: what ran early and waits for a copy
			// since two such checks will not have one.
			r.forgetStale()
		}
		if q.tailMark > 0 && q.next == q.tailNext && len(r.msgs) == 0 {
			r.fill(q.tailMark, q.lossy.Swap(false))
		}
		q.tailMark, q.tailNext = last, q.next
	})
}

// copyArrived dispatches a copy in its place in the stream's order.
func (r *Router) copyArrived(msg *nats.Msg) {
	s := r.seq
	seq, err := strconv.ParseUint(msg.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		r.stats.malformed.Add(1)
		return
	}
	if s.next == 0 {
		s.next = seq
	}
	if seq < s.next {
		s.dups.Add(1)
		return
	}
	r.fillTo(seq - 1)
	s.next = seq + 1
	defer r.passed()
	if id, _, ok := strings.Cut(msg.Header.Get(nats.MsgIdHdr), "@"); ok {
		if ls := r.local.byID[id]; ls != nil && r.owedNothing(ls) {
			// The copy of an event that ran first, owed to no chain:
			// not even decoded.
			r.localCopy(id)
			r.seen.add(id)
			return
		}
	}
	p, err := subjects.Parse(subjects.EventSubject(msg.Subject))
	if err != nil {
		return
	}
	m, err := event.UnmarshalMessage(msg.Data)
	if err != nil {
		r.stats.malformed.Add(1)
		r.log.Warn("dropping malformed event", "subject", msg.Subject, "err", err)
		return
	}
	r.dispatchSeq(p.Scope, m)
}

// passed tells the Retention, if any, how far the dispatch went.
func (r *Router) passed() {
	if r.retention != nil {
		r.retention.Dispatched(r.seq.next - 1)
	}
}

// fillTo fetches and dispatches, in order, the events from next to to. A
// fetch that fails (no leader during an election, a server going away)
// is tried again, from where it stopped, for seqFetchTimeout.
func (r *Router) fillTo(to uint64) { r.fill(to, true) }

// fill is fillTo; with lossy false it stops before the first sequence
// neither stream holds, leaving it to its copy (checkTail).
func (r *Router) fill(to uint64, lossy bool) {
	s := r.seq
	if s.next == 0 || to < s.next {
		return
	}
	from := s.next
	ctx, cancel := context.WithTimeout(s.ctx, seqFetchTimeout)
	defer cancel()
	var missing uint64
	held := false // a sequence is missing and the fetch stopped before it
	err := retrySeq(ctx, func() error {
		var err error
		missing, err = s.src.readSeqs(ctx, s.next, to, nil, func(b []cachedEvent) error {
			for _, c := range b {
				if c.evSeq < s.next {
					continue
				}
				if !lossy && c.evSeq > s.next {
					held = true
					return errStopFill
				}
				s.next = c.evSeq + 1
				s.fetched.Add(1)
				r.dispatchSeq(c.sc, c.m)
			}
			return nil
		})
		if errors.Is(err, errStopFill) {
			return nil
		}
		return err
	})
	if err == nil && !lossy && (held || missing > 0) {
		// The tail from s.next on waits for its copies (checkTail).
		r.passed()
		return
	}
	if err != nil {
		missing = to + 1 - s.next
		r.log.Warn("fetching events the agent did not receive; they are lost", "from", s.next, "to", to, "err", err)
	} else if missing > 0 {
		r.log.Warn("events the agent did not receive were no longer cached; they are lost", "from", from, "to", to, "lost", missing)
	}
	s.lost.Add(missing)
	s.next = max(s.next, to+1)
	r.passed()
}

// errStopFill ends a fill before a sequence neither stream holds.
var errStopFill = errors.New("a sequence is missing")

// retrySeq runs read until it succeeds or ctx ends, pausing between tries.
func retrySeq(ctx context.Context, read func() error) error {
	for {
		err := read()
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(seqRetryPause):
		case <-ctx.Done():
			return err
		}
	}
}

// seqRetryPause is the pause between two tries of a read by sequence.
const seqRetryPause = 200 * time.Millisecond

// dispatchSeq runs an event of the stream's order through the chains.
//
// Another node's copy is for none of its clients (event.For). An event
// stored under two scopes of this agent (a CUSTOM event raised by agents
// of two clusters: to the hosting agents' scopes by one, to the nspace by
// another, with one id) runs once.
//
// The copy of an event that ran early (local.go) runs only the chains
// still owed it.
func (r *Router) dispatchSeq(sc subjects.Scope, m *event.Message) {
	ls, ok := r.localCopy(m.ID)
	if !ok && m.Source.Node == r.place.Node && m.Source.Cluster == string(r.place.Cluster) && !m.Source.Proc.IsZero() {
		r.order.copied(m.Source.Proc, m.ID) // a local client's, not run first
	}
	if ok {
		if !r.seen.add(m.ID) {
			r.stats.duplicates.Add(1)
			return
		}
		switch {
		case ls == nil:
			r.stats.received.Add(1)
		case r.owedNothing(ls):
			return
		}
		r.deliver(sc, m, ls)
		return
	}
	if k := sc.Kind(); (k == subjects.KindNode || k == subjects.KindAgent) && sc.Target().Node != r.place.Node {
		return
	}
	r.arrived(sc, m)
}

// position is the last sequence dispatched (0 without a cache). Only the
// dispatch goroutine calls it.
func (r *Router) position() uint64 {
	if r.seq == nil {
		return 0
	}
	return max(r.seq.next, 1) - 1
}

// readSeq reads the cache for h up to its place (placeHold) and hands the
// events to the dispatch goroutine a batch at a time.
func (r *Router) readSeq(h *hold) {
	defer func() {
		close(h.batches)
		r.post(func() { r.pump(h) })
	}()
	if r.seq == nil || h.upTo == 0 {
		return // nothing cached before its place
	}
	filters, jobFilters := replayFilters(r.place, h.proc, h.session, h.reg)
	from := uint64(1)
	ctx, cancel := context.WithTimeout(h.ctx, seqFetchTimeout)
	defer cancel()
	err := retrySeq(ctx, func() error {
		err := r.seq.src.replayTo(h.ctx, filters, jobFilters, from, h.upTo, func(b []cachedEvent) error {
			if len(b) == 0 {
				return nil
			}
			if err := r.handOver(h, b); err != nil {
				return err
			}
			from = b[len(b)-1].evSeq + 1
			return nil
		})
		if h.ctx.Err() != nil {
			return nil // abandoned
		}
		return err
	})
	if err != nil && h.ctx.Err() == nil {
		h.readErr = err
		r.log.Warn("reading the event cache for a new registration; it misses what was not read yet", "client", h.proc.String(), "err", err)
	}
}

// patterns returns what to subscribe to for codes of scope sc: with the
// sequenced dispatch only the transient events, the cached ones coming
// from the events stream's copies.
func (r *Router) patterns(sc subjects.Scope, codes []pmix.Status) []string {
	if r.seq != nil {
		return sc.TransientPatterns(codes)
	}
	return sc.Patterns(codes)
}
