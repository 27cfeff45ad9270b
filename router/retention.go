package router

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// Retention (docs/cache.md, "Job events"): a job's events are kept, past
// the cache's count limit, until every local client of the job has
// received them. An event counts as received by a client that was attached
// when it was stored and that the router's dispatch has passed (it went to
// the client's chain), or that has since had it replayed, in a replay that
// ran to the end, to a registration that accepts it. A client the host
// deregistered is owed nothing; one that never registers for an event
// keeps it until the job ends.
//
// The dispatch's part matters under a flood: NATS may drop copies from the
// agent's inbox, and the events stream may evict them before the router
// fetches the gap; the job-events stream must then still hold the job
// events among them. So an event stored after a client attached is
// settled for it only once the dispatch passed it, and while the agent is
// behind (its inbox past a sixteenth full: Behind) each job's consumer
// runs even with every client attached, until the inbox has stayed short
// for guardLinger. A consumer is not kept otherwise: each costs the
// server a check of every consumer of the stream per acknowledgement, so
// one per agent and job, always, would cost a job on N nodes N² checks
// per event.
//
// The agent keeps per event only those the consumer gave ahead of the
// dispatch (ahead, acknowledged as the dispatch passes them): the job's
// durable consumer holds what it has not acknowledged, and gives all of it
// again whenever something that can settle an event changes (a replay
// done, a client gone), each judged afresh. So the agent's memory does not
// grow with the backlog, whatever the stream's limits let it reach.

const (
	// retainAckWait is how long the stream waits for an acknowledgement
	// before it gives an event again, unasked: a safety net, for changes
	// are followed by Redeliver.
	retainAckWait = 5 * time.Minute
	// maxReplayRecords bounds the replays remembered per client: forgetting
	// the oldest keeps events longer, never shorter.
	maxReplayRecords = 64
	// guardLinger is how long the consumers made for a backlog (Behind)
	// stay after the inbox was last found behind.
	guardLinger = 10 * time.Second
)

// Retention keeps, for each job with ranks on this node, the job's events
// in the cluster's job-events stream until every local client of the job
// has received them. The agent tells it of jobs and of its clients'
// lives; the router tells it of finished replays. Its methods are safe for
// concurrent use and never call the agent, so the agent may call them with
// its own lock held.
type Retention struct {
	cache  *jetstream.EventCache
	place  event.Place
	log    *slog.Logger
	ctx    context.Context // the agent's: ends its JetStream calls
	goFunc func(func()) bool

	mu     sync.Mutex
	jobs   map[string]*retention // by nspace
	closed bool
	// stamp reads the events stream's last sequence, a client's stamp
	// when it attaches (SetStamp); events are judged by their sequence
	// there.
	stamp func(context.Context) (uint64, error)

	// dispatched is the last sequence the router's dispatch passed
	// (Dispatched); aheadMin the lowest sequence held in some job's
	// ahead, 0 when none is (both atomics, so that the dispatch pays a
	// load and a store per event); settling: a settle goroutine runs.
	dispatched, aheadMin atomic.Uint64
	settling             atomic.Bool
	// guarding: the agent fell behind (Behind) less than guardLinger ago,
	// at behindAt (unix nanoseconds); every job's consumer runs.
	guarding atomic.Bool
	behindAt atomic.Int64
}

// RetentionConfig is what NewRetention needs.
type RetentionConfig struct {
	Cache  *jetstream.EventCache
	Place  event.Place
	Log    *slog.Logger    // nil discards
	Ctx    context.Context // ends its JetStream calls (the agent stopping)
	GoFunc func(func()) bool
}

// SetCache gives the Retention the cache once it is open (the agent's
// Start); until then Ensure does nothing.
func (t *Retention) SetCache(c *jetstream.EventCache) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cache = c
}

// SetStamp has clients stamped by stamp: the events stream's last
// sequence. Every later event was stored, and so dispatched, once the
// client was attached: it received them. Earlier ones are owed until a
// replay recorded by Replayed, in the same sequence, covers them.
func (t *Retention) SetStamp(stamp func(context.Context) (uint64, error)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stamp = stamp
}

// NewRetention returns a Retention with no job yet.
func NewRetention(cfg RetentionConfig) *Retention {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Retention{cache: cfg.Cache, place: cfg.Place, log: cfg.Log, ctx: cfg.Ctx, goFunc: cfg.GoFunc, jobs: map[string]*retention{}}
}

