package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
// when it arrived (it went to the client's chain), or that has since had it
// replayed, in a replay that ran to the end, to a registration that accepts
// it. A client the host deregistered is owed nothing; one that never
// registers for an event keeps it until the job ends.
//
// The agent keeps nothing per event: the job's durable consumer holds what
// it has not acknowledged, and gives all of it again whenever something
// that can settle an event changes (a replay done, a client gone), each
// judged afresh. So the agent's memory does not grow with the backlog,
// whatever the stream's limits let it reach.

const (
	// retainAckWait is how long the stream waits for an acknowledgement
	// before it gives an event again, unasked: a safety net, for changes
	// are followed by Redeliver.
	retainAckWait = 5 * time.Minute
	// maxReplayRecords bounds the replays remembered per client: forgetting
	// the oldest keeps events longer, never shorter.
	maxReplayRecords = 64
)

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
	r     *jetstream.Retainer
	busy  bool        // creating or deleting the consumer, or stamping
	local []pmix.Rank // the job's ranks on this node (job.ranksOn: shared, read only; a change of the job makes a new retention)
	// fresh holds the local clients that attached and may have no stamp
	// yet (a superset: each is checked when used), so that stamping costs
	// what attached since, not a pass over the job's clients: with 10k
	// clients attaching, those passes made attaching O(N) per client.
	fresh map[pmix.Rank]struct{}
	// round is closed when a call of ensureRetention that did the work
	// ends (and replaced): a hello waits on it for its client's stamp.
	round chan struct{}
	// attachedAt holds, for each attached local client, the job-events
	// stream's last sequence just after it attached: it has received every
	// later event. A client not in it (not attached, or not stamped yet) is
	// owed every event.
	attachedAt map[pmix.Rank]uint64
	gone       map[pmix.Rank]bool // deregistered by the host: owed nothing
	// replays are, per local client, its registrations the cache was
	// replayed to in full: it has received every event up to upTo that
	// one of them accepts.
	replays map[pmix.Rank][]replayRecord
	// A redelivery is under way; again: another was asked for meanwhile.
	redelivering, again bool
}

type replayRecord struct {
	proc    pmix.Proc
	session string
	g       bus.Registration
	upTo    uint64 // in the job-events stream
}

func retainerName(cluster, node, nspace string) string {
	sum := sha256.Sum256([]byte(cluster + "\x00" + node + "\x00" + nspace))
	return "pmixbus_job_" + hex.EncodeToString(sum[:12])
}

// retainJobLocked starts tracking retention for job j, if it has procs on
// this node; the caller then calls ensureRetention.
func (a *Agent) retainJobLocked(j *job) {
	if _, ok := a.retained[j.nspace]; ok {
		return
	}
	local := j.ranksOn(a.cfg.Node)
	if len(local) == 0 {
		return
	}
	ret := &retention{
		local:      local,
		attachedAt: map[pmix.Rank]uint64{},
		gone:       map[pmix.Rank]bool{},
		replays:    map[pmix.Rank][]replayRecord{},
		fresh:      map[pmix.Rank]struct{}{},
		round:      make(chan struct{}),
	}
	for _, r := range local {
		if e := a.expected[pmix.Proc{Nspace: j.nspace, Rank: r}]; e != nil && e.conn != nil {
			ret.fresh[r] = struct{}{} // attached before the job changed
		}
	}
	a.retained[j.nspace] = ret
}

// clientAttachedLocked: client p attached; it is to be stamped.
func (a *Agent) clientAttachedLocked(p pmix.Proc) {
	if ret := a.retained[p.Nspace]; ret != nil {
		ret.fresh[p.Rank] = struct{}{}
	}
}

// owedToSomeLocked reports whether some local client of the job is owed
// events yet to come: it is not attached (or not stamped), and not gone.
func (a *Agent) owedToSomeLocked(ret *retention) bool {
	for _, r := range ret.local {
		if _, stamped := ret.attachedAt[r]; !stamped && !ret.gone[r] {
			return true
		}
	}
	return false
}

// unstampedLocked returns the attached local clients of job nspace that
// have no stamp yet, with their connections, and forgets the fresh ones
// that need none.
func (a *Agent) unstampedLocked(nspace string, ret *retention) map[pmix.Rank]*clientConn {
	out := map[pmix.Rank]*clientConn{}
	for r := range ret.fresh {
		e := a.expected[pmix.Proc{Nspace: nspace, Rank: r}]
		if _, stamped := ret.attachedAt[r]; e == nil || e.conn == nil || stamped {
			delete(ret.fresh, r) // attaching again makes it fresh again
			continue
		}
		out[r] = e.conn
	}
	return out
}

