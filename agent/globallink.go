package agent

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/launch/liveness"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// The link to the other clusters, as GLOBAL events need it. A cluster
// that is not the top of its topology reaches the others over its leaf
// link to the hub, which can go down: the agent probes the top (the
// subject cluster.TopDomain asks) and, while it does not answer,
//
//   - a GLOBAL event that may not be cached (PMIX_EVENT_DO_NOT_CACHE)
//     reaches this cluster only, and its notify says so (PMIX_ERR_UNREACH);
//   - a cacheable GLOBAL event is published here as usual and kept, and
//     sent again to the others once the link is back (with the same id,
//     so receivers that have it drop the copy, and marked with
//     catchupHeader, so this cluster's agents ignore it).
//
// The others catch up on the events this cluster sent meanwhile; this
// cluster catches up on theirs by reading their caches (globalcatchup.go),
// and, when their links went down too (a hub outage takes every link
// down), when they send theirs again.
//
// An event is sent again once for each other cluster, each copy stored
// by that cluster's streams only (sendAgain), so that this cluster's own
// cache does not store it twice after an outage longer than its duplicate
// window.

const (
	// catchupHeader marks a GLOBAL event sent again after an outage; its
	// value is the sending cluster.
	catchupHeader = "Pmixbus-Catchup"
	// linkProbeInterval is how often an agent asks the top of its
	// topology whether the link is up.
	linkProbeInterval = 500 * time.Millisecond
	// maxHeldGlobal bounds the GLOBAL events kept for the others during
	// an outage; older ones are dropped past it, and logged.
	maxHeldGlobal = 10000
	// catchupSettle is how long after the link returns the held events go
	// out again, once more: subscriptions made across the link reach this
	// cluster a moment after the link itself.
	catchupSettle = 2 * time.Second
)

type globalLink struct {
	watched atomic.Bool // this cluster is not the top: its link can go down
	down    atomic.Bool
	mu      sync.Mutex
	held    []*event.Message
	dropped int
	catchup catchupState
}

// watchGlobalLink starts probing the link when this cluster is not the
// top of its topology. When nothing answers for the top at start (the
// agent started while its leaf link was not up yet), it asks again every
// linkProbeInterval until something does, and decides then: until that
// answer this cluster counts as unlinked, as a server without the top's
// mapping is.
func (a *Agent) watchGlobalLink(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	top, err := cluster.TopDomain(pctx, a.nc)
	cancel()
	if err == nil {
		a.watchIfBelow(top)
		return
	}
	a.goFunc(func() {
		a.until(linkProbeInterval, nil, func() bool {
			pctx, cancel := context.WithTimeout(a.ctx, linkProbeInterval)
			top, err := cluster.TopDomain(pctx, a.nc)
			cancel()
			if err != nil {
				return false
			}
			a.log.Info("the top of the topology answers now", "domain", top)
			a.watchIfBelow(top)
			return true
		})
	})
}

// watchIfBelow starts probing the link to the top, whose domain is top,
// unless this cluster is the top itself (or a lone server): no link to
// lose there.
func (a *Agent) watchIfBelow(top string) {
	if top == a.cfg.Cluster.Domain() {
		return
	}
	a.link.watched.Store(true)
	a.goFunc(a.probeGlobalLink)
}

func (a *Agent) probeGlobalLink() {
	// lastUp is when the last probe that the top answered began: the
	// other clusters' events before it reached this one.
	lastUp, downSince := time.Now(), time.Time{}
	a.every(linkProbeInterval, func() {
		began := time.Now()
		ctx, cancel := context.WithTimeout(a.ctx, linkProbeInterval)
		_, err := cluster.TopDomain(ctx, a.nc)
		cancel()
		switch down := err != nil; {
		case down && !a.link.down.Swap(true):
			a.log.Warn("the link to the other clusters is down: GLOBAL events reach this cluster only until it is back", "err", err)
			downSince = lastUp
			a.router.beginCatchup()
			if p := a.pl; p != nil && p.global != p.local {
				p.svc.GlobalLinkDown() // its GLOBAL values may be stale from now on
			}
		case !down && a.link.down.Swap(false):
			a.log.Info("the link to the other clusters is back; sending them the GLOBAL events of the outage, and catching up on theirs")
			since := downSince
			if !a.goFunc(func() { a.afterOutage(since) }) {
				a.router.endCatchup()
			}
		case down:
			a.router.post(a.router.releaseStale)
		}
		if err == nil {
			lastUp = began
		}
	})
}