// retention is one job's retention on this agent: its durable consumer on
// the job-events stream, while one is needed, and what decides whether an
// event is still owed.
//
// The consumer exists only while some local client of the job is not
// attached, or is still owed an event: with every client attached, each job
// event would be acknowledged on arrival, so the agent spares the stream the
// deliveries and acknowledgements. Events published while a consumer is
// being created again (a client went away) are not retained; the events
// stream still caches them.
type retention struct {
	r       *jetstream.Retainer
	busy    bool // creating or deleting the consumer, or stamping
	session string
	local   []pmix.Rank // the job's ranks on this node (shared, read only; a change of the job makes a new retention)
	// attached holds the local clients attached now, each with the token
	// of its attachment (its connection): a stamp taken for one
	// attachment is not given to the next.
	attached map[pmix.Rank]any
	// fresh holds the local clients that attached and may have no stamp
	// yet (a superset: each is checked when used), so that stamping costs
	// what attached since, not a pass over the job's clients: with 10k
	// clients attaching, those passes made attaching O(N) per client.
	fresh map[pmix.Rank]struct{}
	// round is closed when a call of ensureRetention that did the work
	// ends (and replaced): a hello waits on it for its client's stamp.
	round chan struct{}
	// attachedAt holds, for each attached local client, the events
	// stream's last sequence just after it attached: it has received
	// every later event. A client not in it (not attached, or not
	// stamped yet) is
	// owed every event.
	attachedAt map[pmix.Rank]uint64
	gone       map[pmix.Rank]bool // deregistered by the host: owed nothing
	// replays are, per local client, its registrations the cache was
	// replayed to in full: it has received every event up to upTo that
	// one of them accepts.
	replays map[pmix.Rank][]replayRecord
	// A redelivery is under way; again: another was asked for meanwhile.
	redelivering, again bool
	// ahead holds, in the consumer's order, the events given that would
	// be settled but for the dispatch not having passed them yet.
	ahead []*jetstream.RetainedMsg
}

type replayRecord struct {
	proc    pmix.Proc
	session string
	g       bus.Registration
	upTo    uint64 // in the events stream
}

func retainerName(cluster, node, nspace string) string {
	sum := sha256.Sum256([]byte(cluster + "\x00" + node + "\x00" + nspace))
	return "pmixbus_job_" + hex.EncodeToString(sum[:12])
}

// RetainJob starts tracking retention for job nspace (of session), whose
// ranks on this node are local (ascending, not modified after);
// attachment returns the token of a local rank's attachment (its
// connection), nil if it is not attached. The caller then calls Ensure. A
// job tracked already is left as it is: StopJob it first when its session
// or ranks changed.
func (t *Retention) RetainJob(nspace, session string, local []pmix.Rank, attachment func(pmix.Rank) any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.jobs[nspace]; ok || len(local) == 0 {
		return
	}
	attached := map[pmix.Rank]any{}
	for _, r := range local {
		if tok := attachment(r); tok != nil {
			attached[r] = tok
		}
	}
	ret := &retention{
		session:    session,
		local:      local,
		attached:   map[pmix.Rank]any{},
		attachedAt: map[pmix.Rank]uint64{},
		gone:       map[pmix.Rank]bool{},
		replays:    map[pmix.Rank][]replayRecord{},
		fresh:      map[pmix.Rank]struct{}{},
		round:      make(chan struct{}),
	}
	for r, tok := range attached {
		ret.attached[r] = tok
		ret.fresh[r] = struct{}{} // attached before the job changed
	}
	t.jobs[nspace] = ret
}

// ClientAttached: client p attached, its attachment named by token; it
// is to be stamped (Ensure, AwaitStamp).
func (t *Retention) ClientAttached(p pmix.Proc, token any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ret := t.jobs[p.Nspace]; ret != nil {
		ret.attached[p.Rank] = token
		ret.fresh[p.Rank] = struct{}{}
	}
}

