package agent

import (
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/jetstream"
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

// jobScopes are the scopes through which job events reach a client.
func (a *Agent) jobScopes(e *clientEntry) []subjects.Scope { return a.jobScopesOf(e.job) }

// jobScopesOf are the scopes through which job events reach this agent's
// clients of job j.
func (a *Agent) jobScopesOf(j *job) []subjects.Scope {
	c := string(a.cfg.Cluster)
	s := []subjects.Scope{
		subjects.Node(c, a.cfg.Node),
		subjects.Namespace(c, j.nspace),
		subjects.Agent(c, a.cfg.Node),
		subjects.Global(),
	}
	if j.session != "" {
		s = append(s, subjects.Session(c, j.session))
	}
	return s
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
	env := subjects.Environment(string(r.a.cfg.Cluster))
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
			if g.Category == bus.CategoryDefault {
				if g.WantsEnvironment(0) {
					need(env).add(nil)
				}
				continue
			}
			var envCodes []pmix.Status
			for _, c := range g.Codes {
				if g.WantsEnvironment(c) {
					envCodes = append(envCodes, c)
				}
			}
			if len(envCodes) > 0 {
				need(env).add(envCodes)
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
	m, err := UnmarshalMessage(msg.Data)
	if err != nil {
		r.a.log.Warn("dropping malformed event", "subject", msg.Subject, "err", err)
		return
	}
	if !r.seen.add(m.ID) { // only the dispatch goroutine touches seen
		return
	}
	r.a.deliver(sc, m)
}

// busEvent is m as a client's chain sees it.
func (a *Agent) busEvent(m *Message) bus.Event {
	src := m.Source
	if src.Cluster != string(a.cfg.Cluster) && !src.Proc.IsZero() {
		// RFC0003: a proc of another cluster is named cluster:nspace.
		src.Proc.Nspace = cluster.Qualify(cluster.ID(src.Cluster), src.Proc.Nspace)
	}
	return bus.Event{Code: m.Code, Source: src, Range: m.Range, Environment: m.Environment, Info: m.Info}
}

// deliver runs m through the chain of every attached client it is for.
// Registrations being replayed to are skipped by the chains; the event
// queues for them instead. Only the dispatch goroutine calls it.
func (a *Agent) deliver(sc subjects.Scope, m *Message) {
	ev := a.busEvent(m)
	holding := a.router.nholds.Load() > 0
	for _, cc := range a.clients() {
		e, reg, ok := cc.attached()
		if !ok || !a.inScope(sc, m, e) {
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
func (r *router) queueForHolds(cc *clientConn, e *clientEntry, sc subjects.Scope, m *Message, ev bus.Event) {
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

// inScope reports whether client e is among those an event on scope sc is
// for.
func (a *Agent) inScope(sc subjects.Scope, m *Message, e *clientEntry) bool {
	switch sc.Kind() {
	case subjects.KindNamespace:
		if sc.Target().Nspace != e.proc.Nspace {
			return false
		}
	case subjects.KindSession:
		if sc.Target().Session != e.job.session {
			return false
		}
	}
	if m.Range == pmix.RangeCustom && !m.Environment {
		for _, t := range m.Targets {
			if a.localProc(t).Matches(e.proc) {
				return true
			}
		}
		return false
	}
	return true
}

// localProc strips this cluster's qualifier from a proc's nspace; procs of
// other clusters keep theirs (and so match no local client).
func (a *Agent) localProc(p pmix.Proc) pmix.Proc {
	if id, ns, q := cluster.Split(p.Nspace); q && id == a.cfg.Cluster {
		p.Nspace = ns
	}
	return p
}

func (a *Agent) reportOutcome(m *Message, source, client pmix.Proc, o bus.Outcome) {
	rep := OutcomeReport{EventID: m.ID, Cluster: string(a.cfg.Cluster), Node: a.cfg.Node, Client: client, Source: source, Outcome: o}
	if fs := a.outFuncs.Load(); fs != nil {
		for _, f := range *fs {
			f(rep)
		}
	}
	a.outcomes.add(rep)
}

// publish sends an event to the subjects of its range. from is the local
// client that notified it, nil for the host RM.
func (r *router) publish(m *Message, from *clientEntry) error {
	scopes, err := r.a.scopesFor(m, from)
	if err != nil {
		return err
	}
	return Publish(r.a.nc, m, scopes)
}

// Publish sends an event message to the given scopes (see RMScopes), as an
// agent does: on each scope's subject, or its transient subject when the
// event carries PMIX_EVENT_DO_NOT_CACHE, with the event id in the
// Nats-Msg-Id header; a cacheable job event also goes to the job-events
// copy of its subject, which keeps it for clients that have not received it
// (see package jetstream).
func Publish(nc *nats.Conn, m *Message, scopes []subjects.Scope) error {
	b, err := m.Marshal()
	if err != nil {
		return pmix.Errorf(pmix.ErrPackFailure, "encoding event: %w", err)
	}
	transient := pmix.Flag(m.Info, pmix.KeyEventDoNotCache)
	hdr := nats.Header{jetstream.MsgIDHeader: []string{m.ID}}
	send := func(subj string) error {
		if err := nc.PublishMsg(&nats.Msg{Subject: subj, Header: hdr, Data: b}); err != nil {
			return pmix.Errorf(pmix.ErrUnreach, "publishing %v to %s: %w", m.Code, subj, err)
		}
		return nil
	}
	for _, sc := range scopes {
		if transient {
			if err := send(sc.TransientSubject(m.Code)); err != nil {
				return err
			}
			continue
		}
		subj := sc.Subject(m.Code)
		if err := send(subj); err != nil {
			return err
		}
		if !m.Environment && sc.Kind() != subjects.KindRM && sc.Kind() != subjects.KindEnvironment {
			if err := send(subjects.JobCacheSubject(subj)); err != nil {
				return err
			}
		}
	}
	return nil
}

// RMScopes resolves the range of an event sent by a host RM of cluster c
// on node (with no job table at hand, unlike an agent) to the scopes it is
// published on, and fills m.Targets for CUSTOM: each target goes to its
// nspace's scope, where agents pick the listed procs. The rules are an
// agent's (see Agent.Notify).
func RMScopes(c cluster.ID, node string, m *Message) ([]subjects.Scope, error) {
	a := &Agent{cfg: Config{Cluster: c, Node: node}, jobs: map[string]*job{}}
	return a.scopesFor(m, nil)
}

// scopesFor resolves an event's range to the scopes it is published on, and
// fills m.Targets for CUSTOM.
func (a *Agent) scopesFor(m *Message, from *clientEntry) ([]subjects.Scope, error) {
	c := string(a.cfg.Cluster)
	if m.Environment {
		return []subjects.Scope{subjects.Environment(c)}, nil
	}
	switch m.Range {
	case pmix.RangeRM:
		return []subjects.Scope{subjects.RM(c)}, nil
	case pmix.RangeGlobal:
		return []subjects.Scope{subjects.Global()}, nil
	case pmix.RangeLocal:
		node := a.cfg.Node
		if v, ok := pmix.LookupValue(m.Info, pmix.KeyHostname); ok && from == nil {
			if s, ok := v.Str(); ok && s != "" {
				node = s
			}
		}
		return []subjects.Scope{subjects.Node(c, node)}, nil
	case pmix.RangeNamespace:
		if from != nil {
			return []subjects.Scope{subjects.Namespace(c, from.proc.Nspace)}, nil
		}
		ns := targetNspace(m.Info)
		if ns == "" {
			return nil, pmix.Errorf(pmix.ErrBadParam, "a PMIX_RANGE_NAMESPACE event from the host needs %s or affected procs of one nspace", pmix.KeyNspace)
		}
		return []subjects.Scope{a.nspaceScope(ns)}, nil
	case pmix.RangeSession:
		sess := ""
		if from != nil {
			sess = from.job.session
		} else if v, ok := pmix.LookupValue(m.Info, pmix.KeySessionID); ok {
			if s, ok := v.Str(); ok {
				sess = s
			} else if n, ok := v.Int(); ok {
				sess = strconv.FormatInt(n, 10)
			}
		}
		if sess == "" {
			return nil, pmix.Errorf(pmix.ErrBadParam, "a PMIX_RANGE_SESSION event needs a session (%s)", pmix.KeySessionID)
		}
		return []subjects.Scope{subjects.Session(c, sess)}, nil
	case pmix.RangeCustom:
		return a.customScopes(m)
	case pmix.RangeProcLocal:
		return nil, pmix.Errorf(pmix.ErrBadParam, "PMIX_RANGE_PROC_LOCAL events never leave their process")
	}
	return nil, pmix.Errorf(pmix.ErrBadParam, "invalid range %v", m.Range)
}

// nspaceScope is the namespace scope of a possibly cluster-qualified nspace.
func (a *Agent) nspaceScope(ns string) subjects.Scope {
	if id, local, q := cluster.Split(ns); q {
		return subjects.Namespace(string(id), local)
	}
	return subjects.Namespace(string(a.cfg.Cluster), ns)
}

func targetNspace(info []pmix.Info) string {
	if v, ok := pmix.LookupValue(info, pmix.KeyNspace); ok {
		if s, ok := v.Str(); ok {
			return s
		}
	}
	var procs []pmix.Proc
	if v, ok := pmix.LookupValue(info, pmix.KeyEventAffectedProcs); ok {
		procs, _ = v.Procs()
	} else if v, ok := pmix.LookupValue(info, pmix.KeyEventAffectedProc); ok {
		procs, _ = v.Procs()
	}
	ns := ""
	for _, p := range procs {
		if ns != "" && p.Nspace != ns {
			return ""
		}
		ns = p.Nspace
	}
	return ns
}

// customScopes sends a CUSTOM event to the agent of each node hosting a
// target of a known local job, and to the namespace scope of targets in
// jobs this agent does not know (another cluster's, say), whose agents
// filter by the target list.
func (a *Agent) customScopes(m *Message) ([]subjects.Scope, error) {
	v, ok := pmix.LookupValue(m.Info, pmix.KeyEventCustomRange)
	var targets []pmix.Proc
	if ok {
		targets, ok = v.Procs()
	}
	if !ok || len(targets) == 0 {
		return nil, pmix.Errorf(pmix.ErrBadParam, "a PMIX_RANGE_CUSTOM event needs %s with at least one proc", pmix.KeyEventCustomRange)
	}
	m.Targets = targets
	c := string(a.cfg.Cluster)
	seen := map[string]bool{}
	var out []subjects.Scope
	addScope := func(sc subjects.Scope) {
		if !seen[sc.Prefix()] {
			seen[sc.Prefix()] = true
			out = append(out, sc)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range targets {
		lt := a.localProc(t)
		j, known := a.jobs[lt.Nspace]
		if _, _, q := cluster.Split(lt.Nspace); q || !known {
			addScope(a.nspaceScope(t.Nspace))
			continue
		}
		if lt.Rank == pmix.RankWildcard {
			for _, node := range j.procs {
				addScope(subjects.Agent(c, node))
			}
			continue
		}
		node, ok := j.procs[lt.Rank]
		if !ok {
			return nil, pmix.Errorf(pmix.ErrBadParam, "custom range target %v: job %s has no such rank", t, lt.Nspace)
		}
		addScope(subjects.Agent(c, node))
	}
	return out, nil
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
