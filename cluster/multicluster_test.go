package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
)

// TestMultiCluster runs three clusters, one of three servers, over leaf links
// to a hub, through the life of the topology: traffic across clusters, one
// JetStream domain per cluster, the hub going away and coming back. The
// steps run in order on the same topology.
func TestMultiCluster(t *testing.T) {
	mc := clustertest.StartMultiCluster(t,
		cluster.ClusterSpec{ID: "A", Servers: 1},
		cluster.ClusterSpec{ID: "B", Servers: 3},
		cluster.ClusterSpec{ID: "C", Servers: 1},
	)
	ctx := t.Context()

	var ids []string
	for _, c := range mc.Clusters() {
		ids = append(ids, string(c.ID()))
		if c.Domain() != string(c.ID()) {
			t.Errorf("cluster %s has domain %q", c.ID(), c.Domain())
		}
	}
	if strings.Join(ids, ",") != "A,B,C" || mc.Cluster("D") != nil {
		t.Fatalf("clusters %v, Cluster(D) = %v", ids, mc.Cluster("D"))
	}
	if mc.HubDomain() != cluster.DefaultHubDomain || mc.HubURL() != mc.Hub().ClientURL() || mc.Hub().LeafURL() == "" {
		t.Fatalf("hub domain %q URL %q leaf %q", mc.HubDomain(), mc.HubURL(), mc.Hub().LeafURL())
	}

	ncA := clustertest.Connect(t, mc.Cluster("A").URL())
	ncC := clustertest.Connect(t, mc.Cluster("C").URL())
	kvA, err := newJS(t, ncA, "").CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "lookup"})
	if err != nil {
		t.Fatal(err)
	}
	kvAFromC, err := newJS(t, ncC, "A").CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "lookup"})
	if err != nil {
		t.Fatalf("bind A's bucket from C: %v", err)
	}

	t.Run("publish in A reaches C", func(t *testing.T) {
		expectDelivery(t, ncA, ncC, "pmix.evt.global.1")
	})

	t.Run("one copy per subscriber in a cluster linked through every server", func(t *testing.T) {
		const subject, n = "pmix.evt.B.rm.2", 10
		var subs []*nats.Subscription
		for _, s := range mc.Cluster("B").Servers() {
			nc := clustertest.Connect(t, s.ClientURL())
			sub, err := nc.SubscribeSync(subject)
			if err != nil {
				t.Fatal(err)
			}
			subs = append(subs, sub)
		}
		// Wait until every subscriber's interest has reached A.
		clustertest.WaitFor(t, 5*time.Second, func() error {
			if err := ncA.Publish(subject, []byte("warm-up")); err != nil {
				return err
			}
			for _, sub := range subs {
				if _, err := sub.NextMsg(50 * time.Millisecond); err != nil {
					return err
				}
			}
			return nil
		})
		for i := range n {
			if err := ncA.Publish(subject, fmt.Appendf(nil, "msg-%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := ncA.Publish(subject, []byte("end")); err != nil {
			t.Fatal(err)
		}
		for i, sub := range subs {
			seen := map[string]int{}
			for {
				m, err := sub.NextMsg(5 * time.Second)
				if err != nil {
					t.Fatalf("subscriber on B-%d: %v", i, err)
				}
				if string(m.Data) == "end" {
					break
				}
				seen[string(m.Data)]++
			}
			for k := range n {
				if got := seen[fmt.Sprintf("msg-%d", k)]; got != 1 {
					t.Errorf("subscriber on B-%d got msg-%d %d times", i, k, got)
				}
			}
		}
	})

	t.Run("KV in A's domain is read from C", func(t *testing.T) {
		if _, err := kvA.PutString(ctx, "svc", "from-A"); err != nil {
			t.Fatal(err)
		}
		e, err := kvAFromC.Get(ctx, "svc")
		if err != nil || string(e.Value()) != "from-A" {
			t.Fatalf("Get from C = %v, %v", e, err)
		}
	})

	t.Run("domains are separate", func(t *testing.T) {
		// Without a domain, C's clients reach C's own JetStream.
		jsC := newJS(t, ncC, "")
		if _, err := jsC.KeyValue(ctx, "lookup"); !errors.Is(err, jetstream.ErrBucketNotFound) {
			t.Fatalf("C's own JetStream: KeyValue(lookup) = %v, want ErrBucketNotFound", err)
		}
		kvC, err := jsC.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "lookup"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kvC.PutString(ctx, "svc", "from-C"); err != nil {
			t.Fatal(err)
		}
		if e, err := kvA.Get(ctx, "svc"); err != nil || string(e.Value()) != "from-A" {
			t.Fatalf("A's value after C wrote its own = %v, %v", e, err)
		}
	})

	t.Run("hub down: each cluster goes on alone", func(t *testing.T) {
		if err := mc.ShutdownHub(ctx); err != nil {
			t.Fatal(err)
		}
		if err := mc.ShutdownHub(ctx); err != nil {
			t.Fatalf("second ShutdownHub: %v", err)
		}
		for _, s := range mc.Cluster("A").Servers() {
			clustertest.WaitFor(t, 5*time.Second, func() error {
				if n := s.NATS().NumLeafNodes(); n != 0 {
					return fmt.Errorf("%s still has %d leaf links", s.Name(), n)
				}
				return nil
			})
		}
		// Core NATS and JetStream inside A.
		expectDelivery(t, ncA, clustertest.Connect(t, mc.Cluster("A").URL()), "pmix.evt.A.rm.3")
		if _, err := kvA.PutString(ctx, "svc", "while-alone"); err != nil {
			t.Fatalf("KV put in A without hub: %v", err)
		}
		if e, err := kvA.Get(ctx, "svc"); err != nil || string(e.Value()) != "while-alone" {
			t.Fatalf("KV get in A without hub = %v, %v", e, err)
		}
		if _, err := newJS(t, ncA, "").CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "created-alone"}); err != nil {
			t.Fatalf("create bucket in A without hub: %v", err)
		}
		// And inside the three-server cluster B.
		ncB := clustertest.Connect(t, mc.Cluster("B").URL())
		if _, err := newJS(t, ncB, "").CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b-alone", Replicas: 3}); err != nil {
			t.Fatalf("create bucket in B without hub: %v", err)
		}
		// Nothing crosses.
		sub, err := ncC.SubscribeSync("pmix.evt.global.4")
		if err != nil {
			t.Fatal(err)
		}
		if err := ncA.Publish("pmix.evt.global.4", nil); err != nil {
			t.Fatal(err)
		}
		if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
			t.Fatalf("C received %q with the hub down", m.Subject)
		}
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		if _, err := kvAFromC.Get(short, "svc"); err == nil {
			t.Fatal("C read A's bucket with the hub down")
		}
	})

	t.Run("hub back: links return", func(t *testing.T) {
		url := mc.HubURL()
		if err := mc.RestartHub(ctx); err != nil {
			t.Fatal(err)
		}
		if mc.HubURL() != url {
			t.Fatalf("hub restarted on %s, was %s", mc.HubURL(), url)
		}
		expectDelivery(t, ncA, ncC, "pmix.evt.global.5")
		e, err := kvAFromC.Get(ctx, "svc")
		if err != nil || string(e.Value()) != "while-alone" {
			t.Fatalf("Get from C after the hub returned = %v, %v", e, err)
		}
	})
}

