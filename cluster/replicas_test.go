package cluster_test

import (
	"testing"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
)

// TestDefaultReplicas: one copy on a server without routes, three on a
// routed cluster of three, whichever server the connection was given.
func TestDefaultReplicas(t *testing.T) {
	for _, tt := range []struct{ servers, want int }{{1, 1}, {3, 3}} {
		c := clustertest.StartCluster(t, "A", tt.servers)
		for _, s := range c.Servers() {
			if got := cluster.DefaultReplicas(clustertest.Connect(t, s.ClientURL())); got != tt.want {
				t.Errorf("%d servers, connected to %s: %d replicas, want %d", tt.servers, s.Name(), got, tt.want)
			}
		}
	}
}
