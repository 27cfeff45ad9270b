package metrics

import (
	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pmixbus/pmixbus/cluster"
)

// Server returns a collector of an embedded NATS server's state, labelled
// with its cluster and server name. A server that is not running exports
// nothing.
func Server(s *cluster.Server) prometheus.Collector {
	l := prometheus.Labels{"cluster": string(s.Cluster()), "server": s.Name()}
	g, c := prometheus.GaugeValue, prometheus.CounterValue
	m := func(name, help string, typ prometheus.ValueType, v func(*server.Varz) float64) metric[*server.Varz] {
		return newMetric("pmixbus_nats_"+name, help, typ, l, v)
	}
	js := func(f func(*server.JetStreamStats) uint64) func(*server.Varz) float64 {
		return func(v *server.Varz) float64 {
			if v.JetStream.Stats == nil {
				return 0
			}
			return float64(f(v.JetStream.Stats))
		}
	}
	return &snapshotCollector[*server.Varz]{
		snapshot: func() (*server.Varz, bool) {
			if !s.Running() {
				return nil, false
			}
			v, err := s.NATS().Varz(nil)
			return v, err == nil
		},
		metrics: []metric[*server.Varz]{
			m("connections", "Client connections open.", g, func(v *server.Varz) float64 { return float64(v.Connections) }),
			m("connections_total", "Client connections ever accepted.", c, func(v *server.Varz) float64 { return float64(v.TotalConnections) }),
			m("routes", "Routes to other servers of the cluster.", g, func(v *server.Varz) float64 { return float64(v.Routes) }),
			m("leafnodes", "Leaf-node links (to a hub, or from other clusters).", g, func(v *server.Varz) float64 { return float64(v.Leafs) }),
			m("subscriptions", "Subscriptions the server holds.", g, func(v *server.Varz) float64 { return float64(v.Subscriptions) }),
			m("in_msgs_total", "Messages received.", c, func(v *server.Varz) float64 { return float64(v.InMsgs) }),
			m("out_msgs_total", "Messages sent.", c, func(v *server.Varz) float64 { return float64(v.OutMsgs) }),
			m("in_bytes_total", "Bytes received.", c, func(v *server.Varz) float64 { return float64(v.InBytes) }),
			m("out_bytes_total", "Bytes sent.", c, func(v *server.Varz) float64 { return float64(v.OutBytes) }),
			m("slow_consumers_total", "Connections the server found too slow to keep up.", c, func(v *server.Varz) float64 { return float64(v.SlowConsumers) }),
			m("jetstream_memory_bytes", "JetStream memory storage in use.", g, js(func(s *server.JetStreamStats) uint64 { return s.Memory })),
			m("jetstream_storage_bytes", "JetStream file storage in use.", g, js(func(s *server.JetStreamStats) uint64 { return s.Store })),
			m("jetstream_api_requests_total", "JetStream API requests served.", c, js(func(s *server.JetStreamStats) uint64 { return s.API.Total })),
			m("jetstream_api_errors_total", "JetStream API requests that failed.", c, js(func(s *server.JetStreamStats) uint64 { return s.API.Errors })),
		},
	}
}
