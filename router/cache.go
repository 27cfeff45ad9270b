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

// Reading the event cache (docs/cache.md) by the events stream's
// sequence: a gap's events (sequence.go), and a new registration's replay
// (replay.go).

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