// neededLocked reports whether the job's consumer is needed: some local
// client is owed events yet to come, or the agent is behind and some is
// attached (the consumer keeps each event until the dispatch passed it).
func (t *Retention) neededLocked(ret *retention) bool {
	guarding := t.guarding.Load()
	for _, r := range ret.local {
		if ret.gone[r] {
			continue
		}
		if _, stamped := ret.attachedAt[r]; !stamped || guarding {
			return true
		}
	}
	return false
}

// Behind: the router's inbox holds a backlog, where NATS may soon drop
// copies. Every job's consumer is made (or kept), so that the job events
// stored from now on stay retained until the dispatch passed them, and
// kept until the inbox has not been behind for guardLinger. The router
// calls it as it takes each event from a backlog: one clock read and
// atomic operations once it is guarding.
func (t *Retention) Behind() {
	t.behindAt.Store(time.Now().UnixNano())
	if !t.guarding.CompareAndSwap(false, true) {
		return
	}
	if !t.goFunc(t.guard) {
		t.guarding.Store(false)
	}
}

// guard makes every job's consumer, then waits until the agent has not
// been behind for guardLinger and lets those nobody needs go.
func (t *Retention) guard() {
	t.ensureAll()
	every := time.NewTicker(time.Second)
	defer every.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-every.C:
		}
		if time.Since(time.Unix(0, t.behindAt.Load())) < guardLinger {
			continue
		}
		t.guarding.Store(false)
		if time.Since(time.Unix(0, t.behindAt.Load())) < guardLinger && t.guarding.CompareAndSwap(false, true) {
			continue // behind again meanwhile, and no other guard took over
		}
		t.ensureAll()
		return
	}
}

// ensureAll runs Ensure for every job.
func (t *Retention) ensureAll() {
	t.mu.Lock()
	jobs := make([]string, 0, len(t.jobs))
	for ns := range t.jobs {
		jobs = append(jobs, ns)
	}
	t.mu.Unlock()
	for _, ns := range jobs {
		t.Ensure(t.ctx, ns)
	}
}

// unstampedLocked returns the attached local clients of a job that have
// no stamp yet, with their attachments' tokens, and forgets the fresh ones
// that need none.
func (t *Retention) unstampedLocked(ret *retention) map[pmix.Rank]any {
	out := map[pmix.Rank]any{}
	for r := range ret.fresh {
		tok, attached := ret.attached[r]
		if _, stamped := ret.attachedAt[r]; !attached || stamped {
			delete(ret.fresh, r) // attaching again makes it fresh again
			continue
		}
		out[r] = tok
	}
	return out
}

// Ensure stamps newly attached clients of job nspace, and creates or
// deletes the job's consumer as its clients' state requires. It talks to
// JetStream; concurrent calls leave the work to the one already at it,
// which checks again when done. It gives up when ctx ends, the agent
// shuts down, or after 30 s.
func (t *Retention) Ensure(ctx context.Context, nspace string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	defer context.AfterFunc(t.ctx, cancel)()
	t.mu.Lock()
	defer t.mu.Unlock()
	var worked *retention
	defer func() { // with t.mu held
		if worked != nil {
			close(worked.round)
			worked.round = make(chan struct{})
		}
	}()
	for range 4 {
		ret := t.jobs[nspace]
		if ret == nil || ret.busy || t.closed || t.cache == nil || t.stamp == nil {
			return
		}
		worked = ret
		if stamp := t.unstampedLocked(ret); len(stamp) > 0 {
			ret.busy = true
			stampOf := t.stamp
			t.mu.Unlock()
			seq, err := stampOf(ctx)
			t.mu.Lock()
			ret.busy = false
			if err != nil {
				if t.ctx.Err() == nil {
					t.log.Warn("cannot stamp attached clients; their job's events stay retained for them", "nspace", nspace, "err", err)
				}
				return
			}
			for r, tok := range stamp {
				if cur, ok := ret.attached[r]; ok && cur == tok && t.jobs[nspace] == ret {
					ret.attachedAt[r] = seq
					delete(ret.fresh, r)
				}
			}
			continue
		}
		want := t.neededLocked(ret)
		switch {
		case want && ret.r == nil:
			var filters []string
			for _, sc := range event.ClientScopes(t.place, nspace, ret.session) {
				filters = append(filters, subjects.JobCacheSubject(string(t.place.Cluster), sc.CachedWildcard()))
			}
			ret.busy = true
			t.mu.Unlock()
			r, err := t.cache.Retain(ctx, retainerName(string(t.place.Cluster), t.place.Node, nspace), filters, retainAckWait,
				func(m *jetstream.RetainedMsg) { t.retainedArrived(nspace, m) })
			t.mu.Lock()
			ret.busy = false
			if err != nil {
				if t.ctx.Err() == nil { // not merely the agent stopping
					t.log.Error("cannot retain job events; clients not attached yet may miss events past the cache limit", "nspace", nspace, "err", err)
				}
				return
			}
			if t.jobs[nspace] != ret || t.closed {
				r.Stop() // the job went away, or the agent stops: keep its state for a successor
				return
			}
			ret.r = r
		case !want && ret.r != nil:
			// Nobody is owed what is yet to come: the consumer can go
			// once it holds nothing either.
			r := ret.r
			ret.busy = true
			t.mu.Unlock()
			backlog, err := r.Backlog(ctx)
			if err == nil && backlog == 0 {
				err = r.Delete(ctx)
			}
			t.mu.Lock()
			ret.busy = false
			if err != nil {
				if t.ctx.Err() == nil {
					t.log.Warn("deleting job event consumer", "nspace", nspace, "err", err)
				}
				return
			}
			if backlog > 0 {
				return // still owed to attached clients that have not registered for it
			}
			ret.r = nil
			ret.ahead = nil
			clear(ret.replays) // about events the stream no longer keeps for this agent
		default:
			return
		}
	}
}

