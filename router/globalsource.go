package router

import (
	"context"
	"time"

	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/launch/liveness"
	"github.com/pmixbus/pmixbus/subjects"
)

// GLOBAL events by stream sourcing (docs/cache.md), given the cluster's
// event cache (LinkConfig.Cache): each cluster's events stream stores its own GLOBAL
// events (pmix.evt.global.<cluster>.<code>) and sources every other
// cluster's, in that cluster's domain, filtered to that cluster's own
// (subjects.GlobalSourceFilter). So another cluster's GLOBAL event reaches
// this cluster's agents as every cached event does, as a copy of what
// this cluster's stream stored, in its sequence; after a leaf outage
// JetStream resumes each source where it stopped. The agents learn of the
// other clusters by asking which there are (liveness.Clusters), at start,
// when the link comes back, and then ever less often, and add a source
// for each one the stream lacks (an update of the stream's configuration,
// which keeps the sources already there).

const (
	// sourceFirstLook and sourceLastLook bound the pause between two
	// looks for clusters: from the first, doubling up to the last.
	sourceFirstLook = 500 * time.Millisecond
	sourceLastLook  = 30 * time.Second
)

// lookForClusters has the sourcing look for clusters at once, and then
// often again.
func (l *Link) lookForClusters() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// source looks for clusters the events stream does not source yet, and
// adds them, until the agent stops.
func (l *Link) source() {
	pause := sourceFirstLook
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-l.wake:
			pause = sourceFirstLook
		case <-t.C:
		}
		l.sourceOnce()
		t.Reset(pause)
		pause = min(2*pause, sourceLastLook)
	}
}

// sourceOnce adds a source for each other cluster that answers and that
// the events stream does not source yet.
func (l *Link) sourceOnce() {
	all, err := liveness.Clusters(l.ctx, l.nc, discoveryWait)
	if err != nil {
		return // the agent stopping, or NATS away: the next look
	}
	var srcs []jetstream.GlobalSource
	for _, ci := range all {
		if ci.Cluster == l.cluster || ci.Domain == "" {
			continue
		}
		srcs = append(srcs, jetstream.GlobalSource{Cluster: string(ci.Cluster), Domain: ci.Domain, Filter: subjects.GlobalSourceFilter(string(ci.Cluster))})
	}
	if len(srcs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(l.ctx, 5*time.Second)
	defer cancel()
	n, err := l.cache.SourceGlobal(ctx, srcs)
	switch {
	case err != nil:
		l.log.Warn("sourcing the other clusters' GLOBAL events", "err", err)
	case n > 0:
		l.log.Info("the events stream sources the GLOBAL events of more clusters", "added", n, "clusters", len(srcs))
	}
}