// globalSent is told of every GLOBAL event this agent published, and
// says whether the other clusters will have it.
func (a *Agent) globalSent(m *event.Message) error {
	if !a.link.watched.Load() || !a.link.down.Load() {
		return nil
	}
	if pmix.Flag(m.Info, pmix.KeyEventDoNotCache) {
		return pmix.Errorf(pmix.ErrUnreach, "the link to the other clusters is down: this GLOBAL event, which may not be cached, reached cluster %s only", a.cfg.Cluster)
	}
	a.link.mu.Lock()
	defer a.link.mu.Unlock()
	if len(a.link.held) >= maxHeldGlobal {
		a.link.held = a.link.held[1:]
		a.link.dropped++
	}
	a.link.held = append(a.link.held, m)
	return nil
}

// afterOutage sends the held GLOBAL events to the other clusters at once
// and, once subscriptions made across the link have crossed too, again;
// then it catches up on theirs of the outage, which began after since.
func (a *Agent) afterOutage(since time.Time) {
	a.sendHeldGlobal(a.otherClusters(), false)
	select {
	case <-a.done:
		a.router.endCatchup()
		return
	case <-time.After(catchupSettle):
	}
	others := a.otherClusters()
	a.sendHeldGlobal(others, true)
	a.catchUpGlobal(others, since)
}

// otherClusters asks which clusters there are (docs/subjects.md), and
// returns those other than this one; nil when the question fails, which
// it logs.
func (a *Agent) otherClusters() []liveness.ClusterInfo {
	all, err := liveness.Clusters(a.ctx, a.nc, catchupDiscovery)
	if err != nil {
		a.log.Warn("cannot ask which clusters there are, after the link's outage", "err", err)
		return nil
	}
	return slices.DeleteFunc(all, func(ci liveness.ClusterInfo) bool { return ci.Cluster == a.cfg.Cluster })
}

// sendHeldGlobal sends the held GLOBAL events to the other clusters; last
// forgets them.
func (a *Agent) sendHeldGlobal(others []liveness.ClusterInfo, last bool) {
	a.link.mu.Lock()
	held, dropped := a.link.held, a.link.dropped
	if last {
		a.link.held, a.link.dropped = nil, 0
	}
	a.link.mu.Unlock()
	if dropped > 0 && last {
		a.log.Warn("GLOBAL events of a long outage were not kept for the other clusters", "dropped", dropped)
	}
	for _, m := range held {
		if err := a.sendAgain(m, others); err != nil {
			a.log.Warn("sending a GLOBAL event of the outage again", "event", m.ID, "err", err)
		}
	}
}

// sendAgain sends a held GLOBAL event again, marked with catchupHeader:
// one copy for each of the other clusters, which only that cluster's
// events stream stores (Nats-Expected-Stream; it makes the job-events
// copy itself), so that this cluster's own never stores it twice, however
// long the outage lasted; or, knowing of no other cluster, one copy, which
// this cluster's streams drop as a duplicate within their window (a
// minute) only.
func (a *Agent) sendAgain(m *event.Message, others []liveness.ClusterInfo) error {
	sc := subjects.Global()
	if m.Environment {
		sc = sc.Environment()
	}
	mark := func(stream string) nats.Header {
		h := nats.Header{catchupHeader: []string{string(a.cfg.Cluster)}}
		if stream != "" {
			h[nats.ExpectedStreamHdr] = []string{stream}
		}
		return h
	}
	if len(others) == 0 {
		return event.PublishWith(a.nc, m, []subjects.Scope{sc}, mark(""))
	}
	for _, ci := range others {
		if err := event.PublishWith(a.nc, m, []subjects.Scope{sc}, mark(jetstream.EventStreamName(string(ci.Cluster)))); err != nil {
			return err
		}
	}
	return nil
}

// publishEvent publishes an event of a local client (from) or of the host
// RM (nil), and says when a GLOBAL one reached this cluster only.
func (a *Agent) publishEvent(m *event.Message, from *event.Sender) error {
	if err := a.router.publish(m, from); err != nil {
		return err
	}
	if m.Range == pmix.RangeGlobal {
		return a.globalSent(m)
	}
	return nil
}
