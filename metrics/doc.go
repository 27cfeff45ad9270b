// Package metrics exports pmixbus's health in the Prometheus text format:
// an agent's counters (agent.Stats) and an embedded NATS server's state
// (connections, messages, slow consumers, JetStream use). docs/metrics.md
// lists every metric.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(metrics.Agent(a, "east", "node07"))
//	ep, err := metrics.Serve("127.0.0.1:9464", reg) // GET /metrics
//	defer ep.Close(ctx)
//
// Collectors read their source on each scrape and are safe for concurrent
// use.
package metrics
