package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pmixbus/pmixbus/agent"
)

// StatsSource is what the agent collector reads: *agent.Agent is one.
type StatsSource interface {
	Stats() agent.Stats
}

// metric is one exported value of a snapshot.
type metric[S any] struct {
	desc  *prometheus.Desc
	typ   prometheus.ValueType
	value func(S) float64
}

func newMetric[S any](name, help string, typ prometheus.ValueType, labels prometheus.Labels, value func(S) float64) metric[S] {
	return metric[S]{desc: prometheus.NewDesc(name, help, nil, labels), typ: typ, value: value}
}

// snapshotCollector exports the metrics of one snapshot per scrape.
type snapshotCollector[S any] struct {
	snapshot func() (S, bool)
	metrics  []metric[S]
}

func (c *snapshotCollector[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics {
		ch <- m.desc
	}
}

func (c *snapshotCollector[S]) Collect(ch chan<- prometheus.Metric) {
	s, ok := c.snapshot()
	if !ok {
		return
	}
	for _, m := range c.metrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.typ, m.value(s))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Agent returns a collector of an agent's Stats, labelled with its
// cluster and node.
func Agent(a StatsSource, cluster, node string) prometheus.Collector {
	l := prometheus.Labels{"cluster": cluster, "node": node}
	g, c := prometheus.GaugeValue, prometheus.CounterValue
	m := func(name, help string, typ prometheus.ValueType, v func(agent.Stats) float64) metric[agent.Stats] {
		return newMetric("pmixbus_agent_"+name, help, typ, l, v)
	}
	return &snapshotCollector[agent.Stats]{
		snapshot: func() (agent.Stats, bool) { return a.Stats(), true },
		metrics: []metric[agent.Stats]{
			m("clients_registered", "Clients the host registered, attached or not.", g, func(s agent.Stats) float64 { return float64(s.ClientsRegistered) }),
			m("clients_attached", "Clients attached to the agent.", g, func(s agent.Stats) float64 { return float64(s.ClientsAttached) }),
			m("connections", "Open client sockets, attached or still in their hello.", g, func(s agent.Stats) float64 { return float64(s.Connections) }),
			m("subscriptions", "NATS subscriptions the clients' registrations need.", g, func(s agent.Stats) float64 { return float64(s.Subscriptions) }),
			m("events_published_total", "Events the agent sent on NATS for its clients and host.", c, func(s agent.Stats) float64 { return float64(s.EventsPublished) }),
			m("events_received_total", "Events that arrived on the agent's subscriptions.", c, func(s agent.Stats) float64 { return float64(s.EventsReceived) }),
			m("events_malformed_total", "Events that arrived but could not be decoded.", c, func(s agent.Stats) float64 { return float64(s.EventsMalformed) }),
			m("events_dropped_total", "Events NATS dropped because the agent's inbox was full (slow consumer).", c, func(s agent.Stats) float64 { return float64(s.EventsDropped) }),
			m("job_events_dropped_total", "Transient job events (PMIX_EVENT_DO_NOT_CACHE) among events_dropped_total: no cache holds them.", c, func(s agent.Stats) float64 { return float64(s.JobEventsDropped) }),
			m("cached_events_dropped_total", "Cached events among events_dropped_total; the agent fetches them from the event cache.", c, func(s agent.Stats) float64 { return float64(s.CachedEventsDropped) }),
			m("cached_events_fetched_total", "Cached events the agent fetched from the event cache for gaps in the stream's sequence.", c, func(s agent.Stats) float64 { return float64(s.CachedEventsFetched) }),
			m("cached_events_lost_total", "Cached events the agent did not receive and the event cache no longer held.", c, func(s agent.Stats) float64 { return float64(s.CachedEventsLost) }),
			m("events_run_early_total", "LOCAL events of local clients whose chains ran before their copies came from the events stream.", c, func(s agent.Stats) float64 { return float64(s.EventsRunEarly) }),
			m("chains_started_total", "Live deliveries to a local client's handler chain.", c, func(s agent.Stats) float64 { return float64(s.ChainsStarted) }),
			m("chains_replayed_total", "Cached events replayed to new registrations.", c, func(s agent.Stats) float64 { return float64(s.ChainsReplayed) }),
			m("chains_waiting", "Live deliveries waiting for room in their client's window of chains in flight.", g, func(s agent.Stats) float64 { return float64(s.ChainsWaiting) }),
			m("chains_completed_total", "Handler chains that ended.", c, func(s agent.Stats) float64 { return float64(s.ChainsCompleted) }),
			m("handlers_timed_out_total", "Handlers passed over for not completing within their timeout.", c, func(s agent.Stats) float64 { return float64(s.HandlersTimedOut) }),
			m("outcomes_dropped_total", "Outcome reports not published because NATS was not keeping up.", c, func(s agent.Stats) float64 { return float64(s.OutcomesDropped) }),
			m("outcomes_published_total", "Outcome reports published on NATS (only while someone subscribes to them).", c, func(s agent.Stats) float64 { return float64(s.OutcomesPublished) }),
			m("outcomes_unheard_total", "Outcome reports not published because nobody subscribed to them.", c, func(s agent.Stats) float64 { return float64(s.OutcomesUnheard) }),
			m("cache_evictions_total", "Events the cluster's event cache discarded for its limits.", c, func(s agent.Stats) float64 { return float64(s.CacheEvictions) }),
			m("nats_connected", "1 while the agent's NATS connection is up.", g, func(s agent.Stats) float64 { return b2f(s.NATSConnected) }),
			m("nats_disconnects_total", "Times the agent lost its NATS connection.", c, func(s agent.Stats) float64 { return float64(s.NATSDisconnects) }),
			m("nats_reconnects_total", "Times the agent's NATS connection came back.", c, func(s agent.Stats) float64 { return float64(s.NATSReconnects) }),
			m("nats_errors_total", "Asynchronous errors NATS reported to the agent (slow consumers among them).", c, func(s agent.Stats) float64 { return float64(s.NATSErrors) }),
			m("liveness_beats_total", "Refreshes of the agent's liveness key.", c, func(s agent.Stats) float64 { return float64(s.LivenessBeats) }),
			m("liveness_beat_failures_total", "Refreshes of the agent's liveness key that failed.", c, func(s agent.Stats) float64 { return float64(s.LivenessBeatFailures) }),
			m("liveness_rejoins_total", "Times the agent found its own liveness key expired (the cluster had declared its node down) and joined again.", c, func(s agent.Stats) float64 { return float64(s.LivenessRejoins) }),
			m("nodes_declared_down_total", "Nodes of the cluster this agent declared down: their liveness keys expired.", c, func(s agent.Stats) float64 { return float64(s.NodesDeclaredDown) }),
		},
	}
}
