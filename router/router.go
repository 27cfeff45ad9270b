package router

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

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
// Every Subscription feeds one channel that one goroutine drains, so the
// agent handles events in the order its NATS connection received them,
// whatever subjects they came on, and a client's handlers are invoked in
// that order.
//
// The router calls the agent only through Host, and NATS only
// through Transport.
type Router struct {
	nc    Transport
	place event.Place
	host  Host
	log   *slog.Logger
	// replayed is told of every replay that read the cache to the end
	// (retention); nil: nobody is.
	replayed func(p pmix.Proc, session string, g bus.Registration, upTo uint64)
	done     <-chan struct{}
	msgs     chan *nats.Msg

	// Work for the dispatch goroutine, which runs it before the next
	// event: a registration's replay and release.
	ctlMu  sync.Mutex
	ctl    []func()
	ctlSig chan struct{}

	// corked are the clients the dispatch goroutine corked in the batch
	// it is handling (inBatch): each once it first writes to it.
	corked  map[Recipient]struct{}
	inBatch bool

	// holds are registrations being replayed to, by client; the dispatch
	// goroutine reads them, others add them.
	holdMu  sync.Mutex
	holds   map[Recipient]*heldClient
	nholds  atomic.Int32 // holds in all, read on every event without holdMu
	holdSeq atomic.Uint64

	// updMu serializes changes to the subscriptions, which subscribe and
	// unsubscribe under it (buffered writes, never a round trip): needs,
	// interest and contrib. mu guards subs and scopes, which the dispatch
	// goroutine reads on every event.
	updMu    sync.Mutex
	interest map[string]*scopeInterest            // by scope prefix
	contrib  map[Recipient]map[bus.ID][]scopeNeed // what each registration asked for
	mu       sync.Mutex
	subs     map[string]Subscription   // by subject
	scopes   map[string]subjects.Scope // by subject

	seen recentIDs // only the dispatch goroutine touches it

	// The LOCAL events of local clients run before their copies come
	// (local.go): local is the dispatch goroutine's, order the
	// publishers'.
	local localEvents
	order senderOrder
	// earlyWait bounds Publish's wait for an event's run (0: earlyWait).
	earlyWait time.Duration

	dropsSeen uint64 // dropped() when last checked (drops.go)

	// seq dispatches cached events in the events stream's order
	// (sequence.go); nil while the agent takes them on the subjects of
	// their ranges. tailEvery is how often it looks for a gap at the
	// tail (0: tailCheckInterval).
	seq       *sequencer
	tailEvery time.Duration

	// retention is told of the cache (Sequence) and of finished replays;
	// outcomes publishes the chains' outcome reports. Either may be nil.
	retention *Retention
	outcomes  *Outcomes

	stats routerStats
}

// routerStats count what the router did (Agent.Stats).
type routerStats struct {
	published, received, malformed, duplicates atomic.Uint64
	delivered, replayed, early                 atomic.Uint64
	// Slow-consumer drops of subscriptions since closed, of job events
	// and of environment events.
	droppedJobGone, droppedEnvGone atomic.Uint64
}

// Host is what the router needs of the agent that composes it.
type Host interface {
	event.Jobs
	// Recipients returns the attached clients: a shared slice, not to be
	// modified, read without locking on every event.
	Recipients() []Recipient
	// Outcome is told of a chain that ended, once the router has queued
	// its report for publishing (Config.Outcomes).
	Outcome(rep event.OutcomeReport)
	// GoFunc runs f on a goroutine the agent owns; false once it stops.
	GoFunc(f func()) bool
}

// Recipient is a local client as the router sees it.
type Recipient interface {
	// Target returns the client's proc, its job's session and its
	// registry; false before its hello or after it closed.
	Target() (proc pmix.Proc, session string, reg *bus.Registry, ok bool)
	// Cork holds the client's frames back until Uncork, which writes
	// them (and drops the client if that fails); with direct, on the
	// caller's goroutine as far as the socket takes them at once, when
	// the caller uncorks few clients.
	Cork()
	Uncork(direct bool)
	// Window bounds the client's chains in flight.
	Window() *Window
}