// ensureRetention stamps newly attached clients, and creates or deletes
// the job's consumer as its clients' state requires. It talks to
// JetStream, so it is called without a.mu; concurrent calls leave the work
// to the one already at it, which checks again when done. It gives up when
// ctx ends, the agent shuts down, or after 30 s.
func (a *Agent) ensureRetention(ctx context.Context, nspace string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	defer context.AfterFunc(a.ctx, cancel)()
	a.mu.Lock()
	defer a.mu.Unlock()
	var worked *retention
	defer func() { // with a.mu held
		if worked != nil {
			close(worked.round)
			worked.round = make(chan struct{})
		}
	}()
	for range 4 {
		j := a.jobs[nspace]
		ret := a.retained[nspace]
		if j == nil || ret == nil || ret.busy || a.closed {
			return
		}
		worked = ret
		if stamp := a.unstampedLocked(nspace, ret); len(stamp) > 0 {
			ret.busy = true
			a.mu.Unlock()
			seq, err := a.cache.LastJobSeq(ctx)
			a.mu.Lock()
			ret.busy = false
			if err != nil {
				if a.ctx.Err() == nil {
					a.log.Warn("cannot stamp attached clients; their job's events stay retained for them", "nspace", nspace, "err", err)
				}
				return
			}
			for r, cc := range stamp {
				if e := a.expected[pmix.Proc{Nspace: nspace, Rank: r}]; e != nil && e.conn == cc && a.retained[nspace] == ret {
					ret.attachedAt[r] = seq
					delete(ret.fresh, r)
				}
			}
			continue
		}
		want := a.owedToSomeLocked(ret)
		switch {
		case want && ret.r == nil:
			var filters []string
			for _, sc := range event.ClientScopes(a.place(), j.nspace, j.session) {
				filters = append(filters, subjects.JobCacheSubject(string(a.cfg.Cluster), sc.CachedWildcard()))
			}
			ret.busy = true
			a.mu.Unlock()
			r, err := a.cache.Retain(ctx, retainerName(string(a.cfg.Cluster), a.cfg.Node, nspace), filters, retainAckWait,
				func(m *jetstream.RetainedMsg) { a.retainedArrived(nspace, m) })
			a.mu.Lock()
			ret.busy = false
			if err != nil {
				if a.ctx.Err() == nil { // not merely the agent stopping
					a.log.Error("cannot retain job events; clients not attached yet may miss events past the cache limit", "nspace", nspace, "err", err)
				}
				return
			}
			if a.retained[nspace] != ret || a.closed {
				r.Stop() // the job went away, or the agent stops: keep its state for a successor
				return
			}
			ret.r = r
		case !want && ret.r != nil:
			// Nobody is owed what is yet to come: the consumer can go
			// once it holds nothing either.
			r := ret.r
			ret.busy = true
			a.mu.Unlock()
			backlog, err := r.Backlog(ctx)
			if err == nil && backlog == 0 {
				err = r.Delete(ctx)
			}
			a.mu.Lock()
			ret.busy = false
			if err != nil {
				if a.ctx.Err() == nil {
					a.log.Warn("deleting job event consumer", "nspace", nspace, "err", err)
				}
				return
			}
			if backlog > 0 {
				return // still owed to attached clients that have not registered for it
			}
			ret.r = nil
			clear(ret.replays) // about events the stream no longer keeps for this agent
		default:
			return
		}
	}
}

// stampWait bounds how long a hello waits for its client's stamp.
const stampWait = 5 * time.Second

