package agent

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// router is the agent's event path: it publishes events by data range,
// keeps the agent's subscriptions equal to what its clients' registrations
// need, and hands arriving events to the chains of the local clients in
// range, replaying cached events to new registrations first.
//
// Every subscription feeds one channel that one goroutine drains, so the
// agent handles events in the order its NATS connection received them,
// whatever subjects they came on, and a client's handlers are invoked in
// that order.
//
// The router calls the agent only through routerHost, and NATS only
// through transport.
type router struct {
	nc    transport
	place event.Place
	host  routerHost
	log   *slog.Logger
	done  <-chan struct{}
	msgs  chan *nats.Msg

	// Work for the dispatch goroutine, which runs it before the next
	// event: a registration's replay and release.
	ctlMu  sync.Mutex
	ctl    []func()
	ctlSig chan struct{}

	// holds are registrations being replayed to, by client; the dispatch
	// goroutine reads them, others add them.
	holdMu  sync.Mutex
	holds   map[recipient]*heldClient
	nholds  atomic.Int32 // holds in all, read on every event without holdMu
	holdSeq atomic.Uint64

	// Fences come back through the inbox (see hold), on the router's own
	// subject, subscribed into msgs on first use.
	fenceSubj string
	fenceMu   sync.Mutex
	fenceSub  subscription

	// updMu serializes update, which subscribes and unsubscribes under it
	// (buffered writes, never a round trip); mu guards the maps, which
	// the dispatch goroutine reads on every event.
	updMu  sync.Mutex
	mu     sync.Mutex
	subs   map[string]subscription   // by subject
	scopes map[string]subjects.Scope // by subject

	seen recentIDs // only the dispatch goroutine touches it

	stats routerStats
}

// routerStats count what the router did (Agent.Stats).
type routerStats struct {
	published, received, malformed, duplicates atomic.Uint64
	delivered, replayed                        atomic.Uint64
	droppedGone                                atomic.Uint64 // slow-consumer drops of subscriptions since closed
}

// routerHost is what the router needs of the agent.
type routerHost interface {
	event.Jobs
	// recipients returns the attached clients: a shared slice, not to be
	// modified, read without locking on every event.
	recipients() []recipient
	// outcome reports a chain that ended.
	outcome(m *event.Message, source, client pmix.Proc, o bus.Outcome)
	// readCache reads the cached events a new registration of client
	// proc (of session) matches and passes them to batch, oldest first,
	// a batch at a time; marked is called once the read point is fixed,
	// before the first batch. It returns the read point in the job-events
	// stream, and batch's error, or its own when the cache could not be
	// read to the end (which it logs).
	readCache(ctx context.Context, proc pmix.Proc, session string, g bus.Registration, marked func(), batch func([]cachedEvent) error) (uint64, error)
	// replayed records that the cache was replayed in full, up to upTo in
	// the job-events stream, to registration g of client p.
	replayed(p pmix.Proc, session string, g bus.Registration, upTo uint64)
	// goFunc runs f on a goroutine the agent owns; false once it stops.
	goFunc(f func()) bool
}

// recipient is a local client as the router sees it.
type recipient interface {
	// target returns the client's proc, its job's session and its
	// registry; false before its hello or after it closed.
	target() (proc pmix.Proc, session string, reg *bus.Registry, ok bool)
	// cork holds the client's frames back until uncork, which writes
	// them (and drops the client if that fails).
	cork()
	uncork()
}

type cachedEvent struct {
	sc subjects.Scope
	m  *event.Message
}

// inboxSize bounds the events received but not yet dispatched. NATS drops
// (and reports as a slow consumer) what does not fit.
const inboxSize = 1 << 16

// flushTimeout bounds the wait for the server to know a registration's
// subscriptions.
const flushTimeout = 5 * time.Second

