package router

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/launch/liveness"
	"github.com/pmixbus/pmixbus/subjects"
)

// Catching up on the other clusters' GLOBAL events after this cluster's
// link was down (docs/subjects.md). The others sent theirs while the link
// was down and, their own links being up, kept none to send again; but
// each cluster's event cache holds the cacheable ones. So once the link is
// back, each agent of this cluster reads, in the cache of every other
// cluster that answers discovery (liveness.Clusters), the GLOBAL events it
// stored since a moment before the link went down, and runs its own
// clients' chains with those it did not have, each once (by id), in the
// order the cache holds them:
//
//   - an event of cluster X is taken from X's own cache only, which holds
//     all of X's, in the order X sent them; an event of a source that has
//     no cache answering (a tool on the hub) from the first cache that has
//     it; this cluster's own events are never read back;
//   - from the moment the link is seen down until the catch-up is done,
//     the other clusters' live GLOBAL events wait (none can arrive while
//     the link is down; those that come once it is back run after what is
//     caught up), so each source's events run in the order it sent them.

// CatchupHeader marks a GLOBAL event sent again after an outage
// (agent/globallink.go); its value is the sending cluster.
const CatchupHeader = "Pmixbus-Catchup"

const (
	// maxCatchupWaiting bounds the live GLOBAL events that wait for a
	// catch-up; past it they run, and those still to be caught up come
	// after them.
	maxCatchupWaiting = 1 << 16
	// foreignGlobalIDs is how many of the other clusters' GLOBAL events
	// an agent remembers, to drop the copies of those it received before
	// the link went down.
	foreignGlobalIDs = 4096
	// maxWaitWhileDown bounds the wait of the other clusters' GLOBAL
	// events while the link is seen down: one that arrives then shows
	// that the link is up, and the top merely slow to answer the probe.
	maxWaitWhileDown = 5 * time.Second
)

// globalCatchup is the router's side of catching up; the dispatch
// goroutine alone touches it, but for the counters.
type globalCatchup struct {
	holds    int // catch-ups begun and not ended: other clusters' GLOBAL events wait
	waiting  []waitingGlobal
	since    time.Time // when the first of waiting arrived
	overflow bool      // waiting outgrew its bounds: nothing waits until the holds end
	recent   recentIDs // the other clusters' GLOBAL events received or caught up

	caughtUp atomic.Uint64 // events the chains ran from other clusters' caches
}

type waitingGlobal struct {
	sc subjects.Scope
	m  *event.Message
}

// holdForCatchup remembers another cluster's GLOBAL event and, while a
// catch-up is due, keeps it until the catch-up is done.
func (r *Router) holdForCatchup(sc subjects.Scope, m *event.Message) bool {
	c := &r.catchup
	if sc.Kind() != subjects.KindGlobal || m.Source.Cluster == string(r.place.Cluster) {
		return false
	}
	c.remember(m.ID)
	if c.holds == 0 || c.overflow {
		return false
	}
	if len(c.waiting) >= maxCatchupWaiting {
		r.log.Warn("too many GLOBAL events waiting for the catch-up after the link's outage: they run now, and what is caught up after them", "waiting", len(c.waiting))
		c.overflow = true
		r.runWaiting()
		return false
	}
	if len(c.waiting) == 0 {
		c.since = time.Now()
	}
	c.waiting = append(c.waiting, waitingGlobal{sc, m})
	return true
}

// releaseStale runs the GLOBAL events that have waited too long while
// the link is seen down (maxWaitWhileDown), and has no more wait until
// the catch-ups end.
func (r *Router) releaseStale() {
	c := &r.catchup
	if len(c.waiting) == 0 || c.overflow || time.Since(c.since) < maxWaitWhileDown {
		return
	}
	r.log.Warn("GLOBAL events of other clusters arrive while the link to them is seen down: the top of the topology is slow to answer; they run now", "waiting", len(c.waiting))
	c.overflow = true
	r.runWaiting()
}

// remember records id and reports whether it was new.
func (c *globalCatchup) remember(id string) bool {
	if c.recent.max == 0 {
		c.recent = newRecentIDs(foreignGlobalIDs)
	}
	return c.recent.add(id)
}

