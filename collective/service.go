package collective

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// Service runs the collectives of one agent's processes, and coordinates
// those led by the jobs whose lowest rank the agent hosts (see doc.go). It
// holds the data its processes committed and what fences brought from the
// others. Safe for concurrent use.
type Service struct {
	cfg  Config
	log  *slog.Logger
	kv   *store
	sigs sigCache

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	run string // unique to this service: new nspaces are named after it
	seq uint64 // new nspaces named so far

	mu     sync.Mutex
	closed bool
	open   map[string][]*local // by signature, oldest first
	gens   map[string]uint64   // by signature: the last instance begun here
	// sigsOf: the signatures in gens of operations among one job's
	// processes, by its qualified nspace, so that the job's end forgets
	// their counts (forgetJobLocked): without it gens grew by every job's
	// operations for the agent's life.
	sigsOf map[string]map[string]bool
	leads  map[string]*nats.Subscription

	// homes are the clusters that name the jobs of the agent's table
	// that run on several clusters (Config.Home), each job's as it was
	// registered; guarded by homeMu, which is taken with or without mu.
	homeMu   sync.Mutex
	homes    map[string]cluster.ID
	coord    map[opKey]*coordinated
	finished map[opKey]finished
	// late: by signature, the local participants that had not arrived
	// when an instance failed; each one's next call gets that failure.
	late map[string]map[pmix.Proc]finished
	// direct: the subscriptions answering for the data of the procs that
	// committed here (direct.go).
	direct map[pmix.Proc]*nats.Subscription
	// groups: the members of the nspaces connects gave participants of
	// this agent, by new nspace (qualified), in new rank order.
	groups map[string]*group
	// dead: the processes this agent heard terminated, and when
	// (gone.go), so that a second report does nothing.
	dead map[pmix.Proc]deadProc
	// goneMembers: the members of groups here marked gone, of any group
	// (group.gone), so that deadLocked need not visit every group.
	goneMembers map[pmix.Proc]bool
	// deadGen counts what dead and goneMembers gained: an operation's
	// arrivals look for its dead participants again only when it moved
	// (local.deadSeen), not on every arrival (128 ranks of a node
	// arriving cost 128 × 128 lookups so).
	deadGen  uint64
	goneSubs map[string]*nats.Subscription // by qualified nspace
	asked    map[string]bool               // nspaces whose terminations this agent asked for (AskSubject)
	askSub   *nats.Subscription            // AskSubject of this cluster
	checkSub *nats.Subscription            // CheckSubject of this agent
	// askHomes: AskSubject of the clusters that name jobs across clusters
	// this agent hosts ranks of (their coordinators ask there).
	askHomes map[cluster.ID]*nats.Subscription
	// writes: the memberships to store, in order, and whether a goroutine
	// is storing them.
	writes  []func(context.Context) error
	writing bool
	// jobInfo: the job-level info of other clusters' nspaces, which
	// connects brought (RFC0003), by qualified nspace.
	jobInfo map[string][]pmix.Info
	// invites: the PMIx group invitations this agent's leaders have out
	// (pgroup.go), by leader and group name.
	invites map[inviteKey]*nats.Subscription
	// earlyLeft: leave notices for PMIx groups this agent does not know
	// (yet), by group name as the members gave it: a member may leave as
	// soon as its own agent had the construct's or invitation's release,
	// before this agent had it (pgroup.go, memberLeft).
	earlyLeft map[string]map[pmix.Proc]time.Time
	// ends is cancelled and replaced whenever a process terminated or a
	// job was deregistered (endsLocked): the gets waiting for a key
	// (direct.go) look again whether theirs will ever come.
	ends    context.Context
	endNews context.CancelFunc
	// jobsEnded: the jobs of this agent's table deregistered, by qualified
	// nspace, and when: a get waiting for one of their procs ends.
	jobsEnded map[string]time.Time
}

// opKey names one instance of an operation: the n-th time the same
// participants run the same operation with the same id (every participant
// runs them in the same order, so every agent counts the same n).
type opKey struct {
	sig string
	gen uint64
}

// Request is one local participant's call of a collective.
type Request struct {
	Kind Kind
	// ID tells apart operations of the same kind and participants
	// (PMIX_CONNECT_ID, pmix.KeyCollectiveID); every participant gives the
	// same.
	ID string
	// Procs are the participants; an unqualified nspace is of this
	// cluster, RankWildcard every rank of its nspace.
	Procs []pmix.Proc
	// Self is the calling process, one of Procs.
	Self pmix.Proc
	// Timeout fails the operation for every participant with ErrTimeout
	// once it passed since this agent's first participant arrived; 0 means
	// none (a warning is logged every Config.WarnAfter instead).
	Timeout time.Duration
	// Collect carries every participant's committed REMOTE and GLOBAL data
	// to every participating agent (PMIX_COLLECT_DATA).
	Collect bool
	// Flags are RFC0003's connect attributes (FlagsOf); a disconnect
	// reads FlagNotifyEach only.
	Flags Flags
}

