package router

import (
	"cmp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// LOCAL events run by their agent before the store (docs/cache.md, "The
// node's own events first").
//
// A PMIX_RANGE_LOCAL event a local client notifies is for this node's
// clients only, so its agent runs their chains as it publishes it, without
// waiting for its copy from the events stream; the copy, when it comes,
// is still dispatched in its place in the stream's order, to the
// registrations that were not there to run it the first time:
//
//   - every release of a registration takes a stamp from the router's one
//     counter (bus.Registry.ReleaseAt). The event remembers the stamp of
//     its run; its copy runs each client's chain restricted to the
//     registrations released since (bus.Registry.SnapshotSince), usually
//     none. A registration placed before the copy's sequence so has it
//     from the copy, one placed after it from the cache's replay, and one
//     there at the run from the run: each once;
//   - a client with registrations held at the run (being replayed to) is
//     left out of the run, and takes the event from its copy whole,
//     waiting with its other events for the release;
//   - the order of a sender's events holds: its event runs early only when
//     none of its cached events published before is still to be
//     dispatched here; and once the registrations changed (a release, a
//     hold ended) while events run early are waiting for their copies,
//     later ones wait for their copies too, until those came, so that no
//     registration sees a sender's later event before an earlier one.
//
// What the agent's clients see is then one order: the events of other
// senders in the stream's order, and this node's LOCAL events where their
// agent ran them, the same for every client of the node (no one else gets
// them). Transient (DO_NOT_CACHE) LOCAL events run early under the same
// rules, and their arrival on their subject is a duplicate.

// localSent is an event run early, waiting for its copy.
type localSent struct {
	// stamp is the release counter's value at the run: registrations
	// released later (ReleaseAt stamps above it) did not run the event.
	stamp uint64
	// held are the clients left out of the run, their registrations
	// being replayed to: their copy runs their whole chain.
	held []Recipient
	// deferred: the event did not run early (the registrations had
	// changed since events run early that wait for their copies); its
	// copy runs every chain, as any event's.
	deferred bool
	// at is when it was recorded (forgetStale).
	at time.Time
	// copied: its copy came (deliver runs the copy, not the run).
	copied bool
}

// localEvents is the dispatch goroutine's record of the events run early.
type localEvents struct {
	byID map[string]*localSent
	// stamp counts releases and ended holds (bump).
	stamp uint64
	// behind counts the events run early, waiting for their copies,
	// whose stamp is below stamp; deferred those that did not run.
	behind, deferred int
	// ttl is how long an event run early may wait for its copy once the
	// dispatch is caught up with the stream (0: localTTL).
	ttl time.Duration
	// size is len(byID), read by publishers.
	size atomic.Int32
}

// localTTL is how long an event run early may wait for its copy, the
// dispatch being caught up with the stream, before the agent takes it
// that the copy will not come (NATS lost the publish): long, because a
// publish NATS buffered through a reconnect is stored when it is sent,
// and its copy must not then run the chains again.
const localTTL = time.Minute

// earlyWait is how long Publish waits for the run of an event that runs
// first before it publishes it all the same.
const earlyWait = 100 * time.Millisecond

// maxLocal bounds the events run early that wait for their copies;
// beyond it, an event waits for its copy.
const maxLocal = 1 << 14

// bump advances the release counter when the registrations change: a
// release, a hold that ended. Only the dispatch goroutine calls it.
func (r *Router) bump() uint64 {
	l := &r.local
	l.stamp++
	l.behind = len(l.byID) - l.deferred
	return l.stamp
}

// runLocal runs an event, on the dispatch goroutine, that Publish found
// may run before its copy comes: cached says it has one.
func (r *Router) runLocal(sc subjects.Scope, m *event.Message, cached bool) {
	l := &r.local
	early := l.behind == 0 && l.deferred == 0
	if !cached {
		if early && r.seen.add(m.ID) {
			r.stats.received.Add(1)
			r.stats.early.Add(1)
			r.deliverCorked(sc, m, nil)
		}
		return // else it runs when it arrives on its subject
	}
	if _, dup := l.byID[m.ID]; dup || r.seen.has(m.ID) {
		return // a duplicate publish: it ran already
	}
	ls := &localSent{stamp: l.stamp, deferred: !early, at: time.Now()}
	l.byID[m.ID] = ls
	l.size.Store(int32(len(l.byID)))
	if !early {
		l.deferred++
		return
	}
	r.stats.received.Add(1)
	r.stats.early.Add(1)
	r.deliverCorked(sc, m, ls)
}

// deliverCorked is deliver with the clients it writes to corked until it
// is done, as in a batch (Dispatch), unless a batch corks them already.
func (r *Router) deliverCorked(sc subjects.Scope, m *event.Message, ls *localSent) {
	if r.inBatch {
		r.deliver(sc, m, ls)
		return
	}
	r.inBatch = true
	r.deliver(sc, m, ls)
	r.inBatch = false
	r.uncorkBatch()
}

// localCopy takes the copy of an event, on the dispatch goroutine, and
// returns how it ran early: nil if it did not (its copy runs every
// chain); else its copy runs only the chains owed (deliver).
func (r *Router) localCopy(id string) (ls *localSent, ok bool) {
	l := &r.local
	ls, ok = l.byID[id]
	if !ok {
		return nil, false
	}
	r.forgetLocal(id, ls)
	ls.copied = true
	if ls.deferred {
		return nil, true
	}
	return ls, true
}

// owedNothing reports whether the copy of an event that ran early, as ls,
// is owed to no chain: no registration was released since it ran, none is
// held (to be released later), and no client was left out of the run.
func (r *Router) owedNothing(ls *localSent) bool {
	return !ls.deferred && len(ls.held) == 0 && ls.stamp == r.local.stamp && r.nholds.Load() == 0
}

// forgetLocal drops an event run early.
func (r *Router) forgetLocal(id string, ls *localSent) {
	l := &r.local
	delete(l.byID, id)
	l.size.Store(int32(len(l.byID)))
	switch {
	case ls.deferred:
		l.deferred--
	case ls.stamp < l.stamp:
		l.behind--
	}
}

// forgetStale drops, the dispatch being caught up with the stream, the
// events run early whose copy will never come (NATS lost the publish):
// those that waited for it longer than the ttl. Only the dispatch
// goroutine calls it.
func (r *Router) forgetStale() {
	l := &r.local
	ttl := cmp.Or(l.ttl, localTTL)
	now := time.Now()
	for id, ls := range l.byID {
		if now.Sub(ls.at) > ttl {
			r.forgetLocal(id, ls)
		}
	}
	r.order.settle(now, ttl)
}

// from is the stamp from which registrations of client rc are owed the
// copy of an event run early as ls (0: all of them).
func (ls *localSent) from(rc Recipient) uint64 {
	if ls == nil {
		return 0
	}
	for _, h := range ls.held {
		if h == rc {
			return 0
		}
	}
	return ls.stamp + 1
}

// mayRunEarly reports whether Publish may have the dispatch goroutine run
// m, to scopes, before its copy comes: a LOCAL event of a local client,
// to this node's scope, with the sequenced dispatch on for a cached one.
func (r *Router) mayRunEarly(m *event.Message, from *event.Sender, scopes []subjects.Scope, transient bool) bool {
	if from == nil || m.Range != pmix.RangeLocal || len(scopes) != 1 {
		return false
	}
	if sc := scopes[0]; sc.Kind() != subjects.KindNode || sc.Target().Node != r.place.Node {
		return false
	}
	return transient || r.seq != nil && r.local.size.Load() < maxLocal
}

// senderOrder counts, per local client, the cached events it published
// that the dispatch has not passed yet: its next event may run early only
// when there are none.
type senderOrder struct {
	mu  sync.Mutex
	out map[pmix.Proc]*pending
	// lateRuns are the events that run first published before they ran
	// (Publish waited earlyWait): their copies, not counted in out, may
	// come before the run. Rare; forgotten by settle.
	lateRuns map[string]time.Time
}

// late records that event id, which runs first, was published before it
// ran.
func (o *senderOrder) late(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lateRuns == nil {
		o.lateRuns = make(map[string]time.Time)
	}
	o.lateRuns[id] = time.Now()
}

// copied records the copy of client p's event id dispatched before any
// run of it: counted in out, unless it was to run first (late).
func (o *senderOrder) copied(p pmix.Proc, id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.lateRuns[id]; ok {
		delete(o.lateRuns, id)
		return
	}
	o.passedLocked(p, 1)
}

type pending struct {
	n     int64     // copies to come
	mark  int64     // n at the last settle that saw it change
	since time.Time // when
}

// sent records n copies to come of a client's event, unless none are to
// come and early is asked: it reports whether the event may run early.
func (o *senderOrder) sent(p pmix.Proc, n int, early bool) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	q := o.out[p]
	if early && (q == nil || q.n == 0) {
		return true
	}
	if n == 0 {
		return false
	}
	if q == nil {
		if o.out == nil {
			o.out = make(map[pmix.Proc]*pending)
		}
		q = &pending{}
		o.out[p] = q
	}
	q.n += int64(n)
	return false
}

// passed records n copies of client p's events dispatched, or not to
// come (the publish failed).
func (o *senderOrder) passed(p pmix.Proc, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.passedLocked(p, n)
}

func (o *senderOrder) passedLocked(p pmix.Proc, n int) {
	if q := o.out[p]; q != nil {
		q.n -= int64(n)
		if q.n <= 0 {
			delete(o.out, p)
		}
	}
}

// settle forgets, the dispatch being caught up with the stream, the
// counts that have not moved for ttl: their copies will never come.
func (o *senderOrder) settle(now time.Time, ttl time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for id, at := range o.lateRuns {
		if now.Sub(at) > ttl {
			delete(o.lateRuns, id)
		}
	}
	for p, q := range o.out {
		switch {
		case q.n != q.mark || q.since.IsZero():
			q.mark, q.since = q.n, now
		case now.Sub(q.since) > ttl:
			delete(o.out, p)
		}
	}
}

// cachedCopies is how many copies the events stream makes of an event
// published to scopes: one per scope it captures (all but the RM's).
func cachedCopies(scopes []subjects.Scope, transient bool) int {
	if transient {
		return 0
	}
	n := 0
	for _, sc := range scopes {
		if sc.Kind() != subjects.KindRM {
			n++
		}
	}
	return n
}