func (r *Router) runWaiting() {
	w := r.catchup.waiting
	r.catchup.waiting = nil
	for _, g := range w {
		r.receive(g.sc, g.m)
	}
}

// beginCatchup has the other clusters' GLOBAL events wait from now until
// a matching endCatchup.
func (r *Router) BeginCatchup() { r.post(func() { r.catchup.holds++ }) }

// endCatchup runs the GLOBAL events that waited, once no catch-up is due.
func (r *Router) EndCatchup() {
	r.post(func() {
		c := &r.catchup
		if c.holds--; c.holds > 0 {
			return
		}
		c.overflow = false
		r.runWaiting()
	})
}

// catchUp runs the chains with caught-up events that did not come
// before, and returns once it has, or the agent stops.
func (r *Router) CatchUp(evs []cachedEvent) error {
	done := make(chan struct{})
	r.post(func() {
		defer close(done)
		for _, e := range evs {
			if r.catchup.remember(e.m.ID) {
				r.catchup.caughtUp.Add(1)
				r.receive(e.sc, e.m)
			}
		}
	})
	select {
	case <-done:
		return nil
	case <-r.done:
		return errStopped
	}
}

var errStopped = errors.New("the agent stopped")

// globalFilters returns the cache subjects of the GLOBAL events the
// agent's clients take: none when no registration takes any.
func (r *Router) GlobalFilters() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var job, env bool
	for _, sc := range r.scopes {
		if sc.Kind() == subjects.KindGlobal {
			job = job || !sc.IsEnvironment()
			env = env || sc.IsEnvironment()
		}
	}
	var out []string
	if job {
		out = append(out, subjects.Global().CachedWildcard())
	}
	if env {
		out = append(out, subjects.Global().Environment().CachedWildcard())
	}
	return out
}

// catchupState: one catch-up at a time.
type catchupState struct {
	mu   sync.Mutex
	done atomic.Uint64 // catch-ups completed
}

// CatchUpGlobal reads, over nc, the caches of the other clusters (others)
// for the GLOBAL events they stored from time from on, and runs the local
// chains with them, then ends the catch-up BeginCatchup began. It returns
// when done, or when ctx ends or the router stops.
func (r *Router) CatchUpGlobal(ctx context.Context, nc *nats.Conn, others []liveness.ClusterInfo, from time.Time) {
	defer r.EndCatchup()
	r.catchupRun.mu.Lock()
	defer r.catchupRun.mu.Unlock()
	filters := r.GlobalFilters()
	if len(filters) == 0 {
		r.catchupRun.done.Add(1)
		return // no client takes GLOBAL events
	}
	listed := make(map[string]bool, len(others))
	for _, ci := range others {
		listed[string(ci.Cluster)] = true
	}
	own := string(r.place.Cluster)
	for _, ci := range others {
		cl := string(ci.Cluster)
		var read uint64
		before := r.catchup.caughtUp.Load()
		evicted, err := jetstream.ReadClusterEvents(ctx, nc, cl, ci.Domain, filters, from, func(msgs []jetstream.CachedMsg) error {
			evs := decodeCached(r.log, msgs)
			keep := evs[:0]
			for _, e := range evs {
				if src := e.m.Source.Cluster; src != own && (src == cl || !listed[src]) {
					keep = append(keep, e)
				}
			}
			read += uint64(len(msgs))
			if len(keep) == 0 {
				return nil
			}
			return r.CatchUp(keep)
		})
		ran := r.catchup.caughtUp.Load() - before
		switch {
		case errors.Is(err, errStopped) || r.isDone():
			return
		case err != nil:
			r.log.Warn("reading another cluster's cache for the GLOBAL events of the link's outage: those not read yet are not caught up", "cluster", cl, "caught_up", ran, "err", err)
		case evicted:
			r.log.Warn("another cluster's cache has discarded events of the link's outage for its limits: GLOBAL events among them are not caught up", "cluster", cl, "caught_up", ran)
		case ran > 0:
			r.log.Info("caught up on GLOBAL events of the link's outage", "cluster", cl, "read", read, "caught_up", ran)
		}
	}
	r.catchupRun.done.Add(1)
}

// isDone reports whether the agent stopped.
func (r *Router) isDone() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}