// New returns a service on cfg's connection. It does no I/O: the agent
// calls JobChanged as jobs come and go.
//
// Errors: an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	s := &Service{
		run: nuid.Next(),
		cfg: cfg, log: cfg.Logger, kv: newStore(),
		open: map[string][]*local{}, gens: map[string]uint64{}, sigsOf: map[string]map[string]bool{}, leads: map[string]*nats.Subscription{}, homes: map[string]cluster.ID{},
		askHomes: map[cluster.ID]*nats.Subscription{},
		coord:    map[opKey]*coordinated{}, finished: map[opKey]finished{}, late: map[string]map[pmix.Proc]finished{},
		direct: map[pmix.Proc]*nats.Subscription{}, groups: map[string]*group{}, jobInfo: map[string][]pmix.Info{},
		invites: map[inviteKey]*nats.Subscription{},
		dead:    map[pmix.Proc]deadProc{}, goneSubs: map[string]*nats.Subscription{}, asked: map[string]bool{}, goneMembers: map[pmix.Proc]bool{}, earlyLeft: map[string]map[pmix.Proc]time.Time{},
		jobsEnded: map[string]time.Time{},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.ends, s.endNews = context.WithCancel(s.ctx)
	return s, nil
}

// goFunc runs f on a goroutine Close waits for, unless Close has begun.
// Called with s.mu held.
func (s *Service) goFuncLocked(f func()) {
	if s.closed {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// Close fails the operations in progress here with ErrClosed, stops
// coordinating, and waits for the service's goroutines until ctx ends. It
// keeps no data. Safe to call twice.
//
// It returns ctx.Err() if ctx ends first.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		for ns, sub := range s.leads {
			_ = sub.Unsubscribe()
			delete(s.leads, ns)
		}
		for p, sub := range s.direct {
			_ = sub.Unsubscribe()
			delete(s.direct, p)
		}
		for ns, sub := range s.goneSubs {
			_ = sub.Unsubscribe()
			delete(s.goneSubs, ns)
		}
		if s.askSub != nil {
			_ = s.askSub.Unsubscribe()
		}
		if s.checkSub != nil {
			_ = s.checkSub.Unsubscribe()
		}
		for c, sub := range s.askHomes {
			_ = sub.Unsubscribe()
			delete(s.askHomes, c)
		}
		for _, ls := range s.open {
			for _, l := range ls {
				s.finishLocked(l, ErrClosed)
			}
		}
		for k, co := range s.coord {
			co.stop()
			delete(s.coord, k)
		}
	}
	s.mu.Unlock()
	s.cancel()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flushTimeout bounds the wait for the server to know a subscription.
const flushTimeout = 5 * time.Second

