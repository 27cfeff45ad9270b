package agent

import (
	"context"
	"time"

	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/subjects"
)

// The event cache (docs/cache.md): the cluster's streams, opened here and
// handed to the event service (package router, Router.Sequence), which
// reads them; their evictions are watched here.

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
		Replicas:    a.replicas,
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
