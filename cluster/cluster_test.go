package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
)

func TestStartCluster(t *testing.T) {
	tests := []struct {
		servers   int
		wantNames []string
	}{
		{servers: 1, wantNames: []string{"A"}},
		{servers: 3, wantNames: []string{"A-0", "A-1", "A-2"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.servers), func(t *testing.T) {
			c := clustertest.StartCluster(t, "A", tt.servers)
			ctx := t.Context()
			if c.ID() != "A" || c.Domain() != "A" {
				t.Fatalf("ID %q Domain %q", c.ID(), c.Domain())
			}
			var names []string
			for _, s := range c.Servers() {
				names = append(names, s.Name())
				if got := s.RouteURL() != ""; got != (tt.servers > 1) {
					t.Errorf("%s: RouteURL() = %q", s.Name(), s.RouteURL())
				}
			}
			if strings.Join(names, ",") != strings.Join(tt.wantNames, ",") {
				t.Fatalf("servers %v, want %v", names, tt.wantNames)
			}
			if got := len(strings.Split(c.URL(), ",")); got != tt.servers {
				t.Fatalf("URL() = %q", c.URL())
			}
			// Routes are up between every pair.
			for _, s := range c.Servers() {
				if tt.servers > 1 && s.NATS().NumRoutes() < tt.servers-1 {
					t.Errorf("%s has %d routes", s.Name(), s.NATS().NumRoutes())
				}
			}

			// A replicated bucket written through the first server is read
			// through the last one.
			first := clustertest.Connect(t, c.Server(0).ClientURL())
			last := clustertest.Connect(t, c.Server(tt.servers-1).ClientURL())
			kv, err := newJS(t, first, "A").CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", Replicas: tt.servers})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kv.PutString(ctx, "k", "v"); err != nil {
				t.Fatal(err)
			}
			kvLast, err := newJS(t, last, "").KeyValue(ctx, "b")
			if err != nil {
				t.Fatal(err)
			}
			if e, err := kvLast.Get(ctx, "k"); err != nil || string(e.Value()) != "v" {
				t.Fatalf("Get via last server = %v, %v", e, err)
			}
		})
	}
}

// TestClusterMemberFault takes one member of a three-server cluster down and
// brings it back: JetStream keeps its quorum meanwhile, and the member
// rejoins on its old ports.
func TestClusterMemberFault(t *testing.T) {
	c := clustertest.StartCluster(t, "A", 3)
	ctx := t.Context()
	nc := clustertest.Connect(t, c.Server(0).ClientURL())
	kv, err := newJS(t, nc, "A").CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}

	victim := c.Server(2)
	url := victim.ClientURL()
	if err := victim.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 10*time.Second, func() error {
		_, err := kv.PutString(ctx, "k", "during")
		return err
	})

	if err := victim.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if victim.ClientURL() != url {
		t.Fatalf("restarted on %s, was %s", victim.ClientURL(), url)
	}
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	back := clustertest.Connect(t, url)
	kvBack, err := newJS(t, back, "A").KeyValue(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 10*time.Second, func() error {
		e, err := kvBack.Get(ctx, "k")
		if err != nil {
			return err
		}
		if string(e.Value()) != "during" {
			return fmt.Errorf("value %q", e.Value())
		}
		return nil
	})
}

func TestStartClusterInvalid(t *testing.T) {
	_, err := cluster.StartCluster(context.Background(), cluster.DefaultClusterConfig("A", 0, t.TempDir()))
	if err == nil || !strings.Contains(err.Error(), "Servers: 0") {
		t.Fatalf("StartCluster with no servers = %v", err)
	}
}
