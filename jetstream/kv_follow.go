package jetstream

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// KVChangeKind says what a KVChange reports.
type KVChangeKind int

const (
	// KVPut: Entry was stored.
	KVPut KVChangeKind = iota
	// KVDeleted: the key was deleted, purged or expired at Entry.Revision;
	// Entry.Value is nil.
	KVDeleted
	// KVCurrent: the follow is in place: every change stored from now on
	// will be reported. A reader that reads a key after this report, and
	// applies the follow's later reports to what it read (the higher
	// revision wins), knows the key as recently as the follow's delivery.
	KVCurrent
	// KVLapsed: the follow broke — its connection is lost or reconnecting,
	// heartbeats stopped (a link to the bucket's domain is down), its
	// consumer is gone — and reports nothing more; what it reported may be
	// stale from now on. Err says why. Follow again to go on.
	KVLapsed
)

// KVChange is one report of a follow (KV.Follow).
type KVChange struct {
	Kind  KVChangeKind
	Entry KVEntry // KVPut, KVDeleted
	Err   error   // KVLapsed
}

// KVFollow is a running follow of a bucket (KV.Follow).
type KVFollow interface {
	// Stop ends the follow; no report is made after Stop returns, and
	// none of KVLapsed for it. Safe to call twice, and from a report.
	Stop()
}

// DefaultFollowHeartbeat is how often an idle follow hears from the
// server: a follow that hears nothing for twice as long lapses.
const DefaultFollowHeartbeat = 5 * time.Second

// follower serializes one follow's reports and makes the lapse final.
type follower struct {
	report func(KVChange)
	rmu    sync.Mutex // held while reporting: one report at a time

	mu      sync.Mutex
	current bool
	ended   bool
	stop    func() // ends the underlying watch
	onEnd   func() // unregisters the follow from its handle
}

// deliver reports c unless the follow ended; a KVLapsed ends it.
func (f *follower) deliver(c KVChange) {
	f.rmu.Lock()
	defer f.rmu.Unlock()
	f.mu.Lock()
	if f.ended || c.Kind == KVCurrent && f.current {
		f.mu.Unlock()
		return
	}
	switch c.Kind {
	case KVCurrent:
		f.current = true
	case KVLapsed:
		f.end()
	}
	f.mu.Unlock()
	f.report(c)
}

// end marks the follow ended and releases it; f.mu held.
func (f *follower) end() {
	f.ended = true
	if f.stop != nil {
		go f.stop() // nats.go may hold its own locks while it calls us
	}
	if f.onEnd != nil {
		f.onEnd()
	}
}

// Stop implements KVFollow. A report in progress on another goroutine
// may still finish.
func (f *follower) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ended {
		f.end()
	}
}

