package agent

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/subjects"
)

// The event cache (docs/cache.md): the cluster's streams, opened here and
// read by the event service (package router); its evictions are watched
// here.

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
	a.retention.SetCache(c)
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

// sequenceCheckInterval is how often an agent with the sequenced dispatch
// looks for events the stream stored and no copy brought (a slow check:
// drops, leader elections and reconnects make it look at once).
const sequenceCheckInterval = 2 * time.Second

// startSequence has the router take the cluster's cached events in the
// events stream's order, and look for a gap at the tail when the stream
// elects a leader, and every sequenceCheckInterval (a slow consumer's
// drop and a reconnect make it look too: watchNATS).
func (a *Agent) startSequence() error {
	if err := a.router.Sequence(a.ctx, a.cache); err != nil {
		return err
	}
	a.retention.SetStamp(a.cache.LastSeq)
	advisory := "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED." + jetstream.EventStreamName(string(a.cfg.Cluster))
	if _, err := a.nc.Subscribe(advisory, func(*nats.Msg) { a.router.CheckTail() }); err != nil {
		return err
	}
	a.goFunc(func() { a.every(sequenceCheckInterval, a.router.CheckTail) })
	return nil
}
