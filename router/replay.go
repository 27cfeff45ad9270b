package router

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// Replaying the cache to a new registration (docs/cache.md): the router's
// holds, their reads, fences and release.

// hold is a registration being replayed to. The registration is held out of
// live chains (bus.RegisterHeld) while a goroutine of its own (read) reads
// the cache and hands the events over in batches, which the dispatch
// goroutine replays to it alone (pump); then it is released. A client's
// held registrations are read for and replayed to one at a time, in the
// order they were made (heldClient).
//
// An event the read returns may also be on its way live, waiting in the
// inbox behind others: the agent was already subscribed to it for another
// registration, or it was published between the Subscription and the read.
// Replayed before it is dispatched, it would reach the registration twice:
// cached, then live after the release. So register waits, and nothing is
// replayed, until a fence has come back: a message the router publishes to
// itself once the read point is fixed (the cache has stored everything
// published before). A NATS server delivers to a connection in the order it
// handles messages, and handles an event before it stores it, so every
// event the read can return that also comes live is in the inbox ahead of
// the fence. Until the fence, live events run the client's chain without
// the held registration and queue for it; the replay merges them with the
// cached ones (replayBatch), each once, in the order they arrived. From
// the fence on (fenced), the client's live events wait, in order, until
// none of its registrations is held, and then run its chain, the new
// registrations included; a replay skips any of them. (This holds when the
// agent's server is the one that stores the streams, as with one server per
// cluster; see docs/cache.md.)
type hold struct {
	c       *heldClient
	proc    pmix.Proc
	session string
	id      bus.ID
	reg     bus.Registration
	seq     string // names it in its fences

	ctx    context.Context // its read's
	cancel context.CancelFunc
	// batches carries the cached events from the read, which closes it
	// when done; its buffer bounds how far the read runs ahead.
	batches  chan []cachedEvent
	fencedCh chan struct{} // closed when the fence is back
	markedCh chan struct{} // closed by the read: the fence is sent, or will never be
	// The second pass's fence (see read): its seq, and closed when it is
	// back (by the dispatch goroutine).
	seq2      string
	fenced2Ch chan struct{}
	// Set by the read before it closes batches: how far it read in the
	// job-events stream, and why it stopped short.
	upTo    uint64
	readErr error

	// Guarded by holdMu.
	subscribed bool // register has subscribed for it: its read may start
	started    bool // its read
	// fenceless: its read started while the client's live events were
	// already waiting, so none of them can be replayed twice: it needs no
	// fence. Set before the read starts.
	fenceless bool

	// Only the dispatch goroutine touches what follows.
	queue     []heldEvent    // live events before the fence, for it alone
	queued    map[string]int // the ids in queue, to their index
	next      int            // queue[:next] is replayed
	replied   bool           // the client has its reply
	fenced    bool
	needFence bool          // a batch came: it waits for the fence
	stash     []cachedEvent // a batch taken before the fence was back
	finished  bool
}

type heldEvent struct {
	m    *event.Message
	sc   subjects.Scope
	done bool // replayed
}

// heldClient is a client with registrations held, the first of which is
// being read for. Guarded by holdMu.
type heldClient struct {
	rc    Recipient
	holds []*hold
	// waiting: the first replay has begun (its fence is back, the client
	// has its reply), and the client's live events wait here, in order,
	// for the last release; deferredIDs are their ids.
	waiting     bool
	upTo        uint64 // with the sequenced dispatch: its holds' place
	deferred    []heldEvent
	deferredIDs map[string]struct{}
}

const (
	// holdBatches bounds the batches a read may have waiting.
	holdBatches = 2
	// refenceInterval: a fence can be lost like any event when the inbox
	// overflows; it is sent again this often until it is back.
	refenceInterval = time.Second
	// fenceTimeout bounds how long a registration call waits for its
	// fence: the client's other frames (handler completions among them)
	// wait meanwhile.
	fenceTimeout = 10 * time.Second
)

// addHold starts queueing the live events that a registration, just
// registered held, accepts.
func (r *Router) addHold(ctx context.Context, rc Recipient, proc pmix.Proc, session string, reg *bus.Registry, id bus.ID) *hold {
	h := &hold{
		proc: proc, session: session, id: id, seq: strconv.FormatUint(r.holdSeq.Add(1), 10),
		batches:  make(chan []cachedEvent, holdBatches),
		fencedCh: make(chan struct{}), markedCh: make(chan struct{}), fenced2Ch: make(chan struct{}),
		queued: map[string]int{},
	}
	h.seq2 = h.seq + ".2"
	h.ctx, h.cancel = context.WithCancel(ctx)
	h.reg, _ = reg.Lookup(id)
	r.holdMu.Lock()
	defer r.holdMu.Unlock()
	c := r.holds[rc]
	if c == nil {
		c = &heldClient{rc: rc, deferredIDs: map[string]struct{}{}}
		r.holds[rc] = c
	}
	h.c = c
	c.holds = append(c.holds, h)
	r.nholds.Add(1)
	return h
}

