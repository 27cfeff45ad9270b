package agent

import (
	"context"
	"strings"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// The event cache (docs/cache.md). Cacheable events are captured by the
// cluster's streams as they are published. A new registration is held out
// of live chains while the cached events it matches are replayed to it
// (replay.go), read here; a job's events are also kept until every local
// client of the job has received them (retention.go).

func (a *Agent) openCache(ctx context.Context) error {
	all, jobs := subjects.CacheSubjects(string(a.cfg.Cluster))
	from, to := subjects.JobCopyTransform(string(a.cfg.Cluster))
	c, err := jetstream.OpenEventCache(ctx, a.nc, jetstream.EventCacheConfig{
		Cluster:     string(a.cfg.Cluster),
		Subjects:    all,
		JobSubjects: jobs,
		CopyFrom:    from,
		CopyTo:      to,
		MaxMsgs:     int64(a.cfg.CacheSize),
		MaxAge:      a.cfg.CacheMaxAge,
		MaxBytes:    a.cfg.CacheMaxBytes,
		Memory:      a.cfg.CacheMemory,
	})
	if err != nil {
		return err
	}
	a.cache = c
	// What was cached before the agent started is not for it to recover
	// (recover.go).
	if rp, err := c.Mark(ctx); err != nil {
		a.log.Warn("cannot read the event cache's last sequences; dropped job events are recovered only after a job event the agent received", "err", err)
	} else {
		a.router.anchor = readPoint{events: rp.Events, jobs: rp.Jobs, known: true}
	}
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
	a.every(every, func() {
		ctx, cancel := context.WithTimeout(a.ctx, every)
		s, err := a.cache.Stats(ctx)
		cancel()
		if err != nil {
			return
		}
		if prev := a.evicted.Swap(s.Evicted); s.Evicted > prev {
			a.log.Warn("event cache full: evicted oldest events", "evicted", s.Evicted-prev, "total_evicted", s.Evicted, "cached", s.Msgs, "limit", a.cfg.CacheSize)
		}
	})
}

// readJobEvents reads cached job events for the recovery of those NATS
// dropped (see routerHost). It stops when the agent shuts down.
func (a *Agent) readJobEvents(ctx context.Context, filters, jobFilters []string, after readPoint, marked func() error, batch func([]cachedEvent) error) (events, jobs uint64, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(a.ctx, cancel)()
	var markErr error
	rp, err := a.cache.Replay(ctx, filters, jobFilters, jetstream.ReplayOptions{
		Marked: func(jetstream.ReadPoint) {
			if markErr = marked(); markErr != nil {
				cancel()
			}
		},
		Batch: func(msgs []jetstream.CachedMsg) error {
			if markErr != nil {
				return markErr
			}
			return batch(a.decodeCached(msgs))
		},
		JobsAfterMarked: true, // the events stream queued its copies ahead of the later mark
		After:           jetstream.ReadPoint{Events: after.events, Jobs: after.jobs},
	})
	if markErr != nil {
		return rp.Events, rp.Jobs, markErr
	}
	return rp.Events, rp.Jobs, err
}

// decodeCached decodes cached events, skipping (and logging) the malformed.
func (a *Agent) decodeCached(msgs []jetstream.CachedMsg) []cachedEvent {
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
		out = append(out, cachedEvent{sc: p.Scope, m: m, seq: cm.Seq, cp: strings.HasPrefix(cm.Subject, subjects.JobCachePrefix+".")})
	}
	return out
}

// readCache reads the cached events a new registration matches and passes
// them to batch, oldest first (see routerHost). No deadline bounds the whole
// read, which lasts as long as the backlog needs; each request to JetStream
// has its own. A cache that cannot be read to the end leaves the
// registration with what was read and live events, which is logged.
func (a *Agent) readCache(ctx context.Context, proc pmix.Proc, session string, g bus.Registration, after readPoint, marked func(), batch func([]cachedEvent) error) (readPoint, error) {
	scopes := event.ClientScopes(a.place(), proc.Nspace, session)
	var filters, jobFilters []string
	if g.WantsJob() {
		for _, sc := range scopes {
			for _, p := range sc.CachedPatterns(g.Codes) {
				filters = append(filters, p)
				jobFilters = append(jobFilters, subjects.JobCacheSubject(string(a.cfg.Cluster), p))
			}
		}
	}
	if codes, ok := envCodes(g); ok {
		for _, sc := range scopes {
			filters = append(filters, sc.Environment().CachedPatterns(codes)...)
		}
	}
	rp, err := a.cache.Replay(ctx, filters, jobFilters, jetstream.ReplayOptions{
		Marked: func(jetstream.ReadPoint) { marked() },
		Batch: func(msgs []jetstream.CachedMsg) error {
			return batch(a.decodeCached(msgs))
		},
		After: jetstream.ReadPoint{Events: after.events, Jobs: after.jobs},
	})
	if err != nil && ctx.Err() == nil {
		a.log.Warn("reading the event cache for a new registration; it misses what was not read yet", "client", proc.String(), "err", err)
	}
	return readPoint{events: rp.Events, jobs: rp.Jobs, known: true}, err
}
