package jetstream

import (
	"context"
	"slices"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// Sourcing another cluster's GLOBAL events (docs/cache.md): each cluster's
// events stream stores the GLOBAL events of its own cluster, and sources
// those of every other cluster from that cluster's events stream, in its
// JetStream domain, filtered to the subjects only that cluster's own
// GLOBAL events take (so nothing is sourced back where it came from).
// JetStream keeps each source's position: after a leaf link's outage it
// resumes where it stopped, so each other cluster's GLOBAL events are
// stored once, in that cluster's order, and republished with this
// stream's sequence like every cached event.

// GlobalSource is another cluster whose GLOBAL events a cluster's events
// stream sources.
type GlobalSource struct {
	Cluster string // names its events stream (EventStreamName)
	Domain  string // its JetStream domain
	// Filter selects its own GLOBAL events in its events stream: one
	// subject pattern (subjects.GlobalSourceFilter).
	Filter string
}

// streamSource is s as the events stream's configuration names it.
func (s GlobalSource) streamSource() *natsjs.StreamSource {
	return &natsjs.StreamSource{
		Name:          EventStreamName(s.Cluster),
		FilterSubject: s.Filter,
		External:      &natsjs.ExternalStream{APIPrefix: "$JS." + s.Domain + ".API"},
	}
}

// sameSource reports whether two sources read the same stream, domain and
// filter.
func sameSource(a, b *natsjs.StreamSource) bool {
	if a.Name != b.Name || a.FilterSubject != b.FilterSubject || (a.External == nil) != (b.External == nil) {
		return false
	}
	return a.External == nil || a.External.APIPrefix == b.External.APIPrefix
}

// SourceGlobal has the events stream source the GLOBAL events of each of
// srcs it does not source yet (a stream update; sources already there are
// kept, with their positions), and returns how many it added. Every agent
// of a cluster may call it as it learns of a cluster; an update that
// raced another's is found lacking by the next call, which adds what it
// lost.
//
// Errors: ErrUnreachable when JetStream does not answer.
func (c *EventCache) SourceGlobal(ctx context.Context, srcs []GlobalSource) (int, error) {
	info, err := c.events.Info(ctx)
	if err != nil {
		return 0, kvError(err, "event cache stream")
	}
	cfg := info.Config
	added := 0
	for _, s := range srcs {
		ss := s.streamSource()
		if !slices.ContainsFunc(cfg.Sources, func(have *natsjs.StreamSource) bool { return sameSource(have, ss) }) {
			cfg.Sources = append(cfg.Sources, ss)
			added++
		}
	}
	if added == 0 {
		return 0, nil
	}
	if _, err := c.js.UpdateStream(ctx, cfg); err != nil {
		return 0, kvError(err, "sourcing other clusters' GLOBAL events")
	}
	return added, nil
}

// SourcedGlobal returns the clusters whose GLOBAL events the events stream
// sources, as its configuration names their streams.
func (c *EventCache) SourcedGlobal(ctx context.Context) ([]string, error) {
	info, err := c.events.Info(ctx)
	if err != nil {
		return nil, kvError(err, "event cache stream")
	}
	var out []string
	for _, s := range info.Config.Sources {
		out = append(out, s.Name)
	}
	return out, nil
}
