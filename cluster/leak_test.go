package cluster_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
)

// TestShutdownLeavesNoGoroutines starts each shape, uses it, shuts it down
// twice and checks that the goroutine count returns to where it was.
func TestShutdownLeavesNoGoroutines(t *testing.T) {
	tests := []struct {
		name  string
		start func(t *testing.T, dir string) (url string, shutdown func(context.Context) error)
	}{
		{name: "server", start: func(t *testing.T, dir string) (string, func(context.Context) error) {
			s, err := cluster.StartServer(t.Context(), cluster.DefaultConfig("A", dir))
			if err != nil {
				t.Fatal(err)
			}
			return s.ClientURL(), s.Shutdown
		}},
		{name: "cluster", start: func(t *testing.T, dir string) (string, func(context.Context) error) {
			c, err := cluster.StartCluster(t.Context(), cluster.DefaultClusterConfig("A", 3, dir))
			if err != nil {
				t.Fatal(err)
			}
			return c.URL(), c.Shutdown
		}},
		{name: "multi-cluster", start: func(t *testing.T, dir string) (string, func(context.Context) error) {
			cfg := cluster.DefaultMultiClusterConfig(dir,
				cluster.ClusterSpec{ID: "A", Servers: 1},
				cluster.ClusterSpec{ID: "B", Servers: 2})
			m, err := cluster.StartMultiCluster(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.ShutdownHub(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := m.RestartHub(t.Context()); err != nil {
				t.Fatal(err)
			}
			return m.Cluster("B").URL(), m.Shutdown
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			clustertest.CheckGoroutines(t)
			url, shutdown := tt.start(t, dir)

			nc := clustertest.Connect(t, url)
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "b"}); err != nil {
				t.Fatal(err)
			}
			nc.Close()

			for range 2 {
				if err := shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
