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

// The event cache (docs/cache.md). Cacheable events are captured by the
// cluster's streams as they are published. A new registration is held out
// of live chains while the cached events it matches are replayed to it, in
// the order they were received; live events that arrive meanwhile queue for
// it, and when the replay is done the dispatch goroutine replays those it
// has not seen and releases the registration, all in one step, so no event
// reaches it twice and none is lost between cache and live delivery.
//
// A job's events are also kept, past the count limit, until every local
// client of the job has received them: an event counts as received by a
// client that was attached when it arrived (it went to the client's chain),
// or that has since had it replayed to a registration that accepted it. A
// client that never registers for it keeps it until the job ends.

// retainAckWait is how long the stream waits for a retained message's ack
// before delivering it again; redeliveries are recognised by sequence.
const retainAckWait = 30 * time.Second

func (a *Agent) openCache(ctx context.Context) error {
	all, jobs := subjects.CacheSubjects(string(a.cfg.Cluster))
	c, err := jetstream.OpenEventCache(ctx, a.nc, jetstream.EventCacheConfig{
		Cluster:     string(a.cfg.Cluster),
		Subjects:    all,
		JobSubjects: jobs,
		MaxMsgs:     int64(a.cfg.CacheSize),
		MaxAge:      a.cfg.CacheMaxAge,
		MaxBytes:    a.cfg.CacheMaxBytes,
		Memory:      a.cfg.CacheMemory,
	})
	if err != nil {
		return err
	}
	a.cache = c
	a.goFunc(a.watchEvictions)
	return nil
}

// CacheStats reports the cluster's event cache: events held, evictions so
// far, job events retained.
func (a *Agent) CacheStats(ctx context.Context) (jetstream.CacheStats, error) {
	return a.cache.Stats(ctx)
}

// Evictions returns the evictions the agent has seen in its last check
// (a metric; see CacheStats for a fresh reading).
func (a *Agent) Evictions() uint64 { return a.evicted.Load() }

// watchEvictions counts and logs what the cache discards for its limits.
func (a *Agent) watchEvictions() {
	every := a.cfg.CacheStatsInterval
	if every == 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-a.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(a.ctx, every)
		s, err := a.cache.Stats(ctx)
		cancel()
		if err != nil {
			continue
		}
		if prev := a.evicted.Swap(s.Evicted); s.Evicted > prev {
			a.log.Warn("event cache full: evicted oldest events", "evicted", s.Evicted-prev, "total_evicted", s.Evicted, "cached", s.Msgs, "limit", a.cfg.CacheSize)
		}
	}
}

// retention is one job's retention on this agent: its durable consumer on
// the job-events stream, while one is needed, and the events it holds for
// clients that have not received them.
//
// The consumer exists only while some local client of the job is not
// attached or is still owed an event: with every client attached, each job
// event would be acknowledged on arrival, so the agent spares the stream the
// deliveries and acknowledgements. Events published while a consumer is
// being created again (a client went away) are not retained; the events
// stream still caches them.
type retention struct {
	r       *jetstream.Retainer
	busy    bool                 // creating or deleting the consumer
	pending map[uint64]*retained // by stream sequence
}

type retained struct {
	m    *jetstream.RetainedMsg
	owed map[pmix.Rank]bool
}

func retainerName(cluster, node, nspace string) string {
	sum := sha256.Sum256([]byte(cluster + "\x00" + node + "\x00" + nspace))
	return "pmixbus_job_" + hex.EncodeToString(sum[:12])
}

// unattachedLocked reports whether a local client of job j is not attached.
func (a *Agent) unattachedLocked(j *job) bool { return len(a.unattachedRanksLocked(j)) > 0 }

// unattachedRanksLocked returns the ranks of job j placed on this node whose
// clients are not attached.
func (a *Agent) unattachedRanksLocked(j *job) map[pmix.Rank]bool {
	out := map[pmix.Rank]bool{}
	for r, node := range j.procs {
		if node != a.cfg.Node {
			continue
		}
		if e := a.expected[pmix.Proc{Nspace: j.nspace, Rank: r}]; e == nil || e.conn == nil {
			out[r] = true
		}
	}
	return out
}