// subscribed records that register has subscribed for h, and reports
// whether the caller is to start its read: h is its client's first hold.
func (r *Router) subscribed(h *hold) bool {
	r.holdMu.Lock()
	defer r.holdMu.Unlock()
	h.subscribed = true
	return r.claimReadLocked(h)
}

func (r *Router) claimReadLocked(h *hold) bool {
	if h.started || !h.subscribed || h.finished || h.c.holds[0] != h {
		return false
	}
	h.started, h.fenceless = true, h.c.waiting
	return true
}

// startRead starts h's read on a goroutine of the agent's; false once the
// agent stops.
func (r *Router) startRead(h *hold) bool {
	read := r.read
	if r.seq != nil {
		read = r.readSeq
	}
	if !r.host.GoFunc(func() { read(h) }) {
		h.cancel()
		return false
	}
	return true
}

// holdEvent takes a live event for client rc while some of its
// registrations are held, and reports whether the client's chain must wait
// (see hold): it does once the first replay has begun; until then the
// event queues for the held registrations that accept it.
func (r *Router) holdEvent(rc Recipient, proc pmix.Proc, session string, sc subjects.Scope, m *event.Message, ev bus.Event) bool {
	r.holdMu.Lock()
	defer r.holdMu.Unlock()
	c := r.holds[rc]
	if c == nil {
		return false
	}
	if c.waiting {
		c.deferred = append(c.deferred, heldEvent{m: m, sc: sc})
		c.deferredIDs[m.ID] = struct{}{}
		return true
	}
	self := r.origin(proc, session)
	for _, h := range c.holds {
		if _, dup := h.queued[m.ID]; !dup && h.reg.Accepts(ev, self) {
			h.queued[m.ID] = len(h.queue)
			h.queue = append(h.queue, heldEvent{m: m, sc: sc})
		}
	}
	return false
}

// origin is a local client as its registry sees itself.
func (r *Router) origin(proc pmix.Proc, session string) bus.Origin {
	return bus.Origin{Cluster: string(r.place.Cluster), Node: r.place.Node, Session: session, Proc: proc}
}

// ensureFenceSub subscribes to the router's fence subject, once.
func (r *Router) ensureFenceSub() error {
	r.fenceMu.Lock()
	defer r.fenceMu.Unlock()
	if r.fenceSub != nil {
		return nil
	}
	sub, err := r.nc.Subscribe(r.fenceSubj, r.msgs)
	if err != nil {
		return pmix.Errorf(pmix.ErrUnreach, "subscribing to %s: %w", r.fenceSubj, err)
	}
	r.fenceSub = sub
	return nil
}

// fence sends h's fence through NATS back to the inbox.
func (r *Router) fence(h *hold) { r.sendFence(h.seq) }

func (r *Router) sendFence(seq string) {
	_ = r.nc.PublishMsg(&nats.Msg{Subject: r.fenceSubj, Data: []byte(seq)})
}

// awaitFence waits until h's fence is back, its read ended without one,
// or fenceTimeout, sending the fence again meanwhile.
func (r *Router) awaitFence(ctx context.Context, h *hold) {
	timeout := time.NewTimer(fenceTimeout)
	defer timeout.Stop()
	select {
	case <-h.markedCh:
	case <-timeout.C:
		return
	case <-ctx.Done():
		return
	}
	if !r.refence(ctx, h, timeout.C) && ctx.Err() == nil {
		r.log.Warn("a new registration's fence is late: events that reach it meanwhile are replayed to it alone", "client", h.proc.String(), "timeout", fenceTimeout)
	}
}

// refence sends h's fence again every refenceInterval until it is back,
// ctx ends or timeout fires (a nil one never does), and reports whether it
// is back.
func (r *Router) refence(ctx context.Context, h *hold, timeout <-chan time.Time) bool {
	return r.awaitSeq(ctx, h.seq, h.fencedCh, timeout)
}