// JobChanged is called by the agent when a job of its cluster is
// registered, replaced or deregistered: the agent hosting a job's lowest
// rank coordinates the operations that job leads, and subscribes for
// their contributions before JobChanged returns (ctx bounds the wait for
// the server to know). The first call also subscribes to the asks for
// this cluster's terminations (AskSubject). A deregistered job's
// collected data is dropped.
//
// Errors: pmix.ErrUnreach if NATS refused the subscription; ErrClosed.
func (s *Service) JobChanged(ctx context.Context, nspace string) error {
	ranks := s.cfg.Jobs(nspace)
	home := s.cfg.Cluster
	if s.cfg.Home != nil && ranks != nil {
		if h := s.cfg.Home(nspace); h != "" {
			home = h
		}
	}
	s.homeMu.Lock()
	if ranks == nil {
		if h, ok := s.homes[nspace]; ok {
			home = h
		}
		delete(s.homes, nspace)
	} else if s.cfg.Home != nil && s.cfg.Home(nspace) != "" {
		s.homes[nspace] = home
	} else {
		delete(s.homes, nspace)
	}
	s.homeMu.Unlock()
	_, node, ok := lowestRank(ranks)
	lead := ok && node == s.cfg.Node
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	// An agent with processes answers the asks for their terminations
	// from the start: long before one ends, NATS knows it everywhere.
	listening := s.askSub != nil
	s.listenLocked()
	if ranks != nil && home != s.cfg.Cluster && s.listenHomeLocked(home) {
		listening = false // a new subscription: wait for the server to know it
	}
	if ranks == nil {
		q := cluster.Qualify(home, nspace)
		s.kv.forget(func(p pmix.Proc) bool { return p.Nspace == q })
		now := time.Now()
		for ns, at := range s.jobsEnded {
			if now.Sub(at) > s.cfg.Remember {
				delete(s.jobsEnded, ns)
			}
		}
		s.jobsEnded[q] = now
		s.endsLocked()
		for p, sub := range s.direct {
			if p.Nspace == q {
				_ = sub.Unsubscribe()
				delete(s.direct, p)
			}
		}
		s.forgetJobLocked(q)
	} else {
		delete(s.jobsEnded, cluster.Qualify(home, nspace))
	}
	sub := s.leads[nspace]
	switch {
	case lead && sub == nil:
		var err error
		sub, err = s.cfg.Conn.Subscribe(LeadSubject(s.cfg.Cluster, nspace), s.contributed)
		if err != nil {
			s.mu.Unlock()
			return pmix.Errorf(pmix.ErrUnreach, "subscribing to the collectives led by %s: %w", nspace, err)
		}
		s.leads[nspace] = sub
	case !lead && sub != nil:
		_ = sub.Unsubscribe()
		delete(s.leads, nspace)
	case listening:
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	if err := s.cfg.Conn.FlushWithContext(ctx); err != nil {
		return pmix.Errorf(pmix.ErrUnreach, "waiting for NATS to know the collective subscriptions: %w", err)
	}
	return nil
}

// forgetJobLocked forgets what this agent kept for the operations of
// nspace q, a job deregistered here: its operations' instance counts
// (none is open here: its processes here are gone), and its termination
// notices' subscription unless a group here still has a member of it or
// an operation coordinated here involves it. A long-lived agent kept one
// count and, where it coordinated, one subscription per job it ever ran
// (the 2000-run soak, TestRunLoopLeavesNothing). A job run again under
// the same nspace starts counting afresh, at every agent alike.
func (s *Service) forgetJobLocked(q string) {
	for sig := range s.sigsOf[q] {
		if len(s.open[sig]) == 0 {
			delete(s.gens, sig)
			delete(s.late, sig)
		}
	}
	delete(s.sigsOf, q)
	sub := s.goneSubs[q]
	if sub == nil {
		return
	}
	for _, gr := range s.groups {
		if slices.ContainsFunc(gr.members, func(m pmix.Proc) bool { return m.Nspace == q }) {
			return
		}
	}
	for _, co := range s.coord {
		if slices.ContainsFunc(co.procs, func(p pmix.Proc) bool { return p.Nspace == q }) {
			return
		}
	}
	_ = sub.Unsubscribe()
	delete(s.goneSubs, q)
	delete(s.asked, q)
}

// Commit stores what a local process put since its last commit: what
// later fences with PMIX_COLLECT_DATA carry, and Get reads.
//
// Errors: pmix.ErrBadParam for an empty key or an invalid scope.
func (s *Service) Commit(proc pmix.Proc, puts []proto.Put) error {
	q, err := s.qualify(proc)
	if err != nil {
		return err
	}
	for _, p := range puts {
		if p.Key == "" || !p.Scope.Valid() {
			return pmix.Errorf(pmix.ErrBadParam, "put of key %s with scope %v: want a key and a scope LOCAL, REMOTE, GLOBAL or INTERNAL", pmix.Quote(p.Key), p.Scope)
		}
	}
	s.kv.add(procData{proc: q, cluster: string(s.cfg.Cluster), node: s.cfg.Node, puts: puts})
	s.mu.Lock()
	s.serveDirectLocked(q)
	s.mu.Unlock()
	return nil
}

// Get returns the value of key that proc committed, as the local process
// who may see it (a LOCAL value only on proc's node, a REMOTE one only
// elsewhere). A value of a proc of another agent that no fence collected
// is fetched from that agent (direct.go). A value not committed yet is
// waited for, as OpenPMIx's direct modex does: until proc commits it,
// PMIX_TIMEOUT passes, proc terminates, its job ends, ctx ends (the
// client detached or finalized) or the service closes. PMIX_IMMEDIATE
// answers from what this agent holds now. A key proc committed with a
// scope who is outside of is ErrNotFound at once, and so is a key of who
// itself it did not commit.
//
// Errors: ErrNotFound; ErrPeerTerminated (pmix.ErrNotFound) when proc
// terminated, or its job ended, without committing key; ErrTimeout
// (pmix.ErrTimeout) when PMIX_TIMEOUT passed first; pmix.ErrBadParam;
// ErrClosed; ctx.Err() if ctx ended first.
func (s *Service) Get(ctx context.Context, who, proc pmix.Proc, key string, directives []pmix.Info) (pmix.Value, error) {
	if key == "" {
		return pmix.Value{}, pmix.Errorf(pmix.ErrBadParam, "get of an empty key")
	}
	if !proc.Rank.Valid() {
		return pmix.Value{}, pmix.Errorf(pmix.ErrBadParam, "get of %s from %v: want a real rank", pmix.Quote(key), proc)
	}
	q, err := s.qualify(proc)
	if err != nil {
		return pmix.Value{}, err
	}
	if q, err = s.member(q); err != nil {
		return pmix.Value{}, err
	}
	timeout, err := TimeoutOf(directives)
	if err != nil {
		return pmix.Value{}, err
	}
	me, _ := s.qualify(who)
	self := q == me
	v, found, visible, _ := s.kv.get(q, key, string(s.cfg.Cluster), s.cfg.Node)
	switch {
	case found && (visible || self):
		return v, nil
	case found:
		return pmix.Value{}, fmt.Errorf("%w: %v put %s with a scope this process is outside of", ErrNotFound, proc, pmix.Quote(key))
	case pmix.Flag(directives, pmix.KeyImmediate):
		return pmix.Value{}, fmt.Errorf("%w: %s of %v", ErrNotFound, pmix.Quote(key), proc)
	case self:
		// As OpenPMIx's client answers its own keys: from what it put.
		return pmix.Value{}, fmt.Errorf("%w: %s of %v: this process did not put it", ErrNotFound, pmix.Quote(key), proc)
	}
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	if s.hosts(q) {
		v, err = s.await(wctx, q, key, string(s.cfg.Cluster), s.cfg.Node)
	} else {
		v, err = s.fetch(wctx, q, key)
	}
	switch {
	case err == nil:
		return v, nil
	case ctx.Err() != nil:
		return pmix.Value{}, ctx.Err()
	case wctx.Err() != nil:
		return pmix.Value{}, fmt.Errorf("%w: %s of %v not committed within %v", ErrTimeout, pmix.Quote(key), proc, timeout)
	}
	return pmix.Value{}, fmt.Errorf("%s of %v: %w", pmix.Quote(key), proc, err)
}

// JobInfo returns the job-level info of an nspace of another cluster that
// a connect brought, or of a connect's new nspace (GroupJobInfo), and
// whether there is any.
func (s *Service) JobInfo(nspace string) ([]pmix.Info, bool) {
	s.mu.Lock()
	info, ok := s.jobInfo[nspace]
	s.mu.Unlock()
	if !ok {
		return s.GroupJobInfo(nspace)
	}
	return info, ok
}

// Disconnect takes self out of a connect's new nspace, as RFC0003's
// PMIx_Disconnect: a collective of every member of that nspace, after
// which the nspace names nothing at this agent.
//
// Errors: pmix.ErrInvalidNamespace when nspace is no connect's nspace
// self is a member of; Join's.
//
// With FlagNotifyEach, the other members get PMIX_PROC_HAS_DISCONNECTED
// as self arrives.
func (s *Service) Disconnect(ctx context.Context, self pmix.Proc, nspace string, timeout time.Duration, flags Flags) error {
	q, err := s.qualify(pmix.Proc{Nspace: nspace, Rank: pmix.RankWildcard})
	if err != nil {
		return err
	}
	me, err := s.qualify(self)
	if err != nil {
		return err
	}
	s.mu.Lock()
	gr := s.groups[q.Nspace]
	s.mu.Unlock()
	if gr == nil || !slices.Contains(gr.members, me) {
		return pmix.Errorf(pmix.ErrInvalidNamespace, "%v is not connected to %s", self, nspace)
	}
	_, err = s.Join(ctx, Request{Kind: KindDisconnect, ID: q.Nspace, Procs: []pmix.Proc{q}, Self: self, Timeout: timeout, Flags: flags & FlagNotifyEach})
	return err
}

// member returns the member a proc of a connect's new nspace stands for,
// and any other proc as it is.
//
// Errors: pmix.ErrBadParam for a rank the new nspace does not have.
func (s *Service) member(p pmix.Proc) (pmix.Proc, error) {
	s.mu.Lock()
	gr := s.groups[p.Nspace]
	s.mu.Unlock()
	if gr == nil {
		return p, nil
	}
	members := gr.members
	switch {
	case int64(p.Rank) >= int64(len(members)):
		return pmix.Proc{}, pmix.Errorf(pmix.ErrBadParam, "%v: %s has ranks 0 to %d", p, p.Nspace, len(members)-1)
	}
	return members[p.Rank], nil
}

// expandGroups replaces the procs of connects' new nspaces by the members
// they stand for (a WILDCARD: all of them), so that an operation on a new
// nspace is one on its members, and canonical again. Members that
// terminated stay among them, so that every agent names the operation
// alike whenever it heard of the termination; excuse reports whether one
// of the groups lets its terminated members be left out
// (PMIX_CONNECT_EARLY_TERM_ALLOWED).
func (s *Service) expandGroups(procs []pmix.Proc) (_ []pmix.Proc, excuse bool, _ error) {
	s.mu.Lock()
	n := len(s.groups)
	s.mu.Unlock()
	if n == 0 {
		return procs, false, nil
	}
	var out []pmix.Proc
	expanded := false
	for _, p := range procs {
		s.mu.Lock()
		gr := s.groups[p.Nspace]
		var members []pmix.Proc
		if gr != nil {
			members = gr.members
			excuse = excuse || gr.flags&FlagEarlyTermAllowed != 0
		}
		s.mu.Unlock()
		switch {
		case gr == nil:
			out = append(out, p)
		case p.Rank == pmix.RankWildcard:
			out, expanded = append(out, members...), true
		default:
			m, err := s.member(p)
			if err != nil {
				return nil, false, err
			}
			out, expanded = append(out, m), true
		}
	}
	if !expanded {
		return procs, false, nil
	}
	out, err := s.canonical(out)
	return out, excuse, err
}

// home is the cluster that names nspace, unqualified: the home of a job
// of this agent's table that runs on several clusters, else this agent's
// cluster; spans reports whether it is such a job.
func (s *Service) home(nspace string) (home cluster.ID, spans bool) {
	s.homeMu.Lock()
	defer s.homeMu.Unlock()
	if h, ok := s.homes[nspace]; ok {
		return h, true
	}
	return s.cfg.Cluster, false
}

// qualify names p's nspace "cluster:nspace": an unqualified nspace is of
// this agent's cluster, or of its home for a job across clusters.
func (s *Service) qualify(p pmix.Proc) (pmix.Proc, error) {
	if id, ns, qualified := cluster.Split(p.Nspace); !qualified || id == s.cfg.Cluster {
		home, _ := s.home(ns)
		return qualify(home, pmix.Proc{Nspace: ns, Rank: p.Rank})
	}
	return qualify(s.cfg.Cluster, p)
}

// canonical qualifies (s.qualify), de-duplicates and sorts procs.
func (s *Service) canonical(procs []pmix.Proc) ([]pmix.Proc, error) {
	return canonicalBy(procs, s.qualify)
}

// local reports whether name is an nspace of this agent's job table, and
// returns it unqualified: an unqualified name, one qualified with this
// cluster, or one qualified with the home of a job across clusters.
func (s *Service) local(name string) (string, bool) {
	id, ns, qualified := cluster.Split(name)
	if !qualified || id == s.cfg.Cluster {
		return ns, true
	}
	if home, spans := s.home(ns); spans && home == id {
		return ns, true
	}
	return "", false
}

// hosts reports whether the job table places proc on this node.
func (s *Service) hosts(proc pmix.Proc) bool {
	ns, ok := s.local(proc.Nspace)
	return ok && s.cfg.Jobs(ns)[proc.Rank] == s.cfg.Node
}

// Join takes part in a collective for one local process and returns when
// the operation completed for every participant, or failed. The agent's
// other participants of the same operation join with their own calls;
// once all of this agent's have, it sends one contribution to the
// coordinator, and the coordinator's one release ends the calls.
//
// Errors: ErrTimeout (pmix.ErrTimeout) naming the participants that had
// not arrived; ErrFinished for a latecomer; ErrNotParticipant;
// pmix.ErrBadParam for invalid participants; ErrClosed; ctx.Err() wrapped
// in a pmix.ErrTimeout error if ctx ended first (the operation goes on for
// the others).
func (s *Service) Join(ctx context.Context, req Request) (Result, error) {
	l, self, err := s.join(req, nil)
	if err != nil {
		return Result{}, err
	}
	select {
	case <-l.done:
		return l.result(self)
	case <-ctx.Done():
		return Result{}, pmix.Errorf(pmix.ErrTimeout, "%s: %w", req.Kind, ctx.Err())
	}
}

// JoinFunc is Join that does not block: it takes part for req.Self and
// calls done once with what Join would have returned. An invalid request
// calls done at once, on the caller's goroutine; otherwise done is called
// when the operation ends here, on a goroutine of the service that calls
// those of every local participant of the instance in turn — one
// goroutine per operation and agent, not one per process — or when ctx
// ends first, as Join returns then (the operation goes on for the
// others). done runs without the service's lock held, but must not block
// for long: the participants answered after it wait.
func (s *Service) JoinFunc(ctx context.Context, req Request, done func(Result, error)) {
	w := &waiter{done: done}
	l, _, err := s.join(req, w)
	if err != nil {
		done(Result{}, err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.finished {
		return // answered without it
	}
	w.stop = context.AfterFunc(ctx, func() {
		if w.called.CompareAndSwap(false, true) {
			done(Result{}, pmix.Errorf(pmix.ErrTimeout, "%s: %w", req.Kind, ctx.Err()))
		}
	})
}

// waiter is a participant of JoinFunc waiting for its operation.
type waiter struct {
	self   pmix.Proc
	done   func(Result, error)
	called atomic.Bool // done was called, or is being
	stop   func() bool // of its context's AfterFunc; set with the service's lock held
}

// result is what l gives participant self once finished.
func (l *local) result(self pmix.Proc) (Result, error) {
	if l.err != nil {
		return Result{}, l.err
	}
	res := Result{Nspace: l.nspace, Rank: pmix.RankUndef, Members: l.members, ContextID: l.ctxid}
	if i, found := slices.BinarySearchFunc(l.members, self, pmix.CompareProcs); found && l.nspace != "" {
		res.Rank = pmix.Rank(i)
	}
	return res, nil
}

// join checks req and adds its participant to its operation (arrive),
// with w among the waiters if not nil; it returns the instance and the
// participant, qualified.
func (s *Service) join(req Request, w *waiter) (*local, pmix.Proc, error) {
	procs, err := s.canonical(req.Procs)
	if err != nil {
		return nil, pmix.Proc{}, err
	}
	procs, excuse, err := s.expandGroups(procs)
	if err != nil {
		return nil, pmix.Proc{}, err
	}
	if excuse || req.Kind == KindDisconnect || req.Kind == KindGroupDestruct {
		// A member that terminated is left out (the survivors must be
		// able to disconnect), as of an optional connect.
		req.Flags |= FlagOptional
	}
	self, err := s.qualify(req.Self)
	if err != nil {
		return nil, pmix.Proc{}, err
	}
	if !slices.ContainsFunc(procs, self.Matches) {
		return nil, pmix.Proc{}, fmt.Errorf("%w: %v", ErrNotParticipant, req.Self)
	}
	if w != nil {
		w.self = self
	}
	l, err := s.arrive(op{kind: req.Kind, id: req.ID, procs: procs}, self, req, w)
	if err != nil {
		return nil, pmix.Proc{}, err
	}
	return l, self, nil
}

// Result is what a completed operation gives a participant.
type Result struct {
	// Members are a connect's members (every real rank of its
	// participants), qualified, in the order of their new ranks: by
	// "cluster:nspace", then rank.
	Members []pmix.Proc
	// Nspace is the new nspace a connect assigned (KindConnect; empty
	// otherwise): "cluster:nspace" when the members span clusters, else an
	// nspace of their cluster.
	Nspace string
	// Rank is the participant's new rank in Nspace, its index in Members;
	// pmix.RankUndef when no nspace was assigned.
	Rank pmix.Rank
	// ContextID is a group construct's context id (FlagAssignContextID);
	// 0 when none was asked.
	ContextID uint64
}

// local is one instance of an operation as this agent takes part in it.
type local struct {
	op
	key     opKey
	expect  map[pmix.Proc]bool // the participants this agent hosts
	arrived map[pmix.Proc]bool
	sizes   []nsSize
	collect bool
	flags   Flags
	gone    []pmix.Proc // participants that terminated, left out (FlagOptional)
	// deadSeen is Service.deadGen when its participants were last
	// looked for among the dead.
	deadSeen uint64
	// requested: PMIX_CONNECT_REQUESTED was raised for this instance here.
	requested bool
	// contributed: this agent sent its contribution (or its giving up).
	contributed bool
	// checked: the coordinator asked whether this agent waits for the
	// release, and it said yes (check.go): the release is on its way.
	checked  bool
	extended bool          // the grace was extended once for it
	nudge    chan struct{} // sends the contribution again now (check.go)
	// alone: a fence whose participants this agent hosts all. It is
	// decided here when the last arrives: no contribution, no
	// coordinator, no release, no NATS message at all.
	alone    bool
	timeout  time.Duration
	started  time.Time
	timer    *time.Timer // the timeout, then the grace
	warn     *time.Timer // while no participant gave a timeout
	sub      *nats.Subscription
	finished bool
	done     chan struct{}
	waiters  []*waiter // JoinFunc's, called once done
	err      error
	nspace   string      // a connect's new nspace, from the release
	members  []pmix.Proc // a connect's members, from the release
	ctxid    uint64      // a group construct's context id, from the release
}

// arrive adds self to the oldest instance of the operation it has not
// joined yet, or begins one; w, if not nil, waits for it (JoinFunc).
func (s *Service) arrive(o op, self pmix.Proc, req Request, w *waiter) (*local, error) {
	sig := s.sigs.of(o)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if f, ok := s.late[sig][self]; ok {
		delete(s.late[sig], self)
		switch {
		case time.Since(f.at) > s.cfg.Remember:
		case errors.Is(f.err, ErrParticipantTerminated):
			// Not late: a participant's end ended it, for all alike (as the
			// coordinator answers a contribution that comes after).
			return nil, f.err
		default:
			return nil, fmt.Errorf("%w: %s of %s failed before %v arrived: %v", ErrFinished, o.kind, describe(o.procs), self, f.err)
		}
	}
	var l *local
	for _, c := range s.open[sig] {
		if !c.arrived[self] {
			l = c
			break
		}
	}
	if l == nil {
		var err error
		if l, err = s.beginLocked(o, sig, self); err != nil {
			return nil, err
		}
	}
	l.arrived[self] = true
	if w != nil {
		l.waiters = append(l.waiters, w)
	}
	l.collect = l.collect || req.Collect
	l.flags |= req.Flags
	s.notifyArrivalLocked(l, self, req.Flags)
	if req.Timeout > l.timeout {
		l.timeout = req.Timeout
		if l.timer != nil {
			l.timer.Stop()
		}
		l.timer = time.AfterFunc(time.Until(l.started.Add(l.timeout)), func() { s.timedOut(l) })
	}
	if len(s.dead)+len(s.goneMembers) > 0 && l.deadSeen != s.deadGen {
		l.deadSeen = s.deadGen
		for p := range l.expect {
			if !l.arrived[p] && s.deadLocked(p) {
				s.localGoneLocked(l, p, "terminated")
			}
		}
	}
	if l.kind == KindGroupDestruct {
		if _, gr := s.pgroupLocked(l.id); gr != nil {
			for p := range gr.left {
				s.localGoneLocked(l, p, "left the group")
			}
		}
	}
	if len(l.arrived) == len(l.expect) && !l.contributed {
		s.completeLocked(l)
	}
	return l, nil
}

// completeLocked is what happens once every participant of l this agent
// hosts has arrived: the contribution to the coordinator, or, for a fence
// this agent decides alone, its end.
func (s *Service) completeLocked(l *local) {
	if l.alone {
		s.finishLocked(l, nil)
		return
	}
	s.contributeLocked(l, pmix.Success, "")
}

// aloneLocked reports whether o is a fence whose every participant is a
// process of this node, of a job of this cluster alone: one this agent
// decides by itself.
func (s *Service) aloneLocked(o op) bool {
	if o.kind != KindFence {
		return false
	}
	for _, p := range o.procs {
		ns, ok := s.local(p.Nspace)
		if !ok {
			return false
		}
		if _, spans := s.home(ns); spans {
			return false
		}
		ranks := s.cfg.Jobs(ns)
		if p.Rank != pmix.RankWildcard {
			if ranks[p.Rank] != s.cfg.Node {
				return false
			}
			continue
		}
		if len(ranks) == 0 {
			return false
		}
		for _, n := range ranks {
			if n != s.cfg.Node {
				return false
			}
		}
	}
	return true
}

// beginLocked starts this agent's part in a new instance: which
// participants it hosts, and the subscription for the release.
func (s *Service) beginLocked(o op, sig string, self pmix.Proc) (*local, error) {
	l := &local{op: o, expect: map[pmix.Proc]bool{}, arrived: map[pmix.Proc]bool{}, started: time.Now(), done: make(chan struct{}), nudge: make(chan struct{}, 1)}
	for _, p := range o.procs {
		ns, ok := s.local(p.Nspace)
		if !ok {
			continue
		}
		ranks := s.cfg.Jobs(ns)
		if p.Rank != pmix.RankWildcard {
			if ranks[p.Rank] == s.cfg.Node {
				l.expect[p] = true
			}
			continue
		}
		if ranks != nil {
			l.sizes = append(l.sizes, nsSize{nspace: p.Nspace, size: uint32(len(ranks))})
		}
		for r, n := range ranks {
			if n == s.cfg.Node {
				l.expect[pmix.Proc{Nspace: p.Nspace, Rank: r}] = true
			}
		}
	}
	if !l.expect[self] {
		return nil, pmix.Errorf(pmix.ErrBadParam, "%v takes part, but the job map places it on no rank of node %s", self, s.cfg.Node)
	}
	if o.kind == KindConnect || o.kind == KindConnectXchg || o.kind == KindGroup {
		// Before the contribution: the members' terminations after the
		// connect are announced once NATS knows this subscription.
		for _, p := range o.procs {
			s.watchGoneLocked(p.Nspace, false)
		}
	}
	if ns := o.procs[0].Nspace; s.gens[sig] == 0 && !slices.ContainsFunc(o.procs, func(p pmix.Proc) bool { return p.Nspace != ns }) {
		// An operation of one job's processes alone (a fence, a group of
		// them): forgotten with the job. Those of several jobs (a connect)
		// are kept: one job's end here does not end the others', whose
		// agents go on counting.
		if s.sigsOf[ns] == nil {
			s.sigsOf[ns] = map[string]bool{}
		}
		s.sigsOf[ns][sig] = true
	}
	s.gens[sig]++
	l.key = opKey{sig: sig, gen: s.gens[sig]}
	if l.alone = s.aloneLocked(o); l.alone {
		s.open[sig] = append(s.open[sig], l)
		s.warnLocalLater(l)
		return l, nil
	}
	sub, err := s.cfg.Conn.Subscribe(ReleaseSubject(sig), func(m *nats.Msg) { s.released(l, m) })
	if err != nil {
		s.gens[sig]--
		return nil, pmix.Errorf(pmix.ErrUnreach, "subscribing for the release of a %s: %w", o.kind, err)
	}
	l.sub = sub
	s.open[sig] = append(s.open[sig], l)
	s.warnLocalLater(l)
	return l, nil
}

// warnLocalLater logs, every WarnAfter while l waits with no timeout,
// which of this agent's participants have not arrived (the coordinator
// names the rest, once it heard of the operation).
func (s *Service) warnLocalLater(l *local) {
	l.warn = time.AfterFunc(s.cfg.WarnAfter, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if l.finished {
			return
		}
		if l.timeout == 0 {
			s.log.Warn("collective still waiting, with no timeout", "kind", string(l.kind), "id", l.id,
				"waiting", time.Since(l.started).Round(time.Second).String(), "not_arrived_here", l.missingLocked(),
				"all_arrived_here", len(l.arrived) == len(l.expect))
		}
		s.warnLocalLater(l)
	})
}

// missingLocked names this agent's participants that have not arrived.
func (l *local) missingLocked() string {
	var missing []string
	for p := range l.expect {
		if !l.arrived[p] {
			missing = append(missing, p.String())
		}
	}
	slices.Sort(missing)
	return strings.Join(missing, ", ")
}

// contributeLocked sends this agent's contribution, or (status not
// success) its giving up, to the coordinator.
func (s *Service) contributeLocked(l *local, status pmix.Status, message string) {
	l.contributed = true
	c := &contribution{
		op: l.op, gen: l.key.gen, cluster: string(s.cfg.Cluster), node: s.cfg.Node,
		sizes: l.sizes, timeout: l.timeout, collect: l.collect, status: status, message: message,
		flags: l.flags, gone: s.leftOfLocked(l),
	}
	for p := range l.arrived {
		c.covers = append(c.covers, p)
		if l.collect && status == pmix.Success {
			if d, ok := s.kv.shared(p); ok {
				c.data = append(c.data, d)
			}
		}
	}
	slices.SortFunc(c.covers, pmix.CompareProcs)
	if (l.kind == KindConnect || l.kind == KindConnectXchg) && status == pmix.Success && s.cfg.JobInfo != nil {
		seen := map[string]bool{}
		for _, p := range c.covers {
			if !seen[p.Nspace] {
				seen[p.Nspace] = true
				ns, _ := s.local(p.Nspace)
				c.jobs = append(c.jobs, jobInfo{nspace: p.Nspace, info: s.cfg.JobInfo(ns)})
			}
		}
	}
	s.goFuncLocked(func() { s.deliver(l, c) })
}

// deliver sends a contribution until the coordinator acknowledges it, the
// operation ends here, or the service closes.
func (s *Service) deliver(l *local, c *contribution) {
	b, err := c.marshal()
	if err != nil {
		s.finish(l, pmix.Errorf(pmix.ErrPackFailure, "%s contribution: %v", c.kind, err))
		return
	}
	subj := LeadSubject(c.leader())
	warnAt := time.Now().Add(s.cfg.WarnAfter)
	for {
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.AckWait)
		msg, err := s.cfg.Conn.RequestWithContext(ctx, subj, b)
		cancel()
		if err == nil {
			a, derr := unmarshalAck(msg.Data)
			if derr == nil {
				if a.status != pmix.Success {
					s.finish(l, a.err())
					return
				}
				// Acknowledged. Sent again after Recheck while no release
				// came: a coordinator that restarted learns it again, one
				// that released already sends the release again.
				select {
				case <-l.done:
				case <-s.ctx.Done():
				case <-l.nudge:
					continue
				case <-time.After(s.cfg.Recheck):
					continue
				}
				return
			}
			err = derr
		}
		if time.Now().After(warnAt) {
			warnAt = time.Now().Add(s.cfg.WarnAfter)
			s.log.Warn("collective: the coordinator does not acknowledge this agent's contribution; trying again",
				"kind", string(c.kind), "id", c.id, "coordinator", subj, "err", err)
		}
		select {
		case <-l.done:
			return
		case <-s.ctx.Done():
			return
		case <-time.After(s.cfg.Retry):
		}
	}
}

// released ends the instance with the coordinator's release, after storing
// the data it carries.
func (s *Service) released(l *local, m *nats.Msg) {
	r, err := unmarshalRelease(m.Data)
	if err != nil {
		s.log.Warn("collective: dropping a malformed release", "subject", m.Subject, "err", err)
		return
	}
	if r.gen != l.key.gen {
		return // another instance of the same operation
	}
	for _, d := range r.data {
		s.kv.add(d)
	}
	flush := false
	s.mu.Lock()
	if !l.finished && l.kind == KindDisconnect && r.status == pmix.Success {
		s.dropGroupLocked(l.id) // every member has left it
	}
	if !l.finished && l.kind == KindGroupDestruct && r.status == pmix.Success {
		if key, gr := s.pgroupLocked(l.id); gr != nil {
			s.dropGroupLocked(key)
		}
	}
	for _, j := range r.jobs {
		if _, ours := s.local(j.nspace); !ours {
			s.jobInfo[j.nspace] = j.info
		}
	}
	if !l.finished {
		l.nspace, l.members, l.ctxid = r.nspace, r.members, r.ctxid
		if l.kind == KindGroup && r.status == pmix.Success {
			flush = s.groupConstructedLocked(l, r)
		}
		if r.nspace != "" && r.status == pmix.Success {
			q, err := s.qualify(pmix.Proc{Nspace: r.nspace, Rank: pmix.RankWildcard})
			if err == nil {
				flush = s.groupOfLocked(q.Nspace, &group{members: r.members, flags: r.flags})
			}
		}
	}
	s.mu.Unlock()
	if flush {
		if err := s.cfg.Conn.FlushTimeout(flushTimeout); err != nil {
			s.log.Warn("collective: NATS may not know yet that this agent watches the new group's members", "err", err)
		}
	}
	s.finish(l, r.err())
}

// timedOut gives up on l. An agent whose participants have not all
// arrived tells the coordinator, naming those that did, so that every
// participant fails alike and the failure names exactly who is missing;
// one whose participants all arrived leaves it to the coordinator's own
// timer. If no release comes within the grace, the local participants
// fail on their own.
func (s *Service) timedOut(l *local) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.finished {
		return
	}
	msg := fmt.Sprintf("%s timed out after %v", l.kind, l.timeout)
	if l.alone {
		sizes := map[string]int{}
		for _, sz := range l.sizes {
			sizes[sz.nspace] = int(sz.size)
		}
		s.finishLocked(l, pmix.NewCodedError(pmix.ErrTimeout, ErrTimeout.Code, msg+"; not arrived: "+missingOf(l.procs, sizes, l.arrived)))
		return
	}
	var grace func()
	grace = func() {
		l.timer = time.AfterFunc(s.cfg.Grace, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if l.checked && !l.extended {
				// The coordinator was about to release: one grace more
				// for the release to come.
				l.extended = true
				grace()
				return
			}
			s.finishLocked(l, fmt.Errorf("%w: %s (and no word from the coordinator)", ErrTimeout, msg))
		})
	}
	if len(l.arrived) == len(l.expect) {
		grace()
		return
	}
	if missing := l.missingLocked(); missing != "" {
		msg += fmt.Sprintf("; not arrived on node %s: %s", s.cfg.Node, missing)
	}
	s.contributeLocked(l, pmix.ErrTimeout, msg)
	grace()
}