type cachedEvent struct {
	sc  subjects.Scope
	m   *event.Message
	seq uint64 // in its stream: the job-events stream for a copy
	// evSeq is its sequence in the events stream (a copy carries it).
	evSeq uint64
	cp    bool // read from the job-events stream
}

// inboxSize bounds the events received but not yet dispatched. NATS drops
// (and reports as a slow consumer) what does not fit; cached events are
// then fetched from the cache (drops.go).
const inboxSize = 1 << 16

// flushTimeout bounds the wait for the server to know a registration's
// subscriptions.
const flushTimeout = 5 * time.Second

// Config is what New needs.
type Config struct {
	Transport Transport
	Place     event.Place // where the agent runs
	Host      Host
	// Retention keeps job events for the local clients (nil: none); it
	// is told of the cache and of every replay that read it to the end.
	Retention *Retention
	// Outcomes publishes the outcome reports of the chains (nil: none).
	Outcomes *Outcomes
	Log      *slog.Logger    // nil discards
	Done     <-chan struct{} // closed when the agent stops
	// Inbox bounds the events received and not yet dispatched (0: the
	// default, 65536).
	Inbox int
}

// New returns a router; run its Dispatch on a goroutine of the agent's.
func New(cfg Config) *Router {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	r := newRouter(cfg.Transport, cfg.Place, cfg.Host, cfg.Log, cfg.Done, cfg.Inbox)
	r.retention, r.outcomes = cfg.Retention, cfg.Outcomes
	if r.retention != nil {
		r.replayed = r.retention.Replayed
	}
	return r
}