func newRouter(nc transport, place event.Place, host routerHost, log *slog.Logger, done <-chan struct{}) *router {
	return &router{
		nc: nc, place: place, host: host, log: log, done: done,
		msgs: make(chan *nats.Msg, inboxSize), ctlSig: make(chan struct{}, 1),
		holds: make(map[recipient]*heldClient), fenceSubj: "_INBOX." + nuid.Next(),
		subs: make(map[string]subscription), scopes: make(map[string]subjects.Scope),
		seen: newRecentIDs(4096),
	}
}

// publish sends an event to the subjects of its range. from is the local
// client that notified it, nil for the host RM.
func (r *router) publish(m *event.Message, from *event.Sender) error {
	scopes, err := event.Scopes(r.place, m, from, r.host)
	if err != nil {
		return err
	}
	if err := event.Publish(r.nc, m, scopes); err != nil {
		return err
	}
	r.stats.published.Add(1)
	return nil
}

// register adds a registration to client rc's registry, held out of live
// chains until the cached events it matches have been replayed to it, and
// subscribes to what it needs (see hold). It returns once the events the
// cache read can return have all been dispatched, or after fenceTimeout.
// Call the returned function once the client has its reply: the replay
// then starts, on the dispatch goroutine, and the client's events that
// arrive from then on wait for the release, when they run the client's
// chain with the new registration in it. So the registration gets every
// event once, cached ones first; no replayed invocation precedes the reply;
// and an event the client causes after its call returned reaches it in its
// chain.
//
// A client's registrations are replayed to one at a time. One made while
// another of the same client is held returns at once and is read for once
// that one is released; the client's events wait for both.
func (r *router) register(ctx context.Context, rc recipient, codes []pmix.Status, info []pmix.Info, h bus.Handler) (bus.ID, func(), error) {
	proc, session, reg, ok := rc.target()
	if !ok {
		return 0, nil, pmix.Errorf(pmix.ErrLostConnectionToClient, "client %v is not attached", proc)
	}
	id, err := reg.RegisterHeld(codes, info, h)
	if err != nil {
		return 0, nil, err
	}
	hd := r.addHold(ctx, rc, proc, session, reg, id)
	undo := func(err error) (bus.ID, func(), error) {
		r.post(func() { r.abandon(hd) })
		_ = reg.Deregister(id)
		_ = r.update(ctx)
		return 0, nil, err
	}
	if err := r.ensureFenceSub(); err != nil {
		return undo(err)
	}
	if err := r.update(ctx); err != nil {
		return undo(err)
	}
	if r.subscribed(hd) {
		if !r.startRead(hd) {
			return undo(pmix.Errorf(pmix.ErrLostConnection, "the agent is shutting down"))
		}
		if !hd.fenceless {
			r.awaitFence(ctx, hd)
		}
	}
	return id, func() { r.post(func() { hd.replied = true; r.pump(hd) }) }, nil
}

// deregister removes a registration and the subscriptions only it needed.
func (r *router) deregister(ctx context.Context, reg *bus.Registry, id bus.ID) error {
	if err := reg.Deregister(id); err != nil {
		return err
	}
	return r.update(ctx)
}

// dispatchBatch bounds how many queued events one pass handles before the
// frames it produced are written.
const dispatchBatch = 256

// dispatch handles arriving events one at a time until the agent stops.
// Events already queued are handled as a batch with the clients' sockets
// corked, so a burst costs one write per client rather than one per frame.
//
// Control work posted with post runs before any event that arrives after
// it was posted.
func (r *router) dispatch() {
	for {
		r.runControl()
		select {
		case msg := <-r.msgs:
			rcs := r.host.recipients()
			for _, rc := range rcs {
				rc.cork()
			}
			r.handle(msg)
		batch:
			for range dispatchBatch - 1 {
				r.runControl()
				select {
				case msg = <-r.msgs:
					r.handle(msg)
				default:
					break batch
				}
			}
			for _, rc := range rcs {
				rc.uncork()
			}
		case <-r.ctlSig:
		case <-r.done:
			return
		}
	}
}

// post queues f for the dispatch goroutine without waiting.
func (r *router) post(f func()) {
	r.ctlMu.Lock()
	r.ctl = append(r.ctl, f)
	r.ctlMu.Unlock()
	select {
	case r.ctlSig <- struct{}{}:
	default:
	}
}

