package router

import (
	"context"
	"log/slog"
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
//     CatchupHeader, so this cluster's agents ignore it).
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
	// catchupMargin: the read starts this long before the last probe that
	// found the link up, for an event stored a moment before, or stamped
	// by a clock a little behind this agent's; what came is dropped.
	catchupMargin = 2 * linkProbeInterval
	// catchupDiscovery bounds the wait for the clusters' answers.
	catchupDiscovery = time.Second
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

// Link is an agent's link to the other clusters, as its GLOBAL events
// need it (above). Its methods are safe for concurrent use.
type Link struct {
	r       *Router
	nc      *nats.Conn
	cluster cluster.ID
	log     *slog.Logger
	ctx     context.Context
	done    <-chan struct{}
	goFunc  func(func()) bool
	onDown  func()
	sourced *jetstream.EventCache
	// wake makes the sourcing look for clusters at once.
	wake chan struct{}

	watched atomic.Bool // this cluster is not the top: its link can go down
	down    atomic.Bool
	mu      sync.Mutex
	held    []*event.Message
	dropped int
}

// LinkConfig is what NewLink needs.
type LinkConfig struct {
	Router  *Router
	NATS    *nats.Conn
	Cluster cluster.ID
	Log     *slog.Logger    // nil discards
	Ctx     context.Context // ends its calls (the agent stopping)
	Done    <-chan struct{} // closed when the agent stops
	GoFunc  func(func()) bool
	// OnDown is called when the link is seen down (nil: nothing more);
	// publish/lookup marks its GLOBAL values stale.
	OnDown func()
}

// NewLink returns the link; Watch starts watching it.
func NewLink(cfg LinkConfig) *Link {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Link{r: cfg.Router, nc: cfg.NATS, cluster: cfg.Cluster, log: cfg.Log, ctx: cfg.Ctx, done: cfg.Done, goFunc: cfg.GoFunc, onDown: cfg.OnDown,
		wake: make(chan struct{}, 1)}
}

// LinkStats is the link's state: down, watched, and the GLOBAL events
// held for the others.
type LinkStats struct {
	Down, Watched bool
	Held          int
}

// Stats returns the link's state.
func (l *Link) Stats() LinkStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LinkStats{Down: l.down.Load(), Watched: l.watched.Load(), Held: len(l.held)}
}

// every calls f every interval until the agent stops; until calls f so
// until it reports it is done.
func (l *Link) every(interval time.Duration, f func()) {
	tick(l.done, interval, nil, func() bool { f(); return false })
}

func (l *Link) until(interval time.Duration, f func() (done bool)) { tick(l.done, interval, nil, f) }

// tick calls f every interval, and whenever wake receives, until f
// reports it is done or done is closed.
func tick(done <-chan struct{}, interval time.Duration, wake <-chan struct{}, f func() bool) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		case <-wake:
		}
		if f() {
			return
		}
	}
}

