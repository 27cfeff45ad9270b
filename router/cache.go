package router

import (
	"context"
	"log/slog"
	"strings"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// Reading the event cache (docs/cache.md): for a new registration's
// replay (replay.go) and the recovery of dropped job events (recover.go).

// jsCache is the cluster's event cache as the router reads it.
type jsCache struct {
	c          *jetstream.EventCache
	place      event.Place
	log        *slog.Logger
	ctx        context.Context // the agent's: ends the reads when it stops
	onReplayed func(p pmix.Proc, session string, g bus.Registration, upTo uint64)
	r          *Router
}

// Mark fixes the recovery's anchor at the cache's state now: what was
// cached before the agent started is not for it to recover (recover.go).
// Call it before Dispatch.
func (r *Router) Mark(ctx context.Context) error {
	c, ok := r.cache.(*jsCache)
	if !ok || c.c == nil {
		return nil
	}
	rp, err := c.c.Mark(ctx)
	if err != nil {
		return err
	}
	r.anchor = readPoint{events: rp.Events, jobs: rp.Jobs, known: true}
	return nil
}

func (c *jsCache) replayed(p pmix.Proc, session string, g bus.Registration, upTo uint64) {
	if c.onReplayed != nil {
		c.onReplayed(p, session, g, upTo)
	}
}

// readJobEvents reads cached job events for the recovery of those NATS
// dropped (see cacheReader). It stops when the agent shuts down.
func (c *jsCache) readJobEvents(ctx context.Context, filters, jobFilters []string, after readPoint, marked func() error, batch func([]cachedEvent) error) (events, jobs uint64, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.ctx, cancel)()
	var markErr error
	rp, err := c.c.Replay(ctx, filters, jobFilters, jetstream.ReplayOptions{
		Marked: func(jetstream.ReadPoint) {
			if markErr = marked(); markErr != nil {
				cancel()
			}
		},
		Batch: func(msgs []jetstream.CachedMsg) error {
			if markErr != nil {
				return markErr
			}
			return batch(decodeCached(c.log, msgs))
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
func decodeCached(log *slog.Logger, msgs []jetstream.CachedMsg) []cachedEvent {
	out := make([]cachedEvent, 0, len(msgs))
	for _, cm := range msgs {
		p, err := subjects.Parse(subjects.EventSubject(cm.Subject))
		if err != nil {
			continue
		}
		m, err := event.UnmarshalMessage(cm.Data)
		if err != nil {
			log.Warn("skipping a malformed cached event", "subject", cm.Subject, "err", err)
			continue
		}
		out = append(out, cachedEvent{sc: p.Scope, m: m, seq: cm.Seq, evSeq: cm.EventSeq, cp: strings.HasPrefix(cm.Subject, subjects.JobCachePrefix+".")})
	}
	return out
}

// readCache reads the cached events a new registration matches and passes
// them to batch, oldest first (see cacheReader). No deadline bounds the whole
// read, which lasts as long as the backlog needs; each request to JetStream
// has its own. A cache that cannot be read to the end leaves the
// registration with what was read and live events, which is logged.
func (c *jsCache) readCache(ctx context.Context, proc pmix.Proc, session string, g bus.Registration, after readPoint, marked func(), batch func([]cachedEvent) error) (readPoint, error) {
	filters, jobFilters := replayFilters(c.place, proc, session, g)
	rp, err := c.c.Replay(ctx, filters, jobFilters, jetstream.ReplayOptions{
		Marked: func(jetstream.ReadPoint) { marked() },
		Batch: func(msgs []jetstream.CachedMsg) error {
			return batch(decodeCached(c.log, msgs))
		},
		After: jetstream.ReadPoint{Events: after.events, Jobs: after.jobs},
	})
	if err != nil && ctx.Err() == nil {
		c.log.Warn("reading the event cache for a new registration; it misses what was not read yet", "client", proc.String(), "err", err)
	}
	return readPoint{events: rp.Events, jobs: rp.Jobs, known: true}, err
}

// replayFilters returns the subjects of the cached events registration g
// of client proc (of session) matches: in the events stream, and of their
// copies in the job-events stream.
func replayFilters(place event.Place, proc pmix.Proc, session string, g bus.Registration) (filters, jobFilters []string) {
	scopes := event.ClientScopes(place, proc.Nspace, session)
	if g.WantsJob() {
		for _, sc := range scopes {
			for _, p := range sc.CachedPatterns(g.Codes) {
				filters = append(filters, p)
				jobFilters = append(jobFilters, subjects.JobCacheSubject(string(place.Cluster), p))
			}
		}
	}
	if codes, ok := envCodes(g); ok {
		for _, sc := range scopes {
			filters = append(filters, sc.Environment().CachedPatterns(codes)...)
		}
	}
	return filters, jobFilters
}

// jsSeq is the events stream read by sequence (sequence.go).
type jsSeq struct {
	c   *jetstream.EventCache
	log *slog.Logger
}

func (s jsSeq) lastSeq(ctx context.Context) (uint64, error) { return s.c.LastSeq(ctx) }

func (s jsSeq) readSeqs(ctx context.Context, from, to uint64, jobFilters []string, f func([]cachedEvent) error) (uint64, error) {
	return s.c.ReadSeqs(ctx, from, to, jobFilters, func(msgs []jetstream.CachedMsg) error {
		return f(decodeCached(s.log, msgs))
	})
}

func (s jsSeq) replayTo(ctx context.Context, filters, jobFilters []string, from, upTo uint64, f func([]cachedEvent) error) error {
	return s.c.ReplayTo(ctx, filters, jobFilters, from, upTo, func(msgs []jetstream.CachedMsg) error {
		return f(decodeCached(s.log, msgs))
	})
}