// stampWait bounds how long a hello waits for its client's stamp.
const stampWait = 5 * time.Second

// AwaitStamp waits until client p, attached just now with token, has its
// stamp (or stampWait passes, or it is no longer attached so): the hello
// reply waits for it. Stamped later, the events the client itself
// published meanwhile, which it was attached to receive, would count as
// owed to it and be retained for it until the job ends (seen under load:
// 38 events kept for a client that published them).
func (t *Retention) AwaitStamp(p pmix.Proc, token any) {
	ctx, cancel := context.WithTimeout(t.ctx, stampWait)
	defer cancel()
	for range 3 { // rounds that end without its stamp: JetStream failing
		t.mu.Lock()
		ret := t.jobs[p.Nspace]
		if ret == nil || t.closed {
			t.mu.Unlock()
			return
		}
		_, stamped := ret.attachedAt[p.Rank]
		if tok, ok := ret.attached[p.Rank]; stamped || !ok || tok != token {
			t.mu.Unlock()
			return
		}
		round := ret.round
		t.mu.Unlock()
		t.Ensure(ctx, p.Nspace) // stamps it, or the call at work will
		select {
		case <-round:
		case <-ctx.Done():
			return
		}
	}
}

// retainedArrived judges a job event the consumer gives (again): it is
// acknowledged unless a local client is still owed it. One still owed is
// not kept: the consumer gives it again when something changes.
func (t *Retention) retainedArrived(nspace string, m *jetstream.RetainedMsg) {
	ev, sc, decoded := decodeRetained(m)
	t.mu.Lock()
	ret := t.jobs[nspace]
	if ret == nil {
		t.mu.Unlock()
		return
	}
	owed, waits := t.judgeLocked(ret, m.EventSeq, decoded, sc, ev)
	if !owed && waits {
		// The dispatch has not passed it yet: kept until it does, unless
		// given again meanwhile (a redelivery replaces what is held).
		if len(ret.ahead) > 0 && ret.ahead[len(ret.ahead)-1].Seq >= m.Seq {
			ret.ahead = nil
		}
		ret.ahead = append(ret.ahead, m)
		t.lowerAheadMin(m.EventSeq)
		t.mu.Unlock()
		if m.EventSeq <= t.dispatched.Load() {
			t.settle() // the dispatch passed it meanwhile
		}
		return
	}
	last := !owed && m.Pending == 0 && !t.neededLocked(ret)
	t.mu.Unlock()
	switch {
	case owed:
	case last:
		// Nothing more to give, and nobody is owed what is to come: once
		// the stream has this acknowledgement (and so the ones before),
		// the consumer may be needed no more.
		ctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
		_ = m.AckSync(ctx)
		cancel()
		t.goFunc(func() { t.Ensure(t.ctx, nspace) })
	default:
		_ = m.Ack()
	}
}