// awaitSeq waits until back is closed (the fence seq is back), sending the
// fence again every refenceInterval, until ctx ends or timeout fires (a nil
// one never does), and reports whether it is back.
func (r *Router) awaitSeq(ctx context.Context, seq string, back <-chan struct{}, timeout <-chan time.Time) bool {
	again := time.NewTicker(refenceInterval)
	defer again.Stop()
	for {
		select {
		case <-back:
			return true
		case <-again.C:
			r.sendFence(seq)
		case <-timeout:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// read runs on a goroutine of its own: it reads the cache for h and hands
// the events to the dispatch goroutine a batch at a time, waiting while
// holdBatches are not taken yet. It sends the fence once the read point is
// fixed, and again until it is back if it handed anything over.
//
// Then it reads a second time, what the streams stored since the first
// read point. A NATS server matches a message against the subscriptions
// before it hands it to the streams, and the stream's queue can take it
// after a barrier sent later: an event another connection published just
// before the registration's Subscription, matched without it, can be
// stored after the read point — neither live nor read (seen under load,
// 1 registration in about 60). The second pass, marked once the first is
// done (a fence round trip and a read later), takes such an event. What
// it reads that also comes live is ahead of its own fence in the inbox,
// so its batches go over only once that fence is back: such an event has
// then queued for the registration, or waits for the release, and is not
// replayed twice.
func (r *Router) read(h *hold) {
	marked := false
	defer func() {
		if !marked {
			close(h.markedCh)
		}
		close(h.batches)
		r.post(func() { r.pump(h) })
	}()
	sent := false
	rp, err := r.cache.readCache(h.ctx, h.proc, h.session, h.reg, readPoint{}, func() {
		if !h.fenceless {
			r.fence(h)
		}
		marked = true
		close(h.markedCh)
	}, func(b []cachedEvent) error {
		sent = true
		return r.handOver(h, b)
	})
	h.upTo, h.readErr = rp.jobs, err
	if sent && !h.fenceless {
		r.refence(h.ctx, h, nil)
	}
	if err != nil || h.ctx.Err() != nil {
		return
	}
	back := false
	rp, err = r.cache.readCache(h.ctx, h.proc, h.session, h.reg, rp, func() { r.sendFence(h.seq2) }, func(b []cachedEvent) error {
		if !back {
			if back = r.awaitSeq(h.ctx, h.seq2, h.fenced2Ch, nil); !back {
				return h.ctx.Err()
			}
		}
		return r.handOver(h, b)
	})
	h.upTo, h.readErr = rp.jobs, err
}

// handOver passes a batch to the dispatch goroutine.
func (r *Router) handOver(h *hold, b []cachedEvent) error {
	again := time.NewTicker(refenceInterval)
	defer again.Stop()
	for {
		select {
		case h.batches <- b:
			r.post(func() { r.pump(h) })
			return nil
		case <-again.C:
			select {
			case <-h.fencedCh:
			default:
				if !h.fenceless {
					r.fence(h) // the dispatch goroutine may be waiting for it
				}
			}
		case <-h.ctx.Done():
			return h.ctx.Err()
		}
	}
}

// fenced runs on the dispatch goroutine when a fence is back.
func (r *Router) fenced(seq string) {
	var h *hold
	second := false
	r.holdMu.Lock()
	for _, c := range r.holds {
		for _, x := range c.holds {
			if x.seq == seq {
				h = x
			}
			if x.seq2 == seq {
				h, second = x, true
			}
		}
	}
	r.holdMu.Unlock()
	if h != nil && second {
		select {
		case <-h.fenced2Ch: // sent again
		default:
			close(h.fenced2Ch)
		}
		// It was sent after the first: what is ahead of that one is ahead
		// of it, should the first have been lost.
	}
	if h == nil || h.fenced {
		return // sent again, or for a hold that is gone
	}
	h.fenced = true
	close(h.fencedCh)
	// From here the client's live events wait for the release, not from
	// the reply on: the register call returns now, and an event another
	// process sends once the client has its reply may reach this goroutine
	// before the reply's post does. Waiting, it runs the client's chain
	// with the new registration in it; taken now, it would run the chain
	// without it and reach the registration apart, after its replay.
	r.holdMu.Lock()
	h.c.waiting = h.c.waiting || h.started
	r.holdMu.Unlock()
	r.pump(h)
}

// pump runs on the dispatch goroutine whenever h may move on: once the
// client has its reply and the fence is back, it replays the batches the
// read has handed over, and releases the registration when the read is
// done.
func (r *Router) pump(h *hold) {
	if h.finished || !h.replied {
		return
	}
	proc, session, reg, ok := h.c.rc.Target()
	if !ok {
		r.abandon(h) // the client is gone
		return
	}
	if _, registered := reg.Lookup(h.id); !registered {
		r.abandon(h) // deregistered while held
		return
	}
	fenced := h.fenced || h.fenceless
	if fenced {
		r.holdMu.Lock()
		h.c.waiting = h.c.waiting || h.started
		r.holdMu.Unlock()
	}
	h.c.rc.Cork()
	defer h.c.rc.Uncork()
	for {
		if h.stash == nil {
			select {
			case b, open := <-h.batches:
				if !open {
					if !h.needFence || fenced {
						r.release(h, proc, session, reg)
					}
					return
				}
				h.stash, h.needFence = b, true
			default:
				return
			}
		}
		if !fenced {
			return
		}
		r.replayBatch(h, proc, session, reg, h.stash)
		h.stash = nil
	}
}

// replayBatch replays cached events to h's registration alone. One that
// also came live, and queued, comes in its place, after the live events
// that queued before it: those the cache had evicted, or never kept,
// reached the agent before it. One that waits for the release to run the
// client's chain is not replayed.
func (r *Router) replayBatch(h *hold, proc pmix.Proc, session string, reg *bus.Registry, b []cachedEvent) {
	for _, c := range b {
		if _, waits := h.c.deferredIDs[c.m.ID]; waits {
			continue
		}
		if i, ok := h.queued[c.m.ID]; ok {
			if h.queue[i].done {
				continue
			}
			r.replayQueued(h, proc, session, reg, i)
			h.queue[i].done = true
		}
		r.replayTo(proc, session, reg, h, c.sc, c.m)
	}
}

// replayQueued replays the queued live events before index end that have
// not been.
func (r *Router) replayQueued(h *hold, proc pmix.Proc, session string, reg *bus.Registry, end int) {
	for ; h.next < end; h.next++ {
		if q := &h.queue[h.next]; !q.done {
			q.done = true
			r.replayTo(proc, session, reg, h, q.sc, q.m)
		}
	}
}

// release replays the live events that queued for h and were not among
// the cached ones, and releases the registration. A replay that read the
// cache to the end is recorded: the retained job events it covers are
// settled for the client (retention.go).
func (r *Router) release(h *hold, proc pmix.Proc, session string, reg *bus.Registry) {
	r.replayQueued(h, proc, session, reg, len(h.queue))
	_ = reg.Release(h.id)
	if h.readErr == nil && r.seq != nil && r.position() > 0 {
		r.cache.replayed(proc, session, h.reg, r.position())
	}
	r.finish(h, proc, reg)
}

// abandon forgets a hold whose client or registration went away.
func (r *Router) abandon(h *hold) {
	if h.finished {
		return
	}
	proc, _, reg, ok := h.c.rc.Target()
	if !ok {
		reg = nil
	}
	r.finish(h, proc, reg)
}

// finish forgets h and moves its client on: the next hold's read starts,
// or, with none left, the client's live events that waited run its chain
// (reg, when the client is still there).
func (r *Router) finish(h *hold, proc pmix.Proc, reg *bus.Registry) {
	h.finished = true
	h.cancel()
	h.queue, h.queued, h.stash = nil, nil, nil
	c := h.c
	var next *hold
	var waited []heldEvent
	r.holdMu.Lock()
	c.holds = slices.DeleteFunc(c.holds, func(x *hold) bool { return x == h })
	r.nholds.Add(-1)
	if len(c.holds) == 0 {
		delete(r.holds, c.rc)
		waited = c.deferred
		c.deferred, c.deferredIDs = nil, nil
	} else if r.claimReadLocked(c.holds[0]) {
		next = c.holds[0]
	}
	r.holdMu.Unlock()
	if next != nil {
		r.startRead(next)
	}
	if reg == nil {
		return
	}
	for _, d := range waited {
		r.notify(c.rc, proc, reg, d.m, d.m.BusEvent(r.place.Cluster))
	}
}

// replayTo runs one event through the held registration h of a client, if
// the event is for the client and the registration accepts it, and reports
// whether it did.
func (r *Router) replayTo(proc pmix.Proc, session string, reg *bus.Registry, h *hold, sc subjects.Scope, m *event.Message) bool {
	if !event.For(r.place, sc, m, proc, session) {
		return false
	}
	ev := m.BusEvent(r.place.Cluster)
	if !h.reg.Accepts(ev, r.origin(proc, session)) {
		return false
	}
	r.stats.replayed.Add(1)
	if !sc.IsEnvironment() {
		r.replayedIDs.add(m.ID)
	}
	_ = reg.Replay(h.id, ev, func(o bus.Outcome) { r.host.Outcome(m, ev.Source.Proc, proc, o) })
	return true
}