// newRouter returns a router whose inbox holds inbox events (inboxSize if
// zero); a nil log discards.
func newRouter(nc Transport, place event.Place, host Host, log *slog.Logger, done <-chan struct{}, inbox int) *Router {
	if inbox <= 0 {
		inbox = inboxSize
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Router{
		nc: nc, place: place, host: host, log: log, done: done,
		msgs: make(chan *nats.Msg, inbox), ctlSig: make(chan struct{}, 1),
		holds: make(map[Recipient]*heldClient),
		subs:  make(map[string]Subscription), scopes: make(map[string]subjects.Scope),
		interest: make(map[string]*scopeInterest), contrib: make(map[Recipient]map[bus.ID][]scopeNeed),
		seen:  newRecentIDs(4096),
		local: localEvents{byID: make(map[string]*localSent)},
	}
}

// publish sends an event to the subjects of its range. from is the local
// client that notified it, nil for the host RM.
//
// A LOCAL event of a local client runs this node's chains before it is
// stored, when the order of the client's events allows (local.go).
func (r *Router) Publish(m *event.Message, from *event.Sender) error {
	scopes, err := event.Scopes(r.place, m, from, r.host)
	if err != nil {
		return err
	}
	b, subjs, err := event.Encode(m, scopes)
	if err != nil {
		return err
	}
	transient := pmix.Flag(m.Info, pmix.KeyEventDoNotCache)
	copies := 0
	if from != nil {
		copies = cachedCopies(scopes, transient)
		early := r.mayRunEarly(m, from, scopes, transient)
		if r.order.sent(from.Proc, copies, early) {
			// Its own copy, with the size its invocations weigh: the
			// caller leaves m alone once it is published.
			lm := new(event.Message)
			*lm = *m
			lm.Size = len(b)
			sc := scopes[0]
			// Published once it ran: its copy cannot come first, and
			// the store's work in the server does not compete with the
			// run for the CPU (the agent's embedded server). Not
			// waiting longer than earlyWait for a dispatch goroutine
			// that is busy (fetching a gap from the stream may take
			// seconds): then its copy may come before its run, which
			// the dispatch then skips.
			ran := make(chan struct{})
			r.post(func() { r.runLocal(sc, lm, !transient); close(ran) })
			wait := time.NewTimer(cmp.Or(r.earlyWait, earlyWait))
			select {
			case <-ran:
			case <-r.done:
			case <-wait.C:
				r.order.late(lm.ID)
			}
			wait.Stop()
			if err := event.PublishEncoded(r.nc, m, scopes, b, subjs); err != nil {
				if !transient {
					r.post(func() {
						if ls, ok := r.local.byID[lm.ID]; ok {
							r.forgetLocal(lm.ID, ls)
						}
					})
				}
				return err
			}
			r.stats.published.Add(1)
			return nil
		}
	}
	if err := event.PublishEncoded(r.nc, m, scopes, b, subjs); err != nil {
		if copies > 0 {
			r.order.passed(from.Proc, copies)
		}
		return err
	}
	r.stats.published.Add(1)
	return nil
}

// Register adds a registration to client rc's registry, held out of live
// chains until the cached events it matches have been replayed to it, and
// subscribes to the transient events it needs. The registration takes its
// place P in the events stream's order on the dispatch goroutine (see
// hold): every event for it is either at or below P, dispatched before it
// was added and read from the cache, or after P, waiting with its client's
// other events for the release. Call the returned function once the client
// has its reply: the replay then starts, on the dispatch goroutine. So the
// registration gets every event once, cached ones first; no replayed
// invocation precedes the reply; and an event the client, or anyone who
// heard from it, causes after its call returned reaches it in its chain.
//
// A client's registrations are replayed to one at a time. One made while
// another of the same client is held shares its place and is read for
// once that one is released; the client's events wait for both.
func (r *Router) Register(ctx context.Context, rc Recipient, codes []pmix.Status, info []pmix.Info, h bus.Handler) (bus.ID, func(), error) {
	proc, session, reg, ok := rc.Target()
	if !ok {
		return 0, nil, pmix.Errorf(pmix.ErrLostConnectionToClient, "client %v is not attached", proc)
	}
	if len(codes) > MaxRegistrationCodes {
		return 0, nil, pmix.Errorf(pmix.ErrBadParam, "a registration names %d codes; at most %d (register a default handler to take every code)", len(codes), MaxRegistrationCodes)
	}
	id, err := reg.RegisterHeld(codes, info, h)
	if err != nil {
		return 0, nil, err
	}
	undo := func(err error) (bus.ID, func(), error) {
		_ = reg.Deregister(id)
		r.unsubscribe(rc, id)
		return 0, nil, err
	}
	g, _ := reg.Lookup(id)
	if err := r.subscribe(ctx, rc, id, r.needsOf(proc, session, g)); err != nil {
		return undo(err)
	}
	placed := make(chan *hold, 1)
	r.post(func() { placed <- r.placeHold(ctx, rc, proc, session, reg, id) })
	var hd *hold
	select {
	case hd = <-placed:
	case <-r.done:
		return undo(pmix.Errorf(pmix.ErrLostConnection, "the agent is shutting down"))
	case <-ctx.Done():
		// It is placed all the same, once the dispatch goroutine gets
		// to it: abandoned there.
		r.post(func() { r.abandon(<-placed) })
		return undo(pmix.Errorf(pmix.ErrTimeout, "registering: %v", ctx.Err()))
	}
	if r.subscribed(hd) && !r.startRead(hd) {
		r.post(func() { r.abandon(hd) })
		return undo(pmix.Errorf(pmix.ErrLostConnection, "the agent is shutting down"))
	}
	return id, func() { r.post(func() { hd.replied = true; r.pump(hd) }) }, nil
}

// deregister removes a registration of client rc and the subscriptions
// only it needed.
func (r *Router) Deregister(rc Recipient, reg *bus.Registry, id bus.ID) error {
	if err := reg.Deregister(id); err != nil {
		return err
	}
	r.unsubscribe(rc, id)
	return nil
}

// forget drops the subscriptions a client that left needed.
func (r *Router) Forget(rc Recipient) {
	r.updMu.Lock()
	defer r.updMu.Unlock()
	for _, needs := range r.contrib[rc] {
		r.releaseNeeds(needs)
	}
	delete(r.contrib, rc)
}

// dispatchBatch bounds how many queued events one pass handles before the
// frames it produced are written.
const dispatchBatch = 256

// dispatch handles arriving events one at a time until the agent stops.
// Events already queued are handled as a batch with the sockets of the
// clients it writes to corked, so a burst costs one write per client
// rather than one per frame. A client is corked when the batch first runs
// its chain (corkForBatch), not every client at the start of every batch:
// that made each message the dispatch goroutine handled cost two locks per
// attached client.
//
// Control work posted with post runs before any event that arrives after
// it was posted: the goroutine runs it after it takes each event, before
// it handles it.
func (r *Router) Dispatch() {
	for {
		r.runControl()
		select {
		case msg := <-r.msgs:
			// What was posted while it waited runs first: the select
			// may have taken it over a posted signal (an event run early
			// is posted before its copy can come: local.go).
			r.runControl()
			r.inBatch = true
			r.checkFull()
			r.handle(msg)
		batch:
			for range dispatchBatch - 1 {
				select {
				case msg = <-r.msgs:
					r.runControl() // as above
					r.checkFull()
					r.handle(msg)
				default:
					break batch
				}
			}
			r.inBatch = false
			r.uncorkBatch()
		case <-r.ctlSig:
		case <-r.done:
			return
		}
	}
}

// checkFull checks for drops (checkDrops) if the inbox was full when the
// event just taken from it was (drops.go).
func (r *Router) checkFull() {
	n := len(r.msgs)
	if n >= cap(r.msgs)-1 { // more may have come since it was taken
		r.checkDrops()
	}
	// A backlog: the Retention keeps the job events stored from now on
	// until the dispatch passed them, in case NATS drops their copies.
	if r.retention != nil && n >= max(cap(r.msgs)/16, 4) {
		r.retention.Behind()
	}
}

// post queues f for the dispatch goroutine without waiting.
func (r *Router) post(f func()) {
	r.ctlMu.Lock()
	r.ctl = append(r.ctl, f)
	r.ctlMu.Unlock()
	select {
	case r.ctlSig <- struct{}{}:
	default:
	}
}

func (r *Router) runControl() {
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
func (r *Router) handle(msg *nats.Msg) {
	if r.seq != nil && msg.Sub.Subject == r.seq.subject {
		r.copyArrived(msg)
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
	r.arrived(sc, m)
}

// arrived runs an event that arrived, transient or cached, unless it came
// already: through overlapping subscriptions while they change, or stored
// under two scopes of this agent.
func (r *Router) arrived(sc subjects.Scope, m *event.Message) {
	if !r.seen.add(m.ID) {
		r.stats.duplicates.Add(1)
		return
	}
	r.receive(sc, m)
}

// receive runs an arriving event: a transient one, or a cached one in the
// stream's order.
func (r *Router) receive(sc subjects.Scope, m *event.Message) {
	r.stats.received.Add(1)
	r.deliver(sc, m, nil)
}

// deliver runs m through the chain of every attached client it is for.
// Registrations being replayed to are skipped by the chains; the event
// queues for them instead, or, once their replay has begun, waits with the
// client's other events for the release (see hold). Only the dispatch
// goroutine calls it. It returns how many clients' chains it ran.
//
// ls is how the event ran early (local.go), nil if it did not: its run
// leaves out the clients with registrations held, and records them; its
// copy runs each client's chain restricted to the registrations released
// since the run, those clients' whole.
func (r *Router) deliver(sc subjects.Scope, m *event.Message, ls *localSent) int {
	var d *delivery // the event read once for every client's chain
	ran := 0
	holding := r.nholds.Load() > 0
	run := ls != nil && !ls.copied // the early run, not the copy
	for _, rc := range r.host.Recipients() {
		proc, session, reg, ok := rc.Target()
		if !ok || !event.For(r.place, sc, m, proc, session) {
			continue
		}
		if d == nil {
			d = r.newDelivery(m, m.BusEvent(r.place.Cluster))
		}
		var from uint64
		switch {
		case run:
			if holding && r.isHeld(rc) {
				ls.held = append(ls.held, rc)
				continue // from the copy
			}
		case ls != nil:
			from = ls.from(rc)
		}
		if holding && r.holdEvent(rc, sc, m, from) {
			ran++
			continue // until the release
		}
		if d.run(rc, proc, reg, from) {
			ran++
		}
	}
	return ran
}

// directUncork is the most clients a batch's end writes to from the
// dispatch goroutine itself; for more, their senders write side by side.
const directUncork = 4

// uncorkBatch uncorks the clients the batch corked.
func (r *Router) uncorkBatch() {
	direct := len(r.corked) <= directUncork
	for rc := range r.corked {
		rc.Uncork(direct)
	}
	clear(r.corked)
}

// corkForBatch corks rc until the end of the batch the dispatch goroutine
// is handling, once, if it is handling one.
func (r *Router) corkForBatch(rc Recipient) {
	if !r.inBatch || rc == nil {
		return
	}
	if _, ok := r.corked[rc]; ok {
		return
	}
	if r.corked == nil {
		r.corked = make(map[Recipient]struct{})
	}
	rc.Cork()
	r.corked[rc] = struct{}{}
}

// notify runs the chain of client rc, whose registry is reg, for an event
// that is for it, and reports whether the client wants it.
func (r *Router) notify(rc Recipient, proc pmix.Proc, reg *bus.Registry, m *event.Message, ev bus.Event, from uint64) bool {
	return r.newDelivery(m, ev).run(rc, proc, reg, from)
}

// delivery is one event on its way to clients' chains: prepared once, so
// that each client's chain costs its own state and a closure of its proc.
type delivery struct {
	r   *Router
	m   *event.Message
	ev  *bus.Prepared
	src pmix.Proc
}

func (r *Router) newDelivery(m *event.Message, ev bus.Event) *delivery {
	return &delivery{r: r, m: m, ev: bus.Prepare(ev), src: ev.Source.Proc}
}

// run runs the chain of client proc, whose registry is reg, if a handler
// of it wants the event, and reports whether one did. rc is the client,
// corked for the dispatch goroutine's batch before its chain writes to
// it; the chain waits in its backlog if its window is full (Window).
//
// With from above 0, only the registrations released at or after stamp
// from run (an event run early: local.go).
func (d *delivery) run(rc Recipient, proc pmix.Proc, reg *bus.Registry, from uint64) bool {
	w := rc.Window()
	open := w.open()
	var c *bus.Chain
	var snap bus.Snapshot
	var ok bool
	switch {
	case from > 0:
		if snap, ok = reg.SnapshotSince(d.ev, from); ok && open {
			c = reg.StartFrom(d.ev, snap)
			ok = c != nil
		}
	case open:
		c = reg.Start(d.ev)
		ok = c != nil
	default:
		snap, ok = reg.Snapshot(d.ev)
	}
	if !ok {
		return false
	}
	d.r.corkForBatch(rc)
	d.r.stats.delivered.Add(1)
	if !open {
		w.wait(waitingChain{d: d, snap: snap}, proc, reg)
		return true
	}
	w.started()
	c.Run(d.done(proc, w))
	return true
}

// done returns what a chain of client proc calls with its outcome.
func (d *delivery) done(proc pmix.Proc, w *Window) func(bus.Outcome) {
	return func(o bus.Outcome) {
		d.r.outcome(d.m, d.src, proc, o)
		w.end()
	}
}

// outcome reports a chain of client that ended: queued for publishing,
// then told to the host.
func (r *Router) outcome(m *event.Message, source, client pmix.Proc, o bus.Outcome) {
	rep := event.OutcomeReport{EventID: m.ID, Cluster: string(r.place.Cluster), Node: r.place.Node, Client: client, Source: source, Outcome: o}
	if r.outcomes != nil {
		r.outcomes.Add(rep)
	}
	r.host.Outcome(rep)
}

// drop reports the chain of client proc ended before it started: the
// client went while the event waited in its backlog.
func (d *delivery) drop(proc pmix.Proc) {
	d.r.outcome(d.m, d.src, proc, bus.Outcome{Code: d.m.Code, Status: pmix.ErrInit})
}

// weight estimates the bytes of an invocation of the event, for the
// backlog's limit.
func (d *delivery) weight() int {
	if d.m.Size == 0 {
		return unknownEventSize + invokeOverhead
	}
	return d.m.Size + invokeOverhead
}

// MaxRegistrationCodes bounds the codes one registration may name: each
// is a Subscription per scope, so an unbounded list is an unbounded cost
// on the agent and the NATS server.
const MaxRegistrationCodes = 4096

// wildcardAbove is the number of codes beyond which a registration
// subscribes to its scopes' wildcards instead of a subject per code, and
// the registry's filter picks the codes: NATS's interest routing is then
// coarser, but a registration of many codes costs a few subscriptions.
const wildcardAbove = 32

// scopeNeed is what one registration needs of one scope: every code, or
// some codes.
type scopeNeed struct {
	scope subjects.Scope
	all   bool
	codes []pmix.Status
}

// needsOf returns what registration g of client proc (of session) needs
// subscribed: its client's scopes, for job events if it wants them and
// their environment twins for the codes it wants of those.
func (r *Router) needsOf(proc pmix.Proc, session string, g bus.Registration) []scopeNeed {
	scopes := event.ClientScopes(r.place, proc.Nspace, session)
	var out []scopeNeed
	add := func(codes []pmix.Status, env bool) {
		all := len(codes) == 0 || len(codes) > wildcardAbove
		if all {
			codes = nil
		}
		for _, sc := range scopes {
			if env {
				sc = sc.Environment()
			}
			out = append(out, scopeNeed{scope: sc, all: all, codes: codes})
		}
	}
	if g.WantsJob() {
		add(g.Codes, false)
	}
	if codes, ok := envCodes(g); ok {
		add(codes, true)
	}
	return out
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

// scopeInterest counts, for one scope, the registrations that need every
// code and those that need each code. The scope is subscribed to by its
// wildcard while any registration needs every code, else by a subject per
// code needed, so no event arrives twice through overlapping
// subscriptions.
type scopeInterest struct {
	scope subjects.Scope
	all   int
	codes map[pmix.Status]int
}

// subscribe records registration id of client rc and subscribes to what
// it needs beyond what is already subscribed, then waits (within ctx and
// flushTimeout) until the server knows it, so that an event notified
// after the registration call returned is not missed. The cost is the
// registration's own scopes and codes, whatever the number of clients.
// No lock is held across the flush: dispatch goes on meanwhile.
func (r *Router) subscribe(ctx context.Context, rc Recipient, id bus.ID, needs []scopeNeed) error {
	r.updMu.Lock()
	if r.contrib[rc] == nil {
		r.contrib[rc] = map[bus.ID][]scopeNeed{}
	}
	r.contrib[rc][id] = needs
	added, err := r.acquireNeeds(needs)
	r.updMu.Unlock()
	if err != nil || !added {
		return err
	}
	fctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	if err := r.nc.Flush(fctx); err != nil {
		return pmix.Errorf(pmix.ErrUnreach, "waiting for NATS to know the subscriptions: %w", err)
	}
	return nil
}

// unsubscribe drops what registration id of client rc needed and no other
// registration needs.
func (r *Router) unsubscribe(rc Recipient, id bus.ID) {
	r.updMu.Lock()
	defer r.updMu.Unlock()
	needs, ok := r.contrib[rc][id]
	if !ok {
		return
	}
	delete(r.contrib[rc], id)
	if len(r.contrib[rc]) == 0 {
		delete(r.contrib, rc)
	}
	r.releaseNeeds(needs)
}

// acquireNeeds counts needs in, subscribing where a count leaves zero, and
// reports whether it subscribed to anything. A scope moving to its
// wildcard subscribes to it before dropping its code subjects, so no event
// is missed meanwhile; the id filter drops the duplicates the overlap may
// bring. Called with updMu held.
func (r *Router) acquireNeeds(needs []scopeNeed) (added bool, err error) {
	sub := func(sc subjects.Scope, subjs []string) {
		for _, subj := range subjs {
			if e := r.subscribeSubject(sc, subj); e != nil && err == nil {
				err = e
			}
			added = true
		}
	}
	for _, n := range needs {
		in := r.interest[n.scope.Prefix()]
		if in == nil {
			in = &scopeInterest{scope: n.scope, codes: map[pmix.Status]int{}}
			r.interest[n.scope.Prefix()] = in
		}
		if n.all {
			in.all++
			if in.all == 1 {
				sub(in.scope, r.patterns(in.scope, nil))
				for c := range in.codes {
					r.unsubscribeSubjects(r.patterns(in.scope, []pmix.Status{c}))
				}
			}
			continue
		}
		for _, c := range n.codes {
			in.codes[c]++
			if in.codes[c] == 1 && in.all == 0 {
				sub(in.scope, r.patterns(in.scope, []pmix.Status{c}))
			}
		}
	}
	return added, err
}

// releaseNeeds counts needs out, unsubscribing where a count reaches zero.
// Called with updMu held.
func (r *Router) releaseNeeds(needs []scopeNeed) {
	for _, n := range needs {
		in := r.interest[n.scope.Prefix()]
		if in == nil {
			continue
		}
		if n.all {
			in.all--
			if in.all == 0 {
				for c := range in.codes {
					_ = r.subscribeSubjects(in.scope, r.patterns(in.scope, []pmix.Status{c}))
				}
				r.unsubscribeSubjects(r.patterns(in.scope, nil))
			}
		} else {
			for _, c := range n.codes {
				in.codes[c]--
				if in.codes[c] <= 0 {
					delete(in.codes, c)
					if in.all == 0 {
						r.unsubscribeSubjects(r.patterns(in.scope, []pmix.Status{c}))
					}
				}
			}
		}
		if in.all == 0 && len(in.codes) == 0 {
			delete(r.interest, n.scope.Prefix())
		}
	}
}

func (r *Router) subscribeSubjects(sc subjects.Scope, subjs []string) error {
	var first error
	for _, subj := range subjs {
		if err := r.subscribeSubject(sc, subj); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// subscribeSubject subscribes to one subject of scope sc, if not yet.
func (r *Router) subscribeSubject(sc subjects.Scope, subj string) error {
	r.mu.Lock()
	_, have := r.subs[subj]
	if !have {
		r.scopes[subj] = sc // before any message can arrive
	}
	r.mu.Unlock()
	if have {
		return nil
	}
	sub, err := r.nc.Subscribe(subj, r.msgs)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		delete(r.scopes, subj)
		return pmix.Errorf(pmix.ErrUnreach, "subscribing to %s: %w", subj, err)
	}
	r.subs[subj] = sub
	return nil
}

func (r *Router) unsubscribeSubjects(subjs []string) {
	for _, subj := range subjs {
		r.mu.Lock()
		sub, ok := r.subs[subj]
		sc := r.scopes[subj]
		delete(r.subs, subj)
		delete(r.scopes, subj)
		r.mu.Unlock()
		if !ok {
			continue
		}
		if n, err := sub.Dropped(); err == nil {
			if sc.IsEnvironment() {
				r.stats.droppedEnvGone.Add(uint64(n))
			} else {
				r.stats.droppedJobGone.Add(uint64(n))
			}
		}
		_ = sub.Unsubscribe()
	}
}

// dropped is how many arriving events NATS dropped because the inbox was
// full (slow consumer), over every Subscription the router has had.
func (r *Router) dropped() uint64 {
	job, env := r.droppedByKind()
	if r.seq != nil {
		if d, err := r.seq.sub.Dropped(); err == nil {
			job += uint64(d)
		}
	}
	return job + env
}

// subscriptions counts the subjects subscribed to.
func (r *Router) subscriptions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.subs)
}

// subjects returns the subjects subscribed to, sorted.
func (r *Router) Subjects() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.subs))
}

// close drops every Subscription.
func (r *Router) Close() {
	r.updMu.Lock()
	defer r.updMu.Unlock()
	r.mu.Lock()
	subjs := slices.Collect(maps.Keys(r.subs))
	r.mu.Unlock()
	r.unsubscribeSubjects(subjs)
	clear(r.interest)
	clear(r.contrib)
}

// recentIDs remembers the last n event ids, to drop an event that arrives
// twice (through overlapping subscriptions while they change).
type recentIDs struct {
	ring []string // grows to max, then wraps
	max  int
	next int
	set  map[string]struct{}
}

func newRecentIDs(n int) recentIDs {
	return recentIDs{max: n, set: map[string]struct{}{}}
}

// has reports whether id is recorded.
func (r *recentIDs) has(id string) bool {
	_, ok := r.set[id]
	return ok
}

// add records id and reports whether it was new.
func (r *recentIDs) add(id string) bool {
	if _, ok := r.set[id]; ok {
		return false
	}
	r.set[id] = struct{}{}
	if len(r.ring) < r.max {
		r.ring = append(r.ring, id)
		return true
	}
	delete(r.set, r.ring[r.next])
	r.ring[r.next] = id
	r.next = (r.next + 1) % len(r.ring)
	return true
}