// awaitStamp waits until client p, attached on cc just now, has its stamp
// (or stampWait passes, or it is no longer attached there): the hello
// reply waits for it. Stamped later, the events the client itself
// published meanwhile, which it was attached to receive, would count as
// owed to it and be retained for it until the job ends (seen under load:
// 38 events kept for a client that published them).
func (a *Agent) awaitStamp(p pmix.Proc, cc *clientConn) {
	ctx, cancel := context.WithTimeout(a.ctx, stampWait)
	defer cancel()
	for range 3 { // rounds that end without its stamp: JetStream failing
		a.mu.Lock()
		ret, e := a.retained[p.Nspace], a.expected[p]
		stamped := false
		if ret != nil {
			_, stamped = ret.attachedAt[p.Rank]
		}
		if ret == nil || stamped || e == nil || e.conn != cc || a.closed {
			a.mu.Unlock()
			return
		}
		round := ret.round
		a.mu.Unlock()
		a.ensureRetention(ctx, p.Nspace) // stamps it, or the call at work will
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
func (a *Agent) retainedArrived(nspace string, m *jetstream.RetainedMsg) {
	ev, sc, decoded := decodeRetained(m)
	a.mu.Lock()
	ret, j := a.retained[nspace], a.jobs[nspace]
	if ret == nil || j == nil {
		a.mu.Unlock()
		return
	}
	owed := false
	for _, r := range ret.local {
		if a.owedLocked(ret, r, m.Seq, decoded, sc, ev) {
			owed = true
			break
		}
	}
	last := !owed && m.Pending == 0 && !a.owedToSomeLocked(ret)
	a.mu.Unlock()
	switch {
	case owed:
	case last:
		// Nothing more to give, and nobody is owed what is to come: once
		// the stream has this acknowledgement (and so the ones before),
		// the consumer may be needed no more.
		ctx, cancel := context.WithTimeout(a.ctx, 5*time.Second)
		_ = m.AckSync(ctx)
		cancel()
		a.goFunc(func() { a.ensureRetention(a.ctx, nspace) })
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

// owedLocked reports whether local client rank r is still owed the event
// at sequence seq of the job-events stream.
func (a *Agent) owedLocked(ret *retention, r pmix.Rank, seq uint64, decoded bool, sc subjects.Scope, m *event.Message) bool {
	if ret.gone[r] {
		return false
	}
	if at, attached := ret.attachedAt[r]; attached && seq > at {
		return false // it arrived while the client was attached
	}
	if !decoded {
		return true
	}
	ev := m.BusEvent(a.cfg.Cluster)
	for _, rec := range ret.replays[r] {
		origin := bus.Origin{Cluster: string(a.cfg.Cluster), Node: a.cfg.Node, Session: rec.session, Proc: rec.proc}
		if seq <= rec.upTo && event.For(a.place(), sc, m, rec.proc, rec.session) && rec.g.Accepts(ev, origin) {
			return false
		}
	}
	return true
}

// replayed records that the cache was replayed, in full up to sequence
// upTo of the job-events stream, to registration g of client p: p has
// received the retained events g accepts. The consumer gives its events
// again to settle them.
func (a *Agent) replayed(p pmix.Proc, session string, g bus.Registration, upTo uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ret := a.retained[p.Nspace]
	if ret == nil {
		return
	}
	recs := append(ret.replays[p.Rank], replayRecord{proc: p, session: session, g: g, upTo: upTo})
	if len(recs) > maxReplayRecords {
		recs = recs[len(recs)-maxReplayRecords:]
	}
	ret.replays[p.Rank] = recs
	a.redeliverLocked(p.Nspace, ret)
}

// clientRegisteredLocked: client p is expected (again); it is owed events
// from now on until it has them.
func (a *Agent) clientRegisteredLocked(p pmix.Proc) {
	if ret := a.retained[p.Nspace]; ret != nil {
		delete(ret.gone, p.Rank)
	}
}

// clientDetachedLocked: client p is no longer attached; it is owed every
// event again (those it received while attached included: which those were
// is not kept) until it has them.
func (a *Agent) clientDetachedLocked(p pmix.Proc) {
	if ret := a.retained[p.Nspace]; ret != nil {
		delete(ret.attachedAt, p.Rank)
	}
}

// clientGoneLocked: the host deregistered client p, which is owed nothing
// any more.
func (a *Agent) clientGoneLocked(p pmix.Proc) {
	ret := a.retained[p.Nspace]
	if ret == nil {
		return
	}
	ret.gone[p.Rank] = true
	delete(ret.attachedAt, p.Rank)
	delete(ret.replays, p.Rank)
	a.redeliverLocked(p.Nspace, ret)
}

// redeliverLocked has the job's consumer give everything it holds again,
// to be judged afresh; requests made while one is under way make one more.
func (a *Agent) redeliverLocked(nspace string, ret *retention) {
	if ret.r == nil {
		return
	}
	if ret.redelivering {
		ret.again = true
		return
	}
	ret.redelivering = true
	r := ret.r
	started := a.goFunc(func() {
		for {
			ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
			err := r.Redeliver(ctx)
			cancel()
			if err != nil && a.ctx.Err() == nil {
				a.log.Debug("redelivering retained job events; they come again after the ack wait", "nspace", nspace, "wait", retainAckWait, "err", err)
			}
			a.mu.Lock()
			if !ret.again || ret.r != r || a.retained[nspace] != ret {
				ret.redelivering, ret.again = false, false
				a.mu.Unlock()
				return
			}
			ret.again = false
			a.mu.Unlock()
		}
	})
	if !started {
		ret.redelivering = false
	}
}

// stopRetainingLocked ends a job's retention (the job was deregistered).
func (a *Agent) stopRetainingLocked(nspace string) {
	ret, ok := a.retained[nspace]
	if !ok {
		return
	}
	delete(a.retained, nspace)
	if ret.r != nil {
		r := ret.r
		ret.r = nil
		a.goFunc(func() {
			ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
			defer cancel()
			if err := r.Delete(ctx); err != nil && a.ctx.Err() == nil {
				a.log.Warn("deleting job event consumer", "nspace", nspace, "err", err)
			}
		})
	}
}
