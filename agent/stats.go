package agent

import (
	"errors"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/bus"
)

// Stats is a snapshot of what an agent has done since it started, for
// monitoring (pmixbus agent --metrics-addr exports it; docs/metrics.md).
// Counters only grow.
type Stats struct {
	// Clients.
	ClientsRegistered int // registered by the host, attached or not
	ClientsAttached   int
	Connections       int // open sockets, attached or still in their hello

	// Events.
	EventsPublished uint64 // sent on NATS for local clients and the host
	EventsReceived  uint64 // arrived on the agent's subscriptions (once each)
	EventsMalformed uint64 // arrived but could not be decoded, and dropped
	EventsDropped   uint64 // dropped by NATS before the agent read them: its inbox was full (slow consumer)
	// Of EventsDropped, the transient job events (the rest are
	// environment events or cached ones).
	JobEventsDropped uint64
	// Cached events: of EventsDropped, those NATS dropped (the copies
	// the events stream republished); those the agent fetched from the
	// cache for the gaps in its sequence, and those it found no stream
	// held any more, lost (docs/cache.md).
	CachedEventsDropped, CachedEventsFetched, CachedEventsLost uint64
	ChainsStarted                                              uint64 // live deliveries to a local client's chain
	ChainsReplayed                                             uint64 // cached events replayed to new registrations
	// EventsRunEarly counts the LOCAL events of local clients whose
	// chains ran before their copies came from the events stream
	// (docs/cache.md); they count in EventsReceived too.
	EventsRunEarly uint64
	// ChainsWaiting counts live deliveries waiting for room in their
	// client's window of chains in flight (Config.ChainWindow).
	ChainsWaiting int
	// RegistrationsHeld counts registrations being replayed to now: each
	// takes live events only once its replay is done (docs/cache.md).
	RegistrationsHeld int
	ChainsCompleted   uint64 // chains that ended, live or replayed
	HandlersTimedOut  uint64 // handlers passed over for not completing in time
	OutcomesDropped   uint64 // outcome reports not published: NATS was not keeping up
	OutcomesPublished uint64 // outcome reports published on NATS (only while someone subscribes)
	OutcomesUnheard   uint64 // outcome reports not published: nobody subscribed
	CacheEvictions    uint64 // events the cluster's cache discarded for its limits (last check)
	Subscriptions     int    // NATS subscriptions for the clients' registrations

	// The link to the other clusters (GLOBAL events): down.
	GlobalLinkDown bool
	// GlobalLinkWatched: this cluster is below the top of its topology,
	// and the agent probes its link (an agent that started with the link
	// down watches it once the top has answered).
	GlobalLinkWatched bool

	// NATS connection.
	NATSConnected   bool
	NATSDisconnects uint64
	NATSReconnects  uint64
	NATSErrors      uint64 // asynchronous errors NATS reported (slow consumers among them)

	// Liveness (launch/liveness).
	LivenessBeats        uint64 // refreshes of the agent's liveness key
	LivenessBeatFailures uint64 // refreshes that failed
	NodesDeclaredDown    uint64 // nodes of the cluster this agent declared down (their keys expired)
	LivenessRejoins      uint64 // times this agent found its own key expired, and joined again
}

// agentStats are the agent's own counters; the router keeps the event
// path's.
type agentStats struct {
	chainsCompleted, handlersTimedOut           atomic.Uint64
	natsDisconnects, natsReconnects, natsErrors atomic.Uint64
}

