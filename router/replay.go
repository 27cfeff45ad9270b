package router

import (
	"context"
	"slices"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// Replaying the cache to a new registration (docs/cache.md): the router's
// holds, their reads and release.

// hold is a registration being replayed to. The registration is held out of
// live chains (bus.RegisterHeld) and has its place P in the events stream's
// order (placeHold): its cached events are those at or below P, which a
// goroutine of its own (readSeq) reads and hands over in batches, and the
// dispatch goroutine replays to it alone (pump); its client's events after
// P wait, in order, and run the client's chain, the registration in it,
// once it is released. A client's held registrations share the place of
// the first, and are read for and replayed to one at a time, in the order
// they were made (heldClient).
type hold struct {
	c       *heldClient
	proc    pmix.Proc
	session string
	id      bus.ID
	reg     bus.Registration
	upTo    uint64 // its place P

	ctx    context.Context // its read's
	cancel context.CancelFunc
	// batches carries the cached events from the read, which closes it
	// when done; its buffer bounds how far the read runs ahead.
	batches chan []cachedEvent
	readErr error // set by the read before it closes batches

	// Guarded by holdMu.
	subscribed bool // register has subscribed for it: its read may start
	started    bool // its read

	// Only the dispatch goroutine touches what follows.
	replied  bool // the client has its reply
	finished bool
}

type heldEvent struct {
	m  *event.Message
	sc subjects.Scope
	// from: only the registrations released at or after it are owed
	// the event (its copy after it ran early: local.go); 0: all.
	from uint64
}

// heldClient is a client with registrations held, the first of which is
// being read for; its live events wait in deferred, in order, for the last
// release. Guarded by holdMu.
type heldClient struct {
	rc       Recipient
	holds    []*hold
	upTo     uint64 // its holds' place
	deferred []heldEvent
}

// holdBatches bounds the batches a read may have waiting.
const holdBatches = 2

// placeHold adds a registration, just registered held, on the dispatch
// goroutine, and gives it its place in the order: its client's events
// after the sequence reached now wait for its release (or for the release
// of the client's registrations held already, whose place it shares), and
// its replay reads the cache up to that place.
func (r *Router) placeHold(ctx context.Context, rc Recipient, proc pmix.Proc, session string, reg *bus.Registry, id bus.ID) *hold {
	h := &hold{proc: proc, session: session, id: id, batches: make(chan []cachedEvent, holdBatches)}
	h.ctx, h.cancel = context.WithCancel(ctx)
	h.reg, _ = reg.Lookup(id)
	r.holdMu.Lock()
	defer r.holdMu.Unlock()
	c := r.holds[rc]
	if c == nil {
		c = &heldClient{rc: rc, upTo: r.position()}
		r.holds[rc] = c
	}
	h.c, h.upTo = c, c.upTo
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
	h.started = true
	return true
}

// startRead starts h's read on a goroutine of the agent's; false once the
// agent stops.
func (r *Router) startRead(h *hold) bool {
	if !r.host.GoFunc(func() { r.readSeq(h) }) {
		h.cancel()
		return false
	}
	return true
}

// holdEvent takes a live event for client rc while some of its
// registrations are held, and reports whether it does: the event then
// waits for the release.
func (r *Router) holdEvent(rc Recipient, sc subjects.Scope, m *event.Message, from uint64) bool {
	r.holdMu.Lock()
	defer r.holdMu.Unlock()
	c := r.holds[rc]
	if c == nil {
		return false
	}
	c.deferred = append(c.deferred, heldEvent{m: m, sc: sc, from: from})
	return true
}

// isHeld reports whether client rc has registrations held.
func (r *Router) isHeld(rc Recipient) bool {
	r.holdMu.Lock()
	defer r.holdMu.Unlock()
	return r.holds[rc] != nil
}

// origin is a local client as its registry sees itself.
func (r *Router) origin(proc pmix.Proc, session string) bus.Origin {
	return bus.Origin{Cluster: string(r.place.Cluster), Node: r.place.Node, Session: session, Proc: proc}
}

// handOver passes a batch to the dispatch goroutine.
func (r *Router) handOver(h *hold, b []cachedEvent) error {
	select {
	case h.batches <- b:
		r.post(func() { r.pump(h) })
		return nil
	case <-h.ctx.Done():
		return h.ctx.Err()
	}
}

// pump runs on the dispatch goroutine whenever h may move on: once the
// client has its reply, it replays the batches the read has handed over,
// and releases the registration when the read is done.
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
	h.c.rc.Cork()
	defer h.c.rc.Uncork(true)
	for {
		select {
		case b, open := <-h.batches:
			if !open {
				r.release(h, proc, session, reg)
				return
			}
			for _, c := range b {
				r.replayTo(proc, session, reg, h, c.sc, c.m)
			}
		default:
			return
		}
	}
}

// release releases the registration. A replay that read the cache to the
// end is recorded, up to the sequence dispatched now: the registration had
// the events at or below its place replayed, and those after it, which
// waited for this release, run the client's chain with it in (retention.go
// settles the retained job events it accepts).
func (r *Router) release(h *hold, proc pmix.Proc, session string, reg *bus.Registry) {
	_ = reg.ReleaseAt(h.id, r.bump())
	if h.readErr == nil && r.position() > 0 && r.replayed != nil {
		r.replayed(proc, session, h.reg, r.position())
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
	r.bump() // its client's events now run its chain
	c := h.c
	var next *hold
	var waited []heldEvent
	r.holdMu.Lock()
	c.holds = slices.DeleteFunc(c.holds, func(x *hold) bool { return x == h })
	r.nholds.Add(-1)
	if len(c.holds) == 0 {
		delete(r.holds, c.rc)
		waited = c.deferred
		c.deferred = nil
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
		r.notify(c.rc, proc, reg, d.m, d.m.BusEvent(r.place.Cluster), d.from)
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
	_ = reg.Replay(h.id, ev, func(o bus.Outcome) { r.outcome(m, ev.Source.Proc, proc, o) })
	return true
}