func (s *Service) finish(l *local, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishLocked(l, err)
}

func (s *Service) finishLocked(l *local, err error) {
	if l.finished {
		return
	}
	l.finished, l.err = true, err
	if err != nil {
		now := time.Now()
		late := s.late[l.key.sig]
		for p, f := range late {
			if now.Sub(f.at) > s.cfg.Remember {
				delete(late, p)
			}
		}
		for p := range l.expect {
			if !l.arrived[p] {
				if late == nil {
					late = map[pmix.Proc]finished{}
					s.late[l.key.sig] = late
				}
				late[p] = finished{err: err, at: now}
			}
		}
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.warn != nil {
		l.warn.Stop()
	}
	if l.sub != nil {
		_ = l.sub.Unsubscribe()
	}
	open := slices.DeleteFunc(s.open[l.key.sig], func(c *local) bool { return c == l })
	if len(open) == 0 {
		delete(s.open, l.key.sig)
	} else {
		s.open[l.key.sig] = open
	}
	close(l.done)
	if ws := l.waiters; len(ws) > 0 {
		l.waiters = nil
		answer := func() {
			for _, w := range ws {
				if w.stop != nil {
					w.stop()
				}
				if w.called.CompareAndSwap(false, true) {
					w.done(l.result(w.self))
				}
			}
		}
		if s.closed {
			go answer() // Close waits for no more goroutines
		} else {
			s.goFuncLocked(answer)
		}
	}
}