// Watch starts probing the link when this cluster is not the
// top of its topology. When nothing answers for the top at start (the
// agent started while its leaf link was not up yet), it asks again every
// linkProbeInterval until something does, and decides then: until that
// answer this cluster counts as unlinked, as a server without the top's
// mapping is.
func (l *Link) Watch(ctx context.Context) {
	if l.sourced != nil {
		l.goFunc(l.source)
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	top, err := cluster.TopDomain(pctx, l.nc)
	cancel()
	if err == nil {
		l.watchIfBelow(top)
		return
	}
	l.goFunc(func() {
		l.until(linkProbeInterval, func() bool {
			pctx, cancel := context.WithTimeout(l.ctx, linkProbeInterval)
			top, err := cluster.TopDomain(pctx, l.nc)
			cancel()
			if err != nil {
				return false
			}
			l.log.Info("the top of the topology answers now", "domain", top)
			l.watchIfBelow(top)
			return true
		})
	})
}

// watchIfBelow starts probing the link to the top, whose domain is top,
// unless this cluster is the top itself (or a lone server): no link to
// lose there.
func (l *Link) watchIfBelow(top string) {
	if top == l.cluster.Domain() {
		return
	}
	l.watched.Store(true)
	l.goFunc(l.probe)
}

func (l *Link) probe() {
	// lastUp is when the last probe that the top answered began: the
	// other clusters' events before it reached this one.
	lastUp, downSince := time.Now(), time.Time{}
	l.every(linkProbeInterval, func() {
		began := time.Now()
		ctx, cancel := context.WithTimeout(l.ctx, linkProbeInterval)
		_, err := cluster.TopDomain(ctx, l.nc)
		cancel()
		down := err != nil
		switch {
		case down && !l.down.Swap(true):
			l.log.Warn("the link to the other clusters is down: GLOBAL events reach this cluster only until it is back", "err", err)
			downSince = lastUp
			if l.sourced == nil {
				l.r.BeginCatchup()
			}
			if l.onDown != nil {
				l.onDown()
			}
		case down:
			l.r.ReleaseStale()
		case !l.down.Swap(false):
			// up, as it was
		case l.sourced != nil:
			l.log.Info("the link to the other clusters is back; JetStream resumes sourcing their GLOBAL events")
			l.lookForClusters()
		default:
			l.log.Info("the link to the other clusters is back; sending them the GLOBAL events of the outage, and catching up on theirs")
			since := downSince
			if !l.goFunc(func() { l.afterOutage(since) }) {
				l.r.EndCatchup()
			}
		}
		if err == nil {
			lastUp = began
		}
	})
}

// sent is told of every GLOBAL event this agent published, and
// says whether the other clusters will have it.
func (l *Link) sent(m *event.Message) error {
	if !l.watched.Load() || !l.down.Load() {
		return nil
	}
	if pmix.Flag(m.Info, pmix.KeyEventDoNotCache) {
		return pmix.Errorf(pmix.ErrUnreach, "the link to the other clusters is down: this GLOBAL event, which may not be cached, reached cluster %s only", l.cluster)
	}
	if l.sourced != nil {
		return nil // in this cluster's events stream, which the others source
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.held) >= maxHeldGlobal {
		l.held = l.held[1:]
		l.dropped++
	}
	l.held = append(l.held, m)
	return nil
}

// afterOutage sends the held GLOBAL events to the other clusters at once
// and, once subscriptions made across the link have crossed too, again;
// then it catches up on theirs of the outage, which began after since.
func (l *Link) afterOutage(since time.Time) {
	l.sendHeldGlobal(l.otherClusters(), false)
	select {
	case <-l.done:
		l.r.EndCatchup()
		return
	case <-time.After(catchupSettle):
	}
	others := l.otherClusters()
	l.sendHeldGlobal(others, true)
	l.r.CatchUpGlobal(l.ctx, l.nc, others, since.Add(-catchupMargin))
}

// otherClusters asks which clusters there are (docs/subjects.md), and
// returns those other than this one; nil when the question fails, which
// it logs.
func (l *Link) otherClusters() []liveness.ClusterInfo {
	all, err := liveness.Clusters(l.ctx, l.nc, catchupDiscovery)
	if err != nil {
		l.log.Warn("cannot ask which clusters there are, after the link's outage", "err", err)
		return nil
	}
	return slices.DeleteFunc(all, func(ci liveness.ClusterInfo) bool { return ci.Cluster == l.cluster })
}

// sendHeldGlobal sends the held GLOBAL events to the other clusters; last
// forgets them.
func (l *Link) sendHeldGlobal(others []liveness.ClusterInfo, last bool) {
	l.mu.Lock()
	held, dropped := l.held, l.dropped
	if last {
		l.held, l.dropped = nil, 0
	}
	l.mu.Unlock()
	if dropped > 0 && last {
		l.log.Warn("GLOBAL events of a long outage were not kept for the other clusters", "dropped", dropped)
	}
	for _, m := range held {
		if err := l.sendAgain(m, others); err != nil {
			l.log.Warn("sending a GLOBAL event of the outage again", "event", m.ID, "err", err)
		}
	}
}

// sendAgain sends a held GLOBAL event again, marked with CatchupHeader:
// one copy for each of the other clusters, which only that cluster's
// events stream stores (Nats-Expected-Stream; it makes the job-events
// copy itself), so that this cluster's own never stores it twice, however
// long the outage lasted; or, knowing of no other cluster, one copy, which
// this cluster's streams drop as a duplicate within their window (a
// minute) only.
func (l *Link) sendAgain(m *event.Message, others []liveness.ClusterInfo) error {
	sc := subjects.GlobalFrom(string(l.cluster))
	if m.Environment {
		sc = sc.Environment()
	}
	mark := func(stream string) nats.Header {
		h := nats.Header{CatchupHeader: []string{string(l.cluster)}}
		if stream != "" {
			h[nats.ExpectedStreamHdr] = []string{stream}
		}
		return h
	}
	if len(others) == 0 {
		return event.PublishWith(l.nc, m, []subjects.Scope{sc}, mark(""))
	}
	for _, ci := range others {
		if err := event.PublishWith(l.nc, m, []subjects.Scope{sc}, mark(jetstream.EventStreamName(string(ci.Cluster)))); err != nil {
			return err
		}
	}
	return nil
}

// Publish publishes an event of a local client (from) or of the host RM
// (nil), and says when a GLOBAL one reached this cluster only
// (pmix.ErrUnreach).
func (l *Link) Publish(m *event.Message, from *event.Sender) error {
	if err := l.r.Publish(m, from); err != nil {
		return err
	}
	if m.Range == pmix.RangeGlobal {
		return l.sent(m)
	}
	return nil
}
