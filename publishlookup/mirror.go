package publishlookup

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/jetstream"
)

// The mirror keeps the current entry of every scope that lookups of this
// agent read recently, from a follow of that scope's KV key
// (jetstream.KV.Follow), so that a lookup whose scopes are all mirrored
// is answered without a round trip, and a PMIX_WAIT lookup is woken by the
// follow that mirrors its scopes rather than by a watch of its own.
//
//   - A lookup of a key whose scopes are not all current in the mirror
//     reads the buckets, as without a mirror, and starts following the
//     scopes it lacks, for the next lookup.
//   - A scope is current from its follow's KVCurrent on, and stays so
//     until the follow lapses (the connection drops or reconnects, the
//     heartbeats of a link to the bucket's domain stop, the consumer goes).
//     A lapsed scope is dropped at once: lookups read the buckets again,
//     and a new follow makes it current again.
//   - Staleness: a change is seen by the mirror when its follow delivers
//     it — the delivery time of a KV watch on a healthy link; a lapse
//     drops the scope when it is detected (at once for the agent's own
//     connection, within twice the follow heartbeat for a link beyond it).
//   - Bounds: at most Config.MirrorScopes scopes, the least recently
//     used dropped first, and none unused for Config.MirrorIdle; scopes a
//     PMIX_WAIT lookup is waiting on are kept whatever the bound.
//
// What a mirrored entry means is decided exactly as for an entry read from
// the bucket (take): ranges both ways, access permissions, FIRST_READ's
// conditional delete — which, if the mirror was behind, fails and sends
// the lookup back to the bucket.
type mirror struct {
	s *Service

	mu     sync.Mutex
	scopes map[scopeRef]*mirrored
	lru    *list.List // of *mirrored, most recently used first
	closed bool
	sweep  *time.Timer // drops idle scopes
}

// mirrored is one scope in the mirror.
type mirrored struct {
	ref     scopeRef
	follow  jetstream.KVFollow // nil while it is being made
	gen     uint64             // of the follow: reports of older ones are ignored
	current bool
	entry   *jetstream.KVEntry // when current: nil if the key is absent
	floor   uint64             // reports of older revisions are ignored: this service wrote since
	used    time.Time
	elem    *list.Element
	waiters map[*waiter]struct{}
}

// waiter is a PMIX_WAIT lookup waiting on scopes: the mirror queues every
// entry put in them, and the lookup takes them on its own goroutine.
type waiter struct {
	refs   []scopeRef
	mu     sync.Mutex
	queue  []jetstream.KVEntry
	ready  chan struct{} // a token when queue is not empty
	scopes []scopeRef    // parallel to queue: which scope each entry is of
}

func newMirror(s *Service) *mirror {
	return &mirror{s: s, scopes: make(map[scopeRef]*mirrored), lru: list.New()}
}

