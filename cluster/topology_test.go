package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
)

// TestTopDomain: from any server of a topology, the top's domain — the
// hub's whatever its name, a lone server's or routed cluster's own — and
// none once the hub is gone, until it is back.
func TestTopDomain(t *testing.T) {
	topOf := func(url string) (string, error) {
		return cluster.TopDomain(t.Context(), clustertest.Connect(t, url))
	}
	lone := clustertest.StartServer(t, "solo")
	if d, err := topOf(lone.ClientURL()); d != "solo" || err != nil {
		t.Errorf("lone server: %q, %v", d, err)
	}
	for _, s := range clustertest.StartCluster(t, "routed", 3).Servers() {
		if d, err := topOf(s.ClientURL()); d != "routed" || err != nil {
			t.Errorf("routed cluster through %s: %q, %v", s.Name(), d, err)
		}
	}

	cfg := cluster.DefaultMultiClusterConfig(t.TempDir(), cluster.ClusterSpec{ID: "A", Servers: 1}, cluster.ClusterSpec{ID: "B", Servers: 2})
	cfg.HubDomain = "central"
	cfg.LeafReconnectInterval = clustertest.LeafReconnectInterval
	mc, err := cluster.StartMultiCluster(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	clustertest.ShutdownAtCleanup(t, "multi-cluster", mc.Shutdown)
	urls := []string{mc.HubURL(), mc.Cluster("A").URL(), mc.Cluster("B").Server(0).ClientURL(), mc.Cluster("B").Server(1).ClientURL()}
	for _, url := range urls {
		if d, err := topOf(url); d != "central" || err != nil {
			t.Errorf("through %s: %q, %v", url, d, err)
		}
	}

	nc := clustertest.Connect(t, mc.Cluster("A").URL())
	if err := mc.ShutdownHub(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A request may still cross the link before A sees it gone, and wait.
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if d, err := cluster.TopDomain(ctx, nc); !errors.Is(err, cluster.ErrNoTop) {
		t.Errorf("without the hub: %q, %v", d, err)
	}
	if err := mc.RestartHub(t.Context()); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 10*time.Second, func() error {
		_, err := cluster.TopDomain(t.Context(), nc)
		return err
	})
}