func (r *router) runControl() {
	r.ctlMu.Lock()
	fs := r.ctl
	r.ctl = nil
	r.ctlMu.Unlock()
	for _, f := range fs {
		f()
	}
}

// handle decodes an event and runs the chains of the local clients in its
// range.
func (r *router) handle(msg *nats.Msg) {
	if msg.Sub != nil && msg.Sub.Subject == r.fenceSubj {
		r.fenced(string(msg.Data))
		return
	}
	r.mu.Lock()
	sc, ok := r.scopes[msg.Sub.Subject]
	r.mu.Unlock()
	if !ok {
		return // unsubscribed meanwhile
	}
	m, err := event.UnmarshalMessage(msg.Data)
	if err != nil {
		r.stats.malformed.Add(1)
		r.log.Warn("dropping malformed event", "subject", msg.Subject, "err", err)
		return
	}
	if !r.seen.add(m.ID) {
		r.stats.duplicates.Add(1)
		return
	}
	r.stats.received.Add(1)
	r.deliver(sc, m)
}

// deliver runs m through the chain of every attached client it is for.
// Registrations being replayed to are skipped by the chains; the event
// queues for them instead, or, once their replay has begun, waits with the
// client's other events for the release (see hold). Only the dispatch
// goroutine calls it.
func (r *router) deliver(sc subjects.Scope, m *event.Message) {
	ev := m.BusEvent(r.place.Cluster)
	holding := r.nholds.Load() > 0
	for _, rc := range r.host.recipients() {
		proc, session, reg, ok := rc.target()
		if !ok || !event.For(r.place, sc, m, proc, session) {
			continue
		}
		if holding && r.holdEvent(rc, proc, session, sc, m, ev) {
			continue // until the release
		}
		r.notify(proc, reg, m, ev)
	}
}

// notify runs a client's chain for an event that is for it.
func (r *router) notify(proc pmix.Proc, reg *bus.Registry, m *event.Message, ev bus.Event) {
	if !reg.Wants(ev) {
		return
	}
	r.stats.delivered.Add(1)
	reg.Notify(ev, func(o bus.Outcome) { r.host.outcome(m, ev.Source.Proc, proc, o) })
}

// scopeNeed is what one scope's subscriptions must cover: every code, or
// some codes.
type scopeNeed struct {
	scope subjects.Scope
	all   bool
	codes map[pmix.Status]bool
}

func (n *scopeNeed) add(codes []pmix.Status) {
	if len(codes) == 0 {
		n.all = true
		return
	}
	for _, c := range codes {
		n.codes[c] = true
	}
}

// wanted returns the subjects the attached clients' registrations need,
// with their scopes.
func (r *router) wanted() map[string]subjects.Scope {
	needs := map[string]*scopeNeed{}
	need := func(sc subjects.Scope) *scopeNeed {
		n, ok := needs[sc.Prefix()]
		if !ok {
			n = &scopeNeed{scope: sc, codes: map[pmix.Status]bool{}}
			needs[sc.Prefix()] = n
		}
		return n
	}
	for _, rc := range r.host.recipients() {
		proc, session, reg, ok := rc.target()
		if !ok {
			continue
		}
		scopes := event.ClientScopes(r.place, proc.Nspace, session)
		for _, g := range reg.Registrations() {
			if g.WantsJob() {
				for _, sc := range scopes {
					need(sc).add(g.Codes)
				}
			}
			if codes, ok := envCodes(g); ok {
				for _, sc := range scopes {
					need(sc.Environment()).add(codes)
				}
			}
		}
	}
	want := map[string]subjects.Scope{}
	for _, n := range needs {
		var codes []pmix.Status
		if !n.all {
			codes = slices.Collect(maps.Keys(n.codes))
		}
		for _, subj := range n.scope.Patterns(codes) {
			want[subj] = n.scope
		}
	}
	return want
}