// read returns the mirrored entries of refs if every one is current, and
// otherwise starts following those that are not mirrored and returns
// false.
func (m *mirror) read(refs []scopeRef) (map[scopeRef]jetstream.KVEntry, bool) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, false
	}
	var entries map[scopeRef]jetstream.KVEntry
	ok := true
	for _, ref := range refs {
		ms := m.touch(ref, now)
		if !ms.current {
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
	if !ok {
		return nil, false
	}
	return entries, true
}

// touch returns ref's scope, marked used now, making it and starting its
// follow if it is not mirrored; m.mu held.
func (m *mirror) touch(ref scopeRef, now time.Time) *mirrored {
	ms := m.scopes[ref]
	if ms == nil {
		ms = &mirrored{ref: ref}
		ms.elem = m.lru.PushFront(ms)
		m.scopes[ref] = ms
		m.start(ms, 0)
	} else {
		m.lru.MoveToFront(ms.elem)
	}
	ms.used = now
	if m.sweep == nil {
		m.sweep = time.AfterFunc(m.s.cfg.MirrorIdle, m.sweepIdle)
	}
	return ms
}

// start makes a follow for ms on a goroutine of the service, after delay;
// m.mu held.
func (m *mirror) start(ms *mirrored, delay time.Duration) {
	ms.gen++
	gen := ms.gen
	m.s.goFunc(func() {
		if delay > 0 && pause(m.s.ctx, delay) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(m.s.ctx, m.s.cfg.Timeout)
		defer cancel()
		f, err := ms.ref.kv.Follow(ctx, ms.ref.key, func(c jetstream.KVChange) { m.report(ms, gen, c) })
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.scopes[ms.ref] != ms || ms.gen != gen {
			if f != nil {
				f.Stop()
			}
			return
		}
		if err != nil {
			m.s.log.Debug("following a published key", "bucket", ms.ref.kv.Name(), "key", ms.ref.key, "err", err)
			m.lapsed(ms)
			return
		}
		ms.follow = f
	})
}

// report applies a change of ms's follow gen.
func (m *mirror) report(ms *mirrored, gen uint64, c jetstream.KVChange) {
	m.mu.Lock()
	if m.scopes[ms.ref] != ms || ms.gen != gen {
		m.mu.Unlock()
		return
	}
	if c.Kind <= jetstream.KVDeleted && c.Entry.Revision < ms.floor {
		m.mu.Unlock()
		return
	}
	var wake []*waiter
	switch c.Kind {
	case jetstream.KVPut:
		e := c.Entry
		ms.entry = &e
		for w := range ms.waiters {
			wake = append(wake, w)
		}
	case jetstream.KVDeleted:
		ms.entry = nil
	case jetstream.KVCurrent:
		ms.current = true
	case jetstream.KVLapsed:
		m.s.log.Debug("a followed published key lapsed", "bucket", ms.ref.kv.Name(), "key", ms.ref.key, "err", c.Err)
		m.lapsed(ms)
	}
	m.mu.Unlock()
	for _, w := range wake {
		w.offer(ms.ref, c.Entry)
	}
}

// wrote applies a write of this service to ref at once, rather than when
// its follow delivers it, so that a process sees its agent's own
// publishes and unpublishes at once: a create (e) or a delete of revision
// rev. Reports of what came before are ignored from then on.
func (m *mirror) wrote(ref scopeRef, rev uint64, e *jetstream.KVEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms := m.scopes[ref]
	if ms == nil {
		return
	}
	if e != nil {
		if ms.entry == nil || ms.entry.Revision < e.Revision {
			ms.entry = e
		}
		ms.floor = max(ms.floor, e.Revision)
		return
	}
	if ms.entry != nil && ms.entry.Revision <= rev {
		ms.entry = nil
	}
	ms.floor = max(ms.floor, rev+1)
}

// lapsed drops what ms mirrored: with waiters, it is followed again after
// Config.Retry; without, it leaves the mirror. m.mu held.
func (m *mirror) lapsed(ms *mirrored) {
	ms.current, ms.entry, ms.follow, ms.floor = false, nil, nil, 0
	if len(ms.waiters) > 0 && !m.closed {
		m.start(ms, m.s.cfg.Retry)
		return
	}
	m.drop(ms)
}

// drop removes ms from the mirror and stops its follow; m.mu held.
func (m *mirror) drop(ms *mirrored) {
	delete(m.scopes, ms.ref)
	m.lru.Remove(ms.elem)
	ms.gen++ // a follow still being made stops itself
	if ms.follow != nil {
		ms.follow.Stop()
		ms.follow = nil
	}
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
		m.drop(ms)
		over--
	}
}

// sweepIdle drops idle scopes, and runs again while any are left.
func (m *mirror) sweepIdle() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.trim(time.Now())
	if m.lru.Len() == 0 {
		m.sweep = nil
		return
	}
	m.sweep.Reset(m.s.cfg.MirrorIdle / 2)
}

// wait registers w on its scopes, following those not mirrored, and
// queues to it the entries mirrored already: with what the follows report
// from then on, w misses nothing stored in its scopes.
func (m *mirror) wait(w *waiter) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ref := range w.refs {
		ms := m.touch(ref, now)
		if ms.waiters == nil {
			ms.waiters = make(map[*waiter]struct{})
		}
		ms.waiters[w] = struct{}{}
		if ms.entry != nil {
			w.offer(ref, *ms.entry)
		}
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
	for _, ms := range m.scopes {
		m.drop(ms)
	}
}

// size returns the number of scopes mirrored and how many are current.
func (m *mirror) size() (scopes, current int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ms := range m.scopes {
		if ms.current {
			current++
		}
	}
	return len(m.scopes), current
}

func newWaiter(refs []scopeRef) *waiter {
	return &waiter{refs: refs, ready: make(chan struct{}, 1)}
}

func (w *waiter) offer(ref scopeRef, e jetstream.KVEntry) {
	w.mu.Lock()
	w.queue = append(w.queue, e)
	w.scopes = append(w.scopes, ref)
	w.mu.Unlock()
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// drain returns the entries queued, with their scopes.
func (w *waiter) drain() ([]scopeRef, []jetstream.KVEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	refs, es := w.scopes, w.queue
	w.scopes, w.queue = nil, nil
	return refs, es
}