// TestMultiClusterOneCluster checks the smallest topology, one cluster and
// the hub, and that the hub's own domain answers too.
func TestMultiClusterOneCluster(t *testing.T) {
	mc := clustertest.StartMultiCluster(t, cluster.ClusterSpec{ID: "solo", Servers: 1})
	hub := clustertest.Connect(t, mc.HubURL())
	solo := clustertest.Connect(t, mc.Cluster("solo").URL())
	expectDelivery(t, hub, solo, "x")
	for _, domain := range []string{"solo", "hub"} {
		if _, err := newJS(t, solo, domain).AccountInfo(t.Context()); err != nil {
			t.Errorf("domain %s from solo: %v", domain, err)
		}
	}
}

func TestMultiClusterClosed(t *testing.T) {
	cfg := cluster.DefaultMultiClusterConfig(t.TempDir(), cluster.ClusterSpec{ID: "A", Servers: 1})
	mc, err := cluster.StartMultiCluster(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if err := mc.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
	wg.Wait()
	if err := mc.RestartHub(t.Context()); !errors.Is(err, cluster.ErrClosed) {
		t.Fatalf("RestartHub after Shutdown = %v, want ErrClosed", err)
	}
	if err := mc.WaitLinked(t.Context()); !errors.Is(err, cluster.ErrClosed) {
		t.Fatalf("WaitLinked after Shutdown = %v, want ErrClosed", err)
	}
}

// expectDelivery waits until a message published on from reaches a
// subscriber on to.
func expectDelivery(t *testing.T, from, to *nats.Conn, subject string) {
	t.Helper()
	sub, err := to.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	clustertest.WaitFor(t, 5*time.Second, func() error {
		if err := from.Publish(subject, []byte("ping")); err != nil {
			return err
		}
		_, err := sub.NextMsg(100 * time.Millisecond)
		return err
	})
}

// TestCutLinks cuts one cluster's leaf links: it and the others go on
// alone (the others still reach each other), and its links return with
// RestoreLinks.
func TestCutLinks(t *testing.T) {
	mc := clustertest.StartMultiCluster(t,
		cluster.ClusterSpec{ID: "A", Servers: 1},
		cluster.ClusterSpec{ID: "B", Servers: 2},
	)
	hub := clustertest.Connect(t, mc.HubURL())
	a := clustertest.Connect(t, mc.Cluster("A").URL())
	b := clustertest.Connect(t, mc.Cluster("B").URL())
	if err := mc.CutLinks("B"); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 5*time.Second, func() error {
		if n := mc.Hub().NATS().NumLeafNodes(); n != 1 {
			return fmt.Errorf("hub has %d leaf links, want A's alone", n)
		}
		return nil
	})
	expectDelivery(t, hub, a, "still.linked")
	if _, err := b.Request("_PMIXBUS.top.API.INFO", nil, 200*time.Millisecond); err == nil {
		t.Fatal("B still reaches the top of the topology")
	}
	if err := mc.RestoreLinks(t.Context(), "B"); err != nil {
		t.Fatal(err)
	}
	expectDelivery(t, a, b, "linked.again")
	if err := mc.CutLinks("C"); !errors.Is(err, cluster.ErrInvalidID) {
		t.Fatalf("CutLinks of no cluster = %v, want ErrInvalidID", err)
	}
}