// Stats returns a snapshot of the agent's counters. It is cheap and safe
// to call at any time, also before Start and after Shutdown.
func (a *Agent) Stats() Stats {
	a.mu.Lock()
	s := Stats{ClientsRegistered: len(a.expected), Connections: len(a.conns)}
	a.mu.Unlock()
	s.ClientsAttached = len(a.recipients())
	s.ChainsCompleted = a.stats.chainsCompleted.Load()
	s.HandlersTimedOut = a.stats.handlersTimedOut.Load()
	if a.outcomes != nil {
		s.OutcomesDropped, s.OutcomesPublished, s.OutcomesUnheard = a.outcomes.Stats()
	}
	s.CacheEvictions = a.evicted.Load()
	s.NATSDisconnects = a.stats.natsDisconnects.Load()
	s.NATSReconnects = a.stats.natsReconnects.Load()
	s.NATSErrors = a.stats.natsErrors.Load()
	if a.nc != nil {
		s.NATSConnected = a.nc.IsConnected()
	}
	if a.link != nil {
		ls := a.link.Stats()
		s.GlobalLinkDown, s.GlobalLinkWatched = ls.Down, ls.Watched
	}
	ls := a.LivenessStats()
	s.LivenessBeats, s.LivenessBeatFailures = ls.Beats, ls.BeatFailures
	s.NodesDeclaredDown, s.LivenessRejoins = ls.Declared, ls.Rejoined
	if r := a.router; r != nil {
		rs := r.Stats()
		s.EventsPublished, s.EventsReceived, s.EventsMalformed = rs.Published, rs.Received, rs.Malformed
		s.ChainsStarted, s.ChainsReplayed, s.EventsRunEarly = rs.Delivered, rs.Replayed, rs.Early
		for _, rc := range a.recipients() {
			s.ChainsWaiting += rc.Window().Waiting()
		}
		s.RegistrationsHeld = rs.Held
		s.EventsDropped, s.JobEventsDropped = rs.JobDropped+rs.EnvDropped+rs.CopiesDropped, rs.JobDropped
		s.CachedEventsDropped, s.CachedEventsFetched, s.CachedEventsLost = rs.CopiesDropped, rs.Fetched, rs.Lost
		s.Subscriptions = rs.Subscriptions
	}
	return s
}

// countOutcome counts a chain that ended.
func (a *Agent) countOutcome(o *bus.Outcome) {
	a.stats.chainsCompleted.Add(1)
	for _, r := range o.Ran {
		if r.TimedOut {
			a.stats.handlersTimedOut.Add(1)
		}
	}
}

// watchNATS reports the connection's health to the agent's logger and
// counters: asynchronous errors (a slow consumer dropping events among
// them) at warn, disconnects at warn, reconnects at info. Handlers a
// caller-provided connection already had still run.
func (a *Agent) watchNATS(nc *nats.Conn) {
	prevErr, prevDisc, prevRec := nc.Opts.AsyncErrorCB, nc.Opts.DisconnectedErrCB, nc.Opts.ReconnectedCB
	if a.ownNC {
		prevErr = nil // nats.go's default, which prints every error to stderr
	}
	nc.SetErrorHandler(func(c *nats.Conn, sub *nats.Subscription, err error) {
		a.stats.natsErrors.Add(1)
		switch {
		case errors.Is(err, nats.ErrSlowConsumer) && a.composed.Load():
			// Once per subscription each time its messages start being
			// dropped, which under a flood can be every few messages: the
			// router logs once per burst, and recovers job events.
			a.router.SlowConsumer(sub)
		case errors.Is(err, nats.ErrSlowConsumer):
		default:
			a.log.Warn("NATS error", "err", err)
		}
		if prevErr != nil {
			prevErr(c, sub, err)
		}
	})
	nc.SetDisconnectErrHandler(func(c *nats.Conn, err error) {
		a.stats.natsDisconnects.Add(1)
		if !a.isClosed() {
			a.log.Warn("NATS connection lost; reconnecting", "err", err)
		}
		if prevDisc != nil {
			prevDisc(c, err)
		}
	})
	nc.SetReconnectHandler(func(c *nats.Conn) {
		a.stats.natsReconnects.Add(1)
		a.log.Info("NATS connection back", "url", c.ConnectedUrl())
		if a.composed.Load() {
			a.router.CheckTail()     // copies sent while it was away
			a.coll.svc.Reconnected() // releases published while it was away
		}
		if prevRec != nil {
			prevRec(c)
		}
	})
}
