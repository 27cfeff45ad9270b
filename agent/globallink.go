package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/event"
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
// A copy sent again after an outage longer than the streams' duplicate
// window (a minute) is stored a second time in this cluster's own cache:
// the header that marks it cannot keep one stream from capturing it and
// let the others'. Its agents ignore it live; a registration's replay
// drops the second copy of a job event (same id), and replays an
// environment event twice.

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
// top of its topology.
func (a *Agent) watchGlobalLink(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	top, err := cluster.TopDomain(pctx, a.nc)
	cancel()
	if err != nil || top == a.cfg.Cluster.Domain() {
		return // the top itself, or a lone server: no link to lose
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
		case !down && a.link.down.Swap(false):
			a.log.Info("the link to the other clusters is back; sending them the GLOBAL events of the outage, and catching up on theirs")
			a.sendHeldGlobal(false)
			since := downSince
			started := a.goFunc(func() {
				select {
				case <-a.done:
					a.router.endCatchup()
				case <-time.After(catchupSettle):
					a.sendHeldGlobal(true)
					a.catchUpGlobal(since)
				}
			})
			if !started {
				a.router.endCatchup()
			}
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

// sendHeldGlobal sends the held GLOBAL events to the other clusters; last
// forgets them.
func (a *Agent) sendHeldGlobal(last bool) {
	a.link.mu.Lock()
	held, dropped := a.link.held, a.link.dropped
	if last {
		a.link.held, a.link.dropped = nil, 0
	}
	a.link.mu.Unlock()
	if dropped > 0 && last {
		a.log.Warn("GLOBAL events of a long outage were not kept for the other clusters", "dropped", dropped)
	}
	mark := nats.Header{catchupHeader: []string{string(a.cfg.Cluster)}}
	for _, m := range held {
		sc := subjects.Global()
		if m.Environment {
			sc = sc.Environment()
		}
		if err := event.PublishWith(a.nc, m, []subjects.Scope{sc}, mark); err != nil {
			a.log.Warn("sending a GLOBAL event of the outage again", "event", m.ID, "err", err)
		}
	}
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
