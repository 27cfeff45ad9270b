package publishlookup

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/jetstream"
)

// The mirror keeps the current entry of every scope that lookups of this
// agent read recently, so that a lookup whose scopes are all mirrored is
// answered without a round trip, and a PMIX_WAIT lookup is woken by the
// mirror rather than by a watch of its own.
//
//   - Each bucket is followed by one consumer of the agent
//     (jetstream.KV.Follow: every change stored from then on, deletions
//     included). A scope enters the mirror when a lookup reads it from the
//     bucket while that follow is in place; from then on the follow's
//     reports keep it (the higher revision wins, so a report older than
//     the read changes nothing). A lookup of a key whose scopes are not
//     all mirrored reads the buckets, as without a mirror.
//   - A follow that lapses (the connection drops or reconnects, the
//     heartbeats of a link to the bucket's domain stop, the consumer goes)
//     drops every scope of its bucket at once: lookups read the bucket
//     again, and a new follow, made after Config.Retry, lets the next
//     reads fill the mirror again.
//   - Staleness: a change made through another agent is seen when the
//     follow delivers it — the delivery time of a KV watch on a healthy
//     link; this service's own writes at once; a lapse drops the bucket's
//     scopes when it is detected (at once for the agent's own connection,
//     within twice the follow heartbeat for a link beyond it).
//   - Bounds: at most Config.MirrorScopes scopes, the least recently
//     used dropped first, and none unused for Config.MirrorIdle (a bucket
//     with none left is no longer followed); scopes a PMIX_WAIT lookup is
//     waiting on are kept whatever the bound.
//
// What a mirrored entry means is decided exactly as for an entry read from
// the bucket (take): ranges both ways, access permissions, FIRST_READ's
// conditional delete — which, if the mirror was behind, fails and sends
// the lookup back to the bucket.
type mirror struct {
	s *Service

	mu      sync.Mutex
	buckets map[jetstream.KV]*bucketFollow
	scopes  map[scopeRef]*mirrored
	lru     *list.List // of *mirrored, most recently used first
	closed  bool
	sweep   *time.Timer // drops idle scopes
}

// bucketFollow is the follow of one bucket.
type bucketFollow struct {
	kv       jetstream.KV
	follow   jetstream.KVFollow
	gen      uint64 // of the follow: reports of older ones are ignored
	current  bool   // the follow is in place
	starting bool
}

// mirrored is one scope in the mirror.
type mirrored struct {
	ref     scopeRef
	gen     uint64             // the bucket follow whose reports this scope took
	known   bool               // a read made during follow gen was applied
	entry   *jetstream.KVEntry // nil: absent
	rev     uint64             // the newest revision seen (put or deletion)
	used    time.Time
	elem    *list.Element
	waiters map[*waiter]struct{}
}

// ticket records, for a read from the buckets, the follow each bucket had
// when the read began: the read fills the mirror only if that follow was
// in place and still is.
type ticket map[jetstream.KV]uint64

func newMirror(s *Service) *mirror {
	return &mirror{s: s, buckets: make(map[jetstream.KV]*bucketFollow), scopes: make(map[scopeRef]*mirrored), lru: list.New()}
}

// read returns the mirrored entries of refs if every one is mirrored, and
// otherwise a ticket for a read from the buckets (loaded).
func (m *mirror) read(refs []scopeRef) (map[scopeRef]jetstream.KVEntry, ticket, bool) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, nil, false
	}
	var entries map[scopeRef]jetstream.KVEntry
	ok := true
	for _, ref := range refs {
		ms, b := m.touch(ref, now)
		if !b.current || ms.gen != b.gen || !ms.known {
			ok = false
			continue
		}
		if ms.entry != nil && ok {
			if entries == nil {
				entries = make(map[scopeRef]jetstream.KVEntry, len(refs))
			}
			entries[ref] = *ms.entry
		}
	}
	m.trim(now)
	if ok {
		return entries, nil, true
	}
	t := ticket{}
	for _, ref := range refs {
		ms, b := m.scopes[ref], m.buckets[ref.kv]
		if ms == nil || !b.current {
			continue
		}
		t[ref.kv] = b.gen
		if ms.gen != b.gen {
			// Start over in this follow: its reports from now on, then the read.
			ms.gen, ms.known, ms.entry, ms.rev = b.gen, false, nil, 0
		}
	}
	return nil, t, false
}

// loaded applies a read from the buckets made with ticket t: entries of
// refs, the buckets in failed not read.
func (m *mirror) loaded(t ticket, refs []scopeRef, entries map[scopeRef]jetstream.KVEntry, failed map[jetstream.KV]error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ref := range refs {
		gen, ok := t[ref.kv]
		b, ms := m.buckets[ref.kv], m.scopes[ref]
		if !ok || failed[ref.kv] != nil || ms == nil || !b.current || b.gen != gen || ms.gen != gen {
			continue
		}
		if e, found := entries[ref]; found && e.Revision > ms.rev {
			ms.entry, ms.rev = &e, e.Revision
		}
		ms.known = true
	}
}