// decodeRetained reads a retained job event; false if it is malformed
// (then no replay can have delivered it).
func decodeRetained(m *jetstream.RetainedMsg) (*event.Message, subjects.Scope, bool) {
	p, err := subjects.Parse(subjects.EventSubject(m.Subject))
	if err != nil {
		return nil, subjects.Scope{}, false
	}
	ev, err := event.UnmarshalMessage(m.Data)
	if err != nil {
		return nil, subjects.Scope{}, false
	}
	return ev, p.Scope, true
}

// judgeLocked reports whether some local client of the job is still owed
// the event at sequence seq of the events stream, and, if none is,
// whether one that was attached when it was stored has it only once the
// dispatch passes it (waits).
func (t *Retention) judgeLocked(ret *retention, seq uint64, decoded bool, sc subjects.Scope, m *event.Message) (owed, waits bool) {
	passed := seq <= t.dispatched.Load()
	for _, r := range ret.local {
		switch t.owedLocked(ret, r, seq, decoded, sc, m) {
		case owedYes:
			return true, false
		case owedUntilDispatched:
			if !passed {
				waits = true
			}
		}
	}
	return false, waits
}

type owing int

const (
	owedNo              owing = iota
	owedYes                   // not received
	owedUntilDispatched       // received once the dispatch passes it
)

// owedLocked reports whether local client rank r is still owed the event
// at sequence seq of the events stream.
func (t *Retention) owedLocked(ret *retention, r pmix.Rank, seq uint64, decoded bool, sc subjects.Scope, m *event.Message) owing {
	if ret.gone[r] {
		return owedNo
	}
	if at, attached := ret.attachedAt[r]; attached && seq > at {
		return owedUntilDispatched // stored while the client was attached
	}
	if !decoded {
		return owedYes
	}
	ev := m.BusEvent(t.place.Cluster)
	for _, rec := range ret.replays[r] {
		origin := bus.Origin{Cluster: string(t.place.Cluster), Node: t.place.Node, Session: rec.session, Proc: rec.proc}
		if seq <= rec.upTo && event.For(t.place, sc, m, rec.proc, rec.session) && rec.g.Accepts(ev, origin) {
			return owedNo
		}
	}
	return owedYes
}

// Dispatched: the router's dispatch has passed sequence seq of the events
// stream (every event up to it went to its clients' chains, or was
// counted lost). The router calls it as it goes; it costs two atomic
// operations unless events wait for it.
func (t *Retention) Dispatched(seq uint64) {
	t.dispatched.Store(seq)
	if m := t.aheadMin.Load(); m != 0 && m <= seq {
		t.settle()
	}
}

// lowerAheadMin makes aheadMin at most seq (with t.mu held).
func (t *Retention) lowerAheadMin(seq uint64) {
	if m := t.aheadMin.Load(); m == 0 || seq < m {
		t.aheadMin.Store(seq)
	}
}

// settle acknowledges, on a goroutine of its own, the events held ahead
// of the dispatch that it has passed, each judged again (a client may
// have detached meanwhile: then it stays unacknowledged, to be given
// again).
func (t *Retention) settle() {
	if !t.settling.CompareAndSwap(false, true) {
		return
	}
	if !t.goFunc(t.settleLoop) {
		t.settling.Store(false)
	}
}

func (t *Retention) settleLoop() {
	for {
		var acks []*jetstream.RetainedMsg
		t.mu.Lock()
		pos := t.dispatched.Load()
		low := uint64(0)
		for _, ret := range t.jobs {
			keep := ret.ahead[:0]
			for _, m := range ret.ahead {
				if m.EventSeq > pos {
					keep = append(keep, m)
					if low == 0 || m.EventSeq < low {
						low = m.EventSeq
					}
					continue
				}
				ev, sc, decoded := decodeRetained(m)
				if owed, _ := t.judgeLocked(ret, m.EventSeq, decoded, sc, ev); !owed {
					acks = append(acks, m)
				}
			}
			clear(ret.ahead[len(keep):])
			ret.ahead = keep
		}
		t.aheadMin.Store(low)
		t.mu.Unlock()
		for _, m := range acks {
			_ = m.Ack()
		}
		t.settling.Store(false)
		// Passed since, or held since the lock was let go: once more.
		if m := t.aheadMin.Load(); m == 0 || m > t.dispatched.Load() || !t.settling.CompareAndSwap(false, true) {
			return
		}
	}
}