// ensureRetention creates or deletes the job's consumer as its clients'
// state requires. It talks to JetStream, so it is called without a.mu;
// concurrent calls leave the work to the one already at it, which checks
// again when done.
func (a *Agent) ensureRetention(nspace string) {
	ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
	defer cancel()
	a.mu.Lock()
	defer a.mu.Unlock()
	for range 4 {
		j := a.jobs[nspace]
		ret := a.retained[nspace]
		if j == nil || ret == nil || ret.busy || a.closed {
			return
		}
		want := len(ret.pending) > 0 || a.unattachedLocked(j)
		switch {
		case want && ret.r == nil:
			var filters []string
			for _, sc := range event.ClientScopes(a.place(), j.nspace, j.session) {
				filters = append(filters, subjects.JobCacheSubject(sc.CachedWildcard()))
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
			r := ret.r
			ret.r, ret.busy = nil, true
			a.mu.Unlock()
			err := r.Delete(ctx)
			a.mu.Lock()
			ret.busy = false
			if err != nil && a.ctx.Err() == nil {
				a.log.Warn("deleting job event consumer", "nspace", nspace, "err", err)
			}
		default:
			return
		}
	}
}

// retainJobLocked starts tracking retention for job j, if it has procs on
// this node; the caller then calls ensureRetention.
func (a *Agent) retainJobLocked(j *job) {
	if _, ok := a.retained[j.nspace]; ok || !j.hasNode(a.cfg.Node) {
		return
	}
	a.retained[j.nspace] = &retention{pending: map[uint64]*retained{}}
}

// retainedArrived decides whether a job event is owed to clients that have
// not received it.
func (a *Agent) retainedArrived(nspace string, m *jetstream.RetainedMsg) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ret, ok := a.retained[nspace]
	j := a.jobs[nspace]
	if !ok || j == nil {
		return
	}
	if _, dup := ret.pending[m.Seq]; dup {
		return // redelivered while we still hold it
	}
	owed := a.unattachedRanksLocked(j)
	if len(owed) == 0 {
		_ = m.Ack()
		a.goFunc(func() { a.ensureRetention(nspace) }) // everyone is attached: maybe no consumer needed
		return
	}
	ret.pending[m.Seq] = &retained{m: m, owed: owed}
}

// receivedLocked records that client p has received the retained events
// with the given ids (replayed to a registration that accepted them), or
// all of them for nil ids (the client is gone). Called with a.mu held.
func (a *Agent) receivedLocked(p pmix.Proc, ids map[string]bool) {
	ret, ok := a.retained[p.Nspace]
	if !ok {
		return
	}
	for seq, h := range ret.pending {
		if ids != nil && !ids[h.m.ID] {
			continue
		}
		delete(h.owed, p.Rank)
		if len(h.owed) == 0 {
			_ = h.m.Ack()
			delete(ret.pending, seq)
		}
	}
	if len(ret.pending) == 0 {
		a.goFunc(func() { a.ensureRetention(p.Nspace) })
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

// readCache reads the cached events a new registration matches and passes
// them to batch, oldest first (see routerHost). No deadline bounds the whole
// read, which lasts as long as the backlog needs; each request to JetStream
// has its own. A cache that cannot be read to the end leaves the
// registration with what was read and live events, which is logged.
func (a *Agent) readCache(ctx context.Context, proc pmix.Proc, session string, g bus.Registration, marked func(), batch func([]cachedEvent) error) error {
	scopes := event.ClientScopes(a.place(), proc.Nspace, session)
	var filters, jobFilters []string
	if g.WantsJob() {
		for _, sc := range scopes {
			for _, p := range sc.CachedPatterns(g.Codes) {
				filters = append(filters, p)
				jobFilters = append(jobFilters, subjects.JobCacheSubject(p))
			}
		}
	}
	if codes, ok := envCodes(g); ok {
		for _, sc := range scopes {
			filters = append(filters, sc.Environment().CachedPatterns(codes)...)
		}
	}
	_, err := a.cache.Replay(ctx, filters, jobFilters, jetstream.ReplayOptions{
		Marked: func(jetstream.ReadPoint) { marked() },
		Batch: func(msgs []jetstream.CachedMsg) error {
			out := make([]cachedEvent, 0, len(msgs))
			for _, cm := range msgs {
				p, err := subjects.Parse(subjects.EventSubject(cm.Subject))
				if err != nil {
					continue
				}
				m, err := event.UnmarshalMessage(cm.Data)
				if err != nil {
					a.log.Warn("skipping a malformed cached event", "subject", cm.Subject, "err", err)
					continue
				}
				out = append(out, cachedEvent{sc: p.Scope, m: m})
			}
			return batch(out)
		},
	})
	if err != nil && ctx.Err() == nil {
		a.log.Warn("reading the event cache for a new registration; it misses what was not read yet", "client", proc.String(), "err", err)
	}
	return err
}

// (j *job) hasNode reports whether the job has a proc on node.
func (j *job) hasNode(node string) bool {
	for _, n := range j.procs {
		if n == node {
			return true
		}
	}
	return false
}