// envCodes reports whether a registration wants environment events, and
// of which codes (none: every code, a default registration).
func envCodes(g bus.Registration) ([]pmix.Status, bool) {
	if g.Category == bus.CategoryDefault {
		return nil, g.WantsEnvironment(0)
	}
	var codes []pmix.Status
	for _, c := range g.Codes {
		if g.WantsEnvironment(c) {
			codes = append(codes, c)
		}
	}
	return codes, len(codes) > 0
}

// update brings the subscriptions in line with the registrations of the
// attached clients, then waits (within ctx and flushTimeout) until the
// server knows them, so that an event notified after a registration call
// returned is not missed. A wildcard for a scope replaces its single-code
// subjects, so no event arrives twice through overlapping subscriptions.
//
// No lock is held across the flush: dispatch goes on meanwhile.
func (r *router) update(ctx context.Context) error {
	r.updMu.Lock()
	err := r.apply(r.wanted())
	r.updMu.Unlock()
	if err != nil {
		return err
	}
	fctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	if err := r.nc.Flush(fctx); err != nil {
		return pmix.Errorf(pmix.ErrUnreach, "waiting for NATS to know the subscriptions: %w", err)
	}
	return nil
}

// apply subscribes to the subjects of want the router lacks and drops the
// others. Subscribing comes first, so a scope moving from single codes to
// its wildcard never misses an event; the id filter drops the duplicates
// the overlap may bring. Called with updMu held.
func (r *router) apply(want map[string]subjects.Scope) error {
	var firstErr error
	for _, subj := range slices.Sorted(maps.Keys(want)) {
		r.mu.Lock()
		_, have := r.subs[subj]
		if !have {
			r.scopes[subj] = want[subj] // before any message can arrive
		}
		r.mu.Unlock()
		if have {
			continue
		}
		sub, err := r.nc.Subscribe(subj, r.msgs)
		r.mu.Lock()
		if err != nil {
			delete(r.scopes, subj)
		} else {
			r.subs[subj] = sub
		}
		r.mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr = pmix.Errorf(pmix.ErrUnreach, "subscribing to %s: %w", subj, err)
		}
	}
	r.mu.Lock()
	var drop []subscription
	for subj, sub := range r.subs {
		if _, ok := want[subj]; !ok {
			drop = append(drop, sub)
			delete(r.subs, subj)
			delete(r.scopes, subj)
		}
	}
	r.mu.Unlock()
	for _, sub := range drop {
		if n, err := sub.Dropped(); err == nil {
			r.stats.droppedGone.Add(uint64(n))
		}
		_ = sub.Unsubscribe()
	}
	return firstErr
}

// dropped is how many arriving events NATS dropped because the inbox was
// full (slow consumer), over every subscription the router has had.
func (r *router) dropped() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.stats.droppedGone.Load()
	for _, sub := range r.subs {
		if d, err := sub.Dropped(); err == nil {
			n += uint64(d)
		}
	}
	return n
}

// subscriptions counts the subjects subscribed to.
func (r *router) subscriptions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.subs)
}

// subjects returns the subjects subscribed to, sorted.
func (r *router) subjects() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.subs))
}

// close drops every subscription.
func (r *router) close() {
	r.updMu.Lock()
	defer r.updMu.Unlock()
	_ = r.apply(nil)
	r.fenceMu.Lock()
	defer r.fenceMu.Unlock()
	if r.fenceSub != nil {
		_ = r.fenceSub.Unsubscribe()
		r.fenceSub = nil
	}
}

// recentIDs remembers the last n event ids, to drop an event that arrives
// twice (through overlapping subscriptions while they change).
type recentIDs struct {
	ring []string
	next int
	set  map[string]struct{}
}

func newRecentIDs(n int) recentIDs {
	return recentIDs{ring: make([]string, n), set: make(map[string]struct{}, n)}
}

// add records id and reports whether it was new.
func (r *recentIDs) add(id string) bool {
	if _, ok := r.set[id]; ok {
		return false
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.set, old)
	}
	r.ring[r.next] = id
	r.next = (r.next + 1) % len(r.ring)
	r.set[id] = struct{}{}
	return true
}