// Replayed records that the cache was replayed, in full up to sequence
// upTo of the events stream, to registration g of client p: p has
// received the retained events g accepts. The consumer gives its events
// again to settle them.
func (t *Retention) Replayed(p pmix.Proc, session string, g bus.Registration, upTo uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ret := t.jobs[p.Nspace]
	if ret == nil {
		return
	}
	recs := append(ret.replays[p.Rank], replayRecord{proc: p, session: session, g: g, upTo: upTo})
	if len(recs) > maxReplayRecords {
		recs = recs[len(recs)-maxReplayRecords:]
	}
	ret.replays[p.Rank] = recs
	t.redeliverLocked(p.Nspace, ret)
}

// ClientRegistered: client p is expected (again); it is owed events from
// now on until it has them.
func (t *Retention) ClientRegistered(p pmix.Proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ret := t.jobs[p.Nspace]; ret != nil {
		delete(ret.gone, p.Rank)
	}
}

// ClientDetached: client p is no longer attached; it is owed every event
// again (those it received while attached included: which those were is
// not kept) until it has them.
func (t *Retention) ClientDetached(p pmix.Proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ret := t.jobs[p.Nspace]; ret != nil {
		delete(ret.attached, p.Rank)
		delete(ret.attachedAt, p.Rank)
	}
}

// ClientGone: the host deregistered client p, which is owed nothing any
// more.
func (t *Retention) ClientGone(p pmix.Proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ret := t.jobs[p.Nspace]
	if ret == nil {
		return
	}
	ret.gone[p.Rank] = true
	delete(ret.attachedAt, p.Rank)
	delete(ret.replays, p.Rank)
	t.redeliverLocked(p.Nspace, ret)
}

// redeliverLocked has the job's consumer give everything it holds again,
// to be judged afresh; requests made while one is under way make one more.
func (t *Retention) redeliverLocked(nspace string, ret *retention) {
	if ret.r == nil {
		return
	}
	if ret.redelivering {
		ret.again = true
		return
	}
	ret.redelivering = true
	r := ret.r
	started := t.goFunc(func() {
		for {
			ctx, cancel := context.WithTimeout(t.ctx, 30*time.Second)
			err := r.Redeliver(ctx)
			cancel()
			if err != nil && t.ctx.Err() == nil {
				t.log.Debug("redelivering retained job events; they come again after the ack wait", "nspace", nspace, "wait", retainAckWait, "err", err)
			}
			t.mu.Lock()
			if !ret.again || ret.r != r || t.jobs[nspace] != ret {
				ret.redelivering, ret.again = false, false
				t.mu.Unlock()
				return
			}
			ret.again = false
			t.mu.Unlock()
		}
	})
	if !started {
		ret.redelivering = false
	}
}

// StopJob ends a job's retention (the job was deregistered, or changed).
func (t *Retention) StopJob(nspace string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ret, ok := t.jobs[nspace]
	if !ok {
		return
	}
	delete(t.jobs, nspace)
	if ret.r != nil {
		r := ret.r
		ret.r = nil
		t.goFunc(func() {
			ctx, cancel := context.WithTimeout(t.ctx, 30*time.Second)
			defer cancel()
			if err := r.Delete(ctx); err != nil && t.ctx.Err() == nil {
				t.log.Warn("deleting job event consumer", "nspace", nspace, "err", err)
			}
		})
	}
}

// Stop stops every job's consumer, keeping its state on the stream for the
// next agent of this node; nothing is retained by this one after.
func (t *Retention) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for _, ret := range t.jobs {
		if ret.r != nil {
			ret.r.Stop()
		}
	}
}

// Retaining reports whether job nspace's consumer exists: the stream keeps
// the job's events for this agent.
func (t *Retention) Retaining(nspace string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ret := t.jobs[nspace]
	return ret != nil && ret.r != nil
}

// Stamped reports whether attached client p has its stamp: the point from
// which it counts as receiving its job's events live.
func (t *Retention) Stamped(p pmix.Proc) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ret := t.jobs[p.Nspace]
	if ret == nil {
		return false
	}
	_, ok := ret.attachedAt[p.Rank]
	return ok
}