// touch returns ref's scope and bucket, marked used now, making them and
// starting the bucket's follow as needed; m.mu held.
func (m *mirror) touch(ref scopeRef, now time.Time) (*mirrored, *bucketFollow) {
	b := m.buckets[ref.kv]
	if b == nil {
		b = &bucketFollow{kv: ref.kv}
		m.buckets[ref.kv] = b
	}
	if b.follow == nil && !b.starting {
		m.start(b, 0)
	}
	ms := m.scopes[ref]
	if ms == nil {
		ms = &mirrored{ref: ref}
		ms.elem = m.lru.PushFront(ms)
		m.scopes[ref] = ms
	} else {
		m.lru.MoveToFront(ms.elem)
	}
	ms.used = now
	if m.sweep == nil {
		m.sweep = time.AfterFunc(m.s.cfg.MirrorIdle/2, m.sweepIdle)
	}
	return ms, b
}

// start makes b's follow on a goroutine of the service, after delay;
// m.mu held.
func (m *mirror) start(b *bucketFollow, delay time.Duration) {
	b.starting = true
	gen := b.gen
	m.s.goFunc(func() {
		if delay > 0 && pause(m.s.ctx, delay) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(m.s.ctx, m.s.cfg.Timeout)
		defer cancel()
		f, err := b.kv.Follow(ctx, func(c jetstream.KVChange) { m.report(b, gen, c) })
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.closed || b.gen != gen {
			if f != nil {
				f.Stop() // a lapse came meanwhile, and started anew
			}
			return
		}
		b.starting = false
		if err != nil {
			m.s.log.Debug("following published data", "bucket", b.kv.Name(), "err", err)
			m.restartLocked(b)
			return
		}
		b.follow = f
	})
}

// report applies a change of b's follow gen.
func (m *mirror) report(b *bucketFollow, gen uint64, c jetstream.KVChange) {
	m.mu.Lock()
	if m.closed || b.gen != gen {
		m.mu.Unlock()
		return
	}
	var wake []*waiter
	reread := false
	switch c.Kind {
	case jetstream.KVPut, jetstream.KVDeleted:
		ms := m.scopes[scopeRef{b.kv, c.Entry.Key}]
		if ms == nil {
			break
		}
		if ms.gen == gen && c.Entry.Revision > ms.rev {
			ms.rev, ms.entry = c.Entry.Revision, nil
			if c.Kind == jetstream.KVPut {
				e := c.Entry
				ms.entry = &e
			}
		}
		if c.Kind == jetstream.KVPut {
			for w := range ms.waiters {
				wake = append(wake, w)
			}
		}
	case jetstream.KVCurrent:
		// Waiters may have read before the follow was in place: they read
		// again, and miss nothing from then on.
		b.current, reread = true, true
		wake = m.waitersOf(b.kv)
	case jetstream.KVLapsed:
		m.s.log.Debug("following published data lapsed", "bucket", b.kv.Name(), "err", c.Err)
		m.restartLocked(b)
	}
	m.mu.Unlock()
	for _, w := range wake {
		if reread {
			w.rereadNow()
		} else {
			w.offer(scopeRef{b.kv, c.Entry.Key}, c.Entry)
		}
	}
}

// lapse drops kv's scopes, as a lapse of its follow does, for a reason
// the follow cannot see yet (the link to the bucket's domain was found
// down before the follow's heartbeats missed), and follows it anew after
// Config.Retry.
func (m *mirror) lapse(kv jetstream.KV, why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.buckets[kv]
	if m.closed || b == nil {
		return
	}
	m.s.log.Debug("published data no longer followed", "bucket", kv.Name(), "why", why)
	if b.follow != nil {
		b.follow.Stop()
	}
	m.restartLocked(b)
}

// restartLocked forgets b's follow — every scope of the bucket is unknown
// from now on, and a start under way is discarded — and follows the
// bucket anew after Config.Retry while some scope of it is mirrored; m.mu
// held.
func (m *mirror) restartLocked(b *bucketFollow) {
	b.current, b.follow, b.starting = false, nil, false
	b.gen++
	if m.wanted(b) {
		m.start(b, m.s.cfg.Retry)
	}
}

// wanted reports whether any scope of b's bucket is mirrored; m.mu held.
func (m *mirror) wanted(b *bucketFollow) bool {
	for ref := range m.scopes {
		if ref.kv == b.kv {
			return true
		}
	}
	return false
}

// waitersOf returns the waiters on scopes of kv; m.mu held.
func (m *mirror) waitersOf(kv jetstream.KV) []*waiter {
	seen := map[*waiter]bool{}
	var out []*waiter
	for ref, ms := range m.scopes {
		if ref.kv != kv {
			continue
		}
		for w := range ms.waiters {
			if !seen[w] {
				seen[w] = true
				out = append(out, w)
			}
		}
	}
	return out
}

