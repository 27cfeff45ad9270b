package jetstream

import (
	"bytes"
	"context"
	"fmt"
	"sync"
)

// MemKV is a KV in memory with the semantics of NATSKV: one revision
// counter for the bucket, atomic Create, conditional Delete, watches that
// deliver current entries then puts. It lets the logic above a bucket be
// tested without a server, and SetUnreachable injects the failure of a
// domain that cannot be reached. Safe for concurrent use.
type MemKV struct {
	name string

	mu          sync.Mutex
	rev         uint64
	entries     map[string]KVEntry
	follows     map[*memFollow]struct{}
	unreachable bool
}

// NewMemKV returns an empty bucket called name.
func NewMemKV(name string) *MemKV {
	return &MemKV{name: name, entries: make(map[string]KVEntry)}
}

// Name implements KV.
func (m *MemKV) Name() string { return m.name }

// SetUnreachable makes every later operation fail with ErrUnreachable (true)
// or work again (false). Follows running when it is set lapse, as for a
// follow over a lost link.
func (m *MemKV) SetUnreachable(down bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unreachable = down
	if down {
		for f := range m.follows {
			f.offer(KVChange{Kind: KVLapsed, Err: fmt.Errorf("%w: %s", ErrUnreachable, m.name)})
		}
	}
}

// Len returns the number of live keys.
func (m *MemKV) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

func (m *MemKV) check(ctx context.Context, keys ...string) error {
	for _, k := range keys {
		if !KeyValid(k) {
			return keyError(k)
		}
	}
	if err := ctx.Err(); err != nil {
		return kvError(err, m.name)
	}
	if m.unreachable {
		return fmt.Errorf("%w: %s", ErrUnreachable, m.name)
	}
	return nil
}

// Create implements KV.
func (m *MemKV) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, key); err != nil {
		return 0, err
	}
	if _, ok := m.entries[key]; ok {
		return 0, fmt.Errorf("%w: %s in %s", ErrKeyExists, key, m.name)
	}
	m.rev++
	e := KVEntry{Key: key, Value: bytes.Clone(value), Revision: m.rev}
	m.entries[key] = e
	for f := range m.follows {
		f.offer(KVChange{Kind: KVPut, Entry: e})
	}
	return e.Revision, nil
}

// GetMany implements KV.
func (m *MemKV) GetMany(ctx context.Context, keys []string) (map[string]KVEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, keys...); err != nil {
		return nil, err
	}
	got := make(map[string]KVEntry, len(keys))
	for _, k := range keys {
		if e, ok := m.entries[k]; ok {
			got[k] = e
		}
	}
	return got, nil
}

// Delete implements KV.
func (m *MemKV) Delete(ctx context.Context, key string, revision uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, key); err != nil {
		return err
	}
	e, ok := m.entries[key]
	if !ok || e.Revision != revision {
		return fmt.Errorf("%w: %s in %s", ErrRevisionMismatch, key, m.name)
	}
	m.rev++
	delete(m.entries, key)
	for f := range m.follows {
		f.offer(KVChange{Kind: KVDeleted, Entry: KVEntry{Key: key, Revision: m.rev}})
	}
	return nil
}

// Follow implements KV. A follow lapses when SetUnreachable(true) is
// called, or when it falls 1024 reports behind.
func (m *MemKV) Follow(ctx context.Context, report func(KVChange)) (KVFollow, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	f := &memFollow{m: m, changes: make(chan KVChange, 1024), done: make(chan struct{})}
	f.offer(KVChange{Kind: KVCurrent})
	if m.follows == nil {
		m.follows = make(map[*memFollow]struct{})
	}
	m.follows[f] = struct{}{}
	go f.run(report)
	return f, nil
}

// memFollow is a follow of a MemKV: changes are queued under the
// bucket's lock and reported in order on a goroutine of the follow.
type memFollow struct {
	m       *MemKV
	changes chan KVChange // closed when the follow ends, under m.mu
	done    chan struct{} // closed by Stop
	ended   bool
}

// offer queues c for the follow; m.mu held. A follow whose queue is full
// lapses, as a slow consumer's would.
func (f *memFollow) offer(c KVChange) {
	if f.ended {
		return
	}
	select {
	case f.changes <- c:
	default:
		f.end(KVChange{Kind: KVLapsed, Err: fmt.Errorf("%w: %s fell behind", ErrWatchEnded, f.m.name)})
		return
	}
	if c.Kind == KVLapsed {
		f.end(c)
	}
}

// end closes the queue after last, if it fits; m.mu held.
func (f *memFollow) end(last KVChange) {
	f.ended = true
	delete(f.m.follows, f)
	select {
	case f.changes <- last:
	default:
		// The queue is full: the follow ends with what it holds; a
		// lapse it cannot report is reported by run.
	}
	close(f.changes)
}

func (f *memFollow) run(report func(KVChange)) {
	lapsed := false
	for c := range f.changes {
		select {
		case <-f.done:
			return
		default:
		}
		lapsed = lapsed || c.Kind == KVLapsed
		report(c)
	}
	select {
	case <-f.done:
	default:
		if !lapsed {
			report(KVChange{Kind: KVLapsed, Err: fmt.Errorf("%w: %s fell behind", ErrWatchEnded, f.m.name)})
		}
	}
}

// Stop implements KVFollow.
func (f *memFollow) Stop() {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if !f.ended {
		f.ended = true
		delete(f.m.follows, f)
		close(f.changes)
	}
	select {
	case <-f.done:
	default:
		close(f.done)
	}
}
