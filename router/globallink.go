package router

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
)

// The link to the other clusters, as GLOBAL events need it. Another
// cluster's GLOBAL events reach this one by stream sourcing between the
// clusters' domains (globalsource.go), which JetStream resumes after a
// leaf outage by itself. What is left here is knowing whether the link is
// up: a cluster that is not the top of its topology reaches the others
// over its leaf link to the hub, which can go down. The agent probes the
// top (the subject cluster.TopDomain asks) and, while it does not answer,
//
//   - a GLOBAL event that may not be cached (PMIX_EVENT_DO_NOT_CACHE)
//     reaches this cluster only, and its notify says so (PMIX_ERR_UNREACH);
//     a cacheable one is in this cluster's events stream, which the others
//     source once the link is back;
//   - publish/lookup is told (LinkConfig.OnDown);
//   - when the link returns, the sourcing looks for clusters at once.

const (
	// discoveryWait bounds the wait for the clusters' answers to which
	// clusters there are.
	discoveryWait = time.Second
	// linkProbeInterval is how often an agent asks the top of its
	// topology whether the link is up.
	linkProbeInterval = 500 * time.Millisecond
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
	cache   *jetstream.EventCache
	// wake makes the sourcing look for clusters at once.
	wake chan struct{}

	watched atomic.Bool // this cluster is not the top: its link can go down
	down    atomic.Bool
}

// LinkConfig is what NewLink needs.
type LinkConfig struct {
	Router  *Router
	NATS    *nats.Conn
	Cluster cluster.ID
	// Cache is the cluster's event cache, whose events stream sources the
	// other clusters' GLOBAL events (globalsource.go); nil sources
	// nothing.
	Cache *jetstream.EventCache
	Log   *slog.Logger    // nil discards
	Ctx   context.Context // ends its calls (the agent stopping)
	Done  <-chan struct{} // closed when the agent stops
	// GoFunc starts the link's goroutines; false when the agent stops.
	GoFunc func(func()) bool
	// OnDown is called when the link is seen down (nil: nothing more);
	// publish/lookup marks its GLOBAL values stale.
	OnDown func()
}

// NewLink returns the link; Watch starts watching it.
func NewLink(cfg LinkConfig) *Link {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Link{r: cfg.Router, nc: cfg.NATS, cluster: cfg.Cluster, cache: cfg.Cache, log: cfg.Log, ctx: cfg.Ctx, done: cfg.Done, goFunc: cfg.GoFunc, onDown: cfg.OnDown,
		wake: make(chan struct{}, 1)}
}

// LinkStats is the link's state: down, and watched.
type LinkStats struct {
	Down, Watched bool
}

// Stats returns the link's state.
func (l *Link) Stats() LinkStats {
	return LinkStats{Down: l.down.Load(), Watched: l.watched.Load()}
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
// mapping is. With a Cache, it also starts sourcing the other clusters'
// GLOBAL events (globalsource.go).
func (l *Link) Watch(ctx context.Context) {
	if l.cache != nil {
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
	l.every(linkProbeInterval, func() {
		ctx, cancel := context.WithTimeout(l.ctx, linkProbeInterval)
		_, err := cluster.TopDomain(ctx, l.nc)
		cancel()
		switch down := err != nil; {
		case down && !l.down.Swap(true):
			l.log.Warn("the link to the other clusters is down: GLOBAL events reach this cluster only until it is back", "err", err)
			if l.onDown != nil {
				l.onDown()
			}
		case down, !l.down.Swap(false):
			// as it was
		default:
			l.log.Info("the link to the other clusters is back; JetStream resumes sourcing their GLOBAL events")
			l.lookForClusters()
		}
	})
}

// sent is told of every GLOBAL event this agent published, and says
// whether the other clusters will have it: a cacheable one, in this
// cluster's events stream, they source once the link is back; a
// transient one reached this cluster only while the link is down.
func (l *Link) sent(m *event.Message) error {
	if !l.watched.Load() || !l.down.Load() || !pmix.Flag(m.Info, pmix.KeyEventDoNotCache) {
		return nil
	}
	return pmix.Errorf(pmix.ErrUnreach, "the link to the other clusters is down: this GLOBAL event, which may not be cached, reached cluster %s only", l.cluster)
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