// Follow implements KV with an ordered consumer of every subject of the
// bucket, delivering only what is stored after it is made, with idle
// heartbeats (KVConfig.FollowHeartbeat). Every follow of the handle lapses
// as soon as the connection is disconnected or reconnecting: what was
// stored in the meantime would not be reported.
func (k *NATSKV) Follow(ctx context.Context, report func(KVChange)) (KVFollow, error) {
	if _, err := k.bucket(ctx); err != nil {
		return nil, err
	}
	f := &follower{report: report}
	f.onEnd = func() { k.untrack(f) }
	if err := k.track(f); err != nil {
		return nil, err
	}
	ctx, cancel := k.bound(ctx)
	defer cancel()
	cons, err := k.js.OrderedConsumer(ctx, "KV_"+k.cfg.Bucket, natsjs.OrderedConsumerConfig{
		FilterSubjects:    []string{kvSubjectPrefix(k.cfg.Bucket) + ">"},
		DeliverPolicy:     natsjs.DeliverNewPolicy,
		InactiveThreshold: 2 * k.cfg.FollowHeartbeat,
		MaxResetAttempts:  1,
	})
	if err != nil {
		k.untrack(f)
		return nil, kvError(err, "follow "+k.Name())
	}
	prefix := kvSubjectPrefix(k.cfg.Bucket)
	handle := func(m natsjs.Msg) {
		meta, err := m.Metadata()
		if err != nil || len(m.Subject()) <= len(prefix) {
			f.deliver(KVChange{Kind: KVLapsed, Err: fmt.Errorf("%w: follow %s: unreadable delivery", ErrWatchEnded, k.Name())})
			return
		}
		e := KVEntry{Key: m.Subject()[len(prefix):], Revision: meta.Sequence.Stream}
		if isDeletion(m.Headers()) {
			f.deliver(KVChange{Kind: KVDeleted, Entry: e})
		} else {
			e.Value = m.Data()
			f.deliver(KVChange{Kind: KVPut, Entry: e})
		}
	}
	lapse := func(_ natsjs.ConsumeContext, err error) {
		f.deliver(KVChange{Kind: KVLapsed, Err: fmt.Errorf("%w: follow %s: %w", ErrWatchEnded, k.Name(), err)})
	}
	cc, err := cons.Consume(handle, natsjs.ConsumeErrHandler(lapse), natsjs.PullHeartbeat(k.cfg.FollowHeartbeat))
	if err != nil {
		k.untrack(f)
		return nil, kvError(err, "follow "+k.Name())
	}
	// Stopping an ordered consumer leaves it on the server until its
	// inactivity threshold; a mirror that replaces follows would pile them
	// up, so stopping deletes it.
	stop := func() {
		cc.Stop()
		if info := cons.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.Background(), k.cfg.Timeout)
			_ = k.js.DeleteConsumer(dctx, "KV_"+k.cfg.Bucket, info.Name)
			cancel()
		}
	}
	f.mu.Lock()
	f.stop = stop
	ended := f.ended
	f.mu.Unlock()
	if ended {
		go stop()
		return f, nil
	}
	f.deliver(KVChange{Kind: KVCurrent})
	return f, nil
}

// track registers f with the handle, so that a disconnection lapses it;
// the first follow starts listening to the connection's status.
func (k *NATSKV) track(f *follower) error {
	k.fmu.Lock()
	defer k.fmu.Unlock()
	if k.fclosed {
		return ErrKVClosed
	}
	if k.follows == nil {
		k.follows = make(map[*follower]struct{})
		k.status = k.cfg.Conn.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
		k.statusDone = make(chan struct{})
		go k.watchStatus(k.status, k.statusDone)
	}
	k.follows[f] = struct{}{}
	return nil
}

func (k *NATSKV) untrack(f *follower) {
	k.fmu.Lock()
	delete(k.follows, f)
	k.fmu.Unlock()
}

// watchStatus lapses every follow of the handle when the connection drops,
// until the status channel is closed (Close).
func (k *NATSKV) watchStatus(ch chan nats.Status, done chan struct{}) {
	defer close(done)
	for st := range ch {
		k.fmu.Lock()
		fs := k.running()
		k.fmu.Unlock()
		err := fmt.Errorf("%w: connection %s", ErrUnreachable, strings.ToLower(st.String()))
		for _, f := range fs {
			f.deliver(KVChange{Kind: KVLapsed, Err: err})
		}
	}
}

// running returns the follows of the handle; k.fmu held.
func (k *NATSKV) running() []*follower { return slices.Collect(maps.Keys(k.follows)) }

// closeFollows ends every follow of the handle and stops listening to the
// connection's status.
func (k *NATSKV) closeFollows() {
	k.fmu.Lock()
	k.fclosed = true
	fs := k.running()
	ch, done := k.status, k.statusDone
	k.status = nil
	k.fmu.Unlock()
	for _, f := range fs {
		f.deliver(KVChange{Kind: KVLapsed, Err: ErrKVClosed})
	}
	if ch != nil {
		k.cfg.Conn.RemoveStatusListener(ch)
		<-done
	}
}
