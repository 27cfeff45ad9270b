package jetstream

import (
	"context"
	"slices"
	"sync"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/pmix"
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
// kept, with their positions), and returns how many it added.
//
// A stream's configuration is replaced whole by an update, and JetStream
// offers no compare-and-set on it: two updates made from one reading drop
// each other's change. So this process makes its updates of a stream one
// at a time (updating), and reads the configuration again after each,
// updating again while one of srcs is lacking (another agent's update,
// made from an older reading, dropped it). An agent in another process
// that updates after that second reading can still drop a source; the
// agents look again (router/globalsource.go) and add it back, and
// JetStream resumes a source added back after the last message the
// stream holds from it: nothing is lost or stored twice that the origin
// still holds.
//
// Errors: ErrUnreachable when JetStream does not answer; pmix.ErrGeneral
// when the sources were still lacking after maxSourceUpdates updates.
func (c *EventCache) SourceGlobal(ctx context.Context, srcs []GlobalSource) (int, error) {
	name := EventStreamName(c.cfg.Cluster)
	defer updating(name)()
	added := map[string]bool{}
	for range maxSourceUpdates {
		info, err := c.events.Info(ctx)
		if err != nil {
			return len(added), kvError(err, "event cache stream")
		}
		cfg := info.Config
		lacking := 0
		for _, s := range srcs {
			ss := s.streamSource()
			if !slices.ContainsFunc(cfg.Sources, func(have *natsjs.StreamSource) bool { return sameSource(have, ss) }) {
				cfg.Sources = append(cfg.Sources, ss)
				added[ss.Name] = true
				lacking++
			}
		}
		if lacking == 0 {
			return len(added), nil
		}
		if _, err := c.js.UpdateStream(ctx, cfg); err != nil {
			return len(added), kvError(err, "sourcing other clusters' GLOBAL events")
		}
		if afterSourceUpdate != nil {
			afterSourceUpdate()
		}
	}
	return len(added), pmix.Errorf(pmix.ErrGeneral, "sourcing other clusters' GLOBAL events: stream %s still lacked sources after %d updates (other agents updating it meanwhile)", name, maxSourceUpdates)
}

// afterSourceUpdate, when set (tests), runs after each update
// SourceGlobal makes: another agent's update racing it.
var afterSourceUpdate func()

// maxSourceUpdates bounds the updates one SourceGlobal makes.
const maxSourceUpdates = 5

// updates holds, by stream name, what serializes this process's updates
// of that stream's configuration.
var updates sync.Map

// updating waits until this process updates stream name's configuration
// alone, and returns what ends that.
func updating(name string) (done func()) {
	mu, _ := updates.LoadOrStore(name, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
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
