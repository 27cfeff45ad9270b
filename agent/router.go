package agent

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// router maps events to subjects on the way out, keeps the agent's NATS
// subscriptions equal to what its clients' registrations need, and hands
// arriving events to the chains of the local clients in range.
//
// Every subscription feeds one channel that one goroutine drains, so the
// agent handles events in the order its NATS connection received them,
// whatever subjects they came on, and a client's handlers are invoked in
// that order.
type router struct {
	a    *Agent
	msgs chan *nats.Msg

	// Work for the dispatch goroutine, which runs it before the next
	// event: a registration's replay and release.
	ctlMu  sync.Mutex
	ctl    []func()
	ctlSig chan struct{}

	// holds are registrations being replayed to, by client; only the
	// dispatch goroutine reads them, under mu since others add them.
	holds  map[*clientConn][]*hold
	nholds atomic.Int32 // len of all holds, read on every event without mu

	mu     sync.Mutex
	subs   map[string]*nats.Subscription // by subject
	scopes map[string]subjects.Scope     // by subject
	seen   recentIDs
}

// inboxSize bounds the events received but not yet dispatched. NATS drops
// (and reports as a slow consumer) what does not fit.
const inboxSize = 1 << 16

func newRouter(a *Agent) *router {
	return &router{
		a: a, msgs: make(chan *nats.Msg, inboxSize), ctlSig: make(chan struct{}, 1),
		holds: make(map[*clientConn][]*hold),
		subs:  make(map[string]*nats.Subscription), scopes: make(map[string]subjects.Scope),
		seen: newRecentIDs(4096),
	}
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
			conns := r.a.clients()
			for _, cc := range conns {
				cc.w.Cork()
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
			for _, cc := range conns {
				if err := cc.w.Uncork(); err != nil {
					cc.close(nil) // it stopped reading; see writeTimeout
				}
			}
		case <-r.ctlSig:
		case <-r.a.done:
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

func (r *router) handle(msg *nats.Msg) {
	r.mu.Lock()
	sc, ok := r.scopes[msg.Sub.Subject]
	r.mu.Unlock()
	if ok {
		r.arrived(sc, msg)
	}
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

// clients returns the attached clients: a shared slice, not to be
// modified, read without locking on every event.
func (a *Agent) clients() []*clientConn {
	if p := a.attached.Load(); p != nil {
		return *p
	}
	return nil
}

// place is where the agent runs, for the routing rules of package event.
func (a *Agent) place() event.Place { return event.Place{Cluster: a.cfg.Cluster, Node: a.cfg.Node} }

// jobScopes are the scopes through which events reach a client.
func (a *Agent) jobScopes(e *clientEntry) []subjects.Scope {
	return event.ClientScopes(a.place(), e.job.nspace, e.job.session)
}

// update brings the subscriptions in line with the registrations of the
// attached clients. A wildcard for a scope replaces its single-code
// subjects, so no event arrives twice through overlapping subscriptions.
func (r *router) update() error {
	needs := map[string]*scopeNeed{}
	need := func(sc subjects.Scope) *scopeNeed {
		n, ok := needs[sc.Prefix()]
		if !ok {
			n = &scopeNeed{scope: sc, codes: map[pmix.Status]bool{}}
			needs[sc.Prefix()] = n
		}
		return n
	}
	for _, cc := range r.a.clients() {
		e, reg, ok := cc.attached()
		if !ok {
			continue
		}
		scopes := r.a.jobScopes(e)
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

	r.mu.Lock()
	defer r.mu.Unlock()
	var firstErr error
	// Subscribe before unsubscribing, so a scope moving from single codes
	// to its wildcard never misses an event; the id filter drops the
	// duplicates the overlap may bring.
	for _, subj := range slices.Sorted(maps.Keys(want)) {
		if _, ok := r.subs[subj]; ok {
			continue
		}
		sub, err := r.a.nc.ChanSubscribe(subj, r.msgs)
		if err != nil {
			if firstErr == nil {
				firstErr = pmix.Errorf(pmix.ErrUnreach, "subscribing to %s: %w", subj, err)
			}
			continue
		}
		r.subs[subj] = sub
		r.scopes[subj] = want[subj]
	}
	for subj, sub := range r.subs {
		if _, ok := want[subj]; !ok {
			_ = sub.Unsubscribe()
			delete(r.subs, subj)
			delete(r.scopes, subj)
		}
	}
	if firstErr != nil {
		return firstErr
	}
	// The registration call returns once the server knows the interest, so
	// an event notified after it is not missed.
	if err := r.a.nc.Flush(); err != nil {
		return pmix.Errorf(pmix.ErrUnreach, "flushing subscriptions: %w", err)
	}
	return nil
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

// Subjects returns the subjects the agent is subscribed to, sorted.
func (a *Agent) Subjects() []string {
	a.router.mu.Lock()
	defer a.router.mu.Unlock()
	return slices.Sorted(maps.Keys(a.router.subs))
}

func (r *router) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for subj, sub := range r.subs {
		_ = sub.Unsubscribe()
		delete(r.subs, subj)
		delete(r.scopes, subj)
	}
}

// arrived decodes an event and runs the chains of the local clients in its
// range.
func (r *router) arrived(sc subjects.Scope, msg *nats.Msg) {
	m, err := event.UnmarshalMessage(msg.Data)
	if err != nil {
		r.a.log.Warn("dropping malformed event", "subject", msg.Subject, "err", err)
		return
	}
	if !r.seen.add(m.ID) { // only the dispatch goroutine touches seen
		return
	}
	r.a.deliver(sc, m)
}

// deliver runs m through the chain of every attached client it is for.
// Registrations being replayed to are skipped by the chains; the event
// queues for them instead. Only the dispatch goroutine calls it.
func (a *Agent) deliver(sc subjects.Scope, m *event.Message) {
	ev := m.BusEvent(a.cfg.Cluster)
	holding := a.router.nholds.Load() > 0
	for _, cc := range a.clients() {
		e, reg, ok := cc.attached()
		if !ok || !event.For(a.place(), sc, m, e.proc, e.job.session) {
			continue
		}
		if holding {
			a.router.queueForHolds(cc, e, sc, m, ev)
		}
		if !reg.Wants(ev) {
			continue
		}
		client := e.proc
		reg.Notify(ev, func(o bus.Outcome) { a.reportOutcome(m, ev.Source.Proc, client, o) })
	}
}

// queueForHolds keeps ev for the held registrations of cc that accept it.
func (r *router) queueForHolds(cc *clientConn, e *clientEntry, sc subjects.Scope, m *event.Message, ev bus.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	self := r.a.origin(e)
	for _, h := range r.holds[cc] {
		if h.reg.Accepts(ev, self) {
			h.queue = append(h.queue, heldEvent{m: m, ev: ev, sc: sc})
		}
	}
}

// addHold starts queueing the live events that a registration, just
// registered held, accepts.
func (r *router) addHold(cc *clientConn, id bus.ID) *hold {
	h := &hold{cc: cc, id: id}
	cc.mu.Lock()
	reg := cc.reg
	cc.mu.Unlock()
	h.reg, _ = reg.Lookup(id)
	r.mu.Lock()
	r.holds[cc] = append(r.holds[cc], h)
	r.nholds.Add(1)
	r.mu.Unlock()
	return h
}

// dropHold forgets a hold without releasing its registration.
func (r *router) dropHold(h *hold) {
	r.mu.Lock()
	defer r.mu.Unlock()
	before := len(r.holds[h.cc])
	hs := slices.DeleteFunc(r.holds[h.cc], func(x *hold) bool { return x == h })
	r.nholds.Add(int32(len(hs) - before))
	if len(hs) == 0 {
		delete(r.holds, h.cc)
	} else {
		r.holds[h.cc] = hs
	}
}

func (a *Agent) reportOutcome(m *event.Message, source, client pmix.Proc, o bus.Outcome) {
	rep := event.OutcomeReport{EventID: m.ID, Cluster: string(a.cfg.Cluster), Node: a.cfg.Node, Client: client, Source: source, Outcome: o}
	if fs := a.outFuncs.Load(); fs != nil {
		for _, f := range *fs {
			f(rep)
		}
	}
	a.outcomes.add(rep)
}

// publish sends an event to the subjects of its range. from is the local
// client that notified it, nil for the host RM.
func (r *router) publish(m *event.Message, from *clientEntry) error {
	var sender *event.Sender
	if from != nil {
		sender = &event.Sender{Proc: from.proc, Session: from.job.session}
	}
	scopes, err := event.Scopes(r.a.place(), m, sender, agentJobs{r.a})
	if err != nil {
		return err
	}
	return event.Publish(r.a.nc, m, scopes)
}

// agentJobs is the agent's job table as the routing rules read it.
type agentJobs struct{ a *Agent }

func (t agentJobs) Nodes(nspace string, rank pmix.Rank) ([]string, bool) {
	t.a.mu.Lock()
	defer t.a.mu.Unlock()
	j, ok := t.a.jobs[nspace]
	if !ok {
		return nil, false
	}
	if rank == pmix.RankWildcard {
		nodes := make([]string, 0, len(j.procs))
		for _, n := range j.procs {
			nodes = append(nodes, n)
		}
		slices.Sort(nodes)
		return slices.Compact(nodes), true
	}
	if n, ok := j.procs[rank]; ok {
		return []string{n}, true
	}
	return nil, true
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