// wrote applies a write of this service to ref at once, rather than when
// the follow delivers it, so that a process sees its agent's own
// publishes and unpublishes at once: a create (e) or a delete of revision
// rev.
func (m *mirror) wrote(ref scopeRef, rev uint64, e *jetstream.KVEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms, b := m.scopes[ref], m.buckets[ref.kv]
	if ms == nil || b == nil || ms.gen != b.gen {
		return
	}
	if e != nil {
		if e.Revision > ms.rev {
			ms.entry, ms.rev = e, e.Revision
		}
		return
	}
	if ms.entry != nil && ms.entry.Revision <= rev {
		ms.entry = nil
	}
	ms.rev = max(ms.rev, rev)
}

// trim drops the least recently used scopes beyond the bound, and those
// idle too long, but none with waiters; m.mu held.
func (m *mirror) trim(now time.Time) {
	over := m.lru.Len() - m.s.cfg.MirrorScopes
	for e := m.lru.Back(); e != nil; {
		ms := e.Value.(*mirrored)
		e = e.Prev()
		idle := now.Sub(ms.used) >= m.s.cfg.MirrorIdle
		if over <= 0 && !idle {
			break
		}
		if len(ms.waiters) > 0 {
			continue
		}
		delete(m.scopes, ms.ref)
		m.lru.Remove(ms.elem)
		over--
	}
}

// sweepIdle drops idle scopes, stops following buckets none is left of,
// and runs again while any scope is left.
func (m *mirror) sweepIdle() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.trim(time.Now())
	for _, b := range m.buckets {
		if b.follow != nil && !m.wanted(b) {
			b.follow.Stop()
			b.follow, b.current = nil, false
			b.gen++
		}
	}
	if m.lru.Len() == 0 {
		m.sweep = nil
		return
	}
	m.sweep.Reset(m.s.cfg.MirrorIdle / 2)
}

// wait registers w on its scopes, mirroring them. A lookup registers
// before it reads: what is put in its scopes after the read is offered to
// it, and when a follow comes into place it is told to read again.
func (m *mirror) wait(w *waiter) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ref := range w.refs {
		ms, _ := m.touch(ref, now)
		if ms.waiters == nil {
			ms.waiters = make(map[*waiter]struct{})
		}
		ms.waiters[w] = struct{}{}
	}
}

// unwait removes w from its scopes.
func (m *mirror) unwait(w *waiter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ref := range w.refs {
		if ms := m.scopes[ref]; ms != nil {
			delete(ms.waiters, w)
		}
	}
	m.trim(time.Now())
}

// close stops every follow.
func (m *mirror) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if m.sweep != nil {
		m.sweep.Stop()
	}
	for _, b := range m.buckets {
		if b.follow != nil {
			b.follow.Stop()
		}
		b.gen++
	}
}

// size returns the number of scopes in the mirror and how many are known.
func (m *mirror) size() (scopes, known int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ms := range m.scopes {
		if b := m.buckets[ms.ref.kv]; ms.known && b.current && ms.gen == b.gen {
			known++
		}
	}
	return len(m.scopes), known
}

// waiting returns the number of waiters whose buckets are all followed:
// from then on each is woken by what is put in its scopes.
func (m *mirror) waiting() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	ready := map[*waiter]bool{}
	for _, ms := range m.scopes {
		current := m.buckets[ms.ref.kv].current
		for w := range ms.waiters {
			if r, seen := ready[w]; !seen || r {
				ready[w] = current
			}
		}
	}
	n := 0
	for _, r := range ready {
		if r {
			n++
		}
	}
	return n
}

// waiter is a PMIX_WAIT lookup waiting on scopes: the mirror queues every
// entry put in them, or tells it to read again, and the lookup acts on its
// own goroutine.
type waiter struct {
	refs  []scopeRef
	ready chan struct{} // a token when there is something to act on

	mu     sync.Mutex
	queue  []jetstream.KVEntry
	scopes []scopeRef // parallel to queue: which scope each entry is of
	reread bool
}

func newWaiter(refs []scopeRef) *waiter {
	return &waiter{refs: refs, ready: make(chan struct{}, 1)}
}

func (w *waiter) offer(ref scopeRef, e jetstream.KVEntry) {
	w.mu.Lock()
	w.queue = append(w.queue, e)
	w.scopes = append(w.scopes, ref)
	w.mu.Unlock()
	w.signal()
}

func (w *waiter) rereadNow() {
	w.mu.Lock()
	w.reread = true
	w.mu.Unlock()
	w.signal()
}

func (w *waiter) signal() {
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// drain returns the entries queued, with their scopes, and whether to read
// again.
func (w *waiter) drain() ([]scopeRef, []jetstream.KVEntry, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	refs, es, reread := w.scopes, w.queue, w.reread
	w.scopes, w.queue, w.reread = nil, nil, false
	return refs, es, reread
}
