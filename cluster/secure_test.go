package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/security"
)

// TestSecuredMultiCluster runs clusters joined to a hub over leaf links on
// mutual TLS, every server accepting only the keys of pmixbus's roles:
// agents' traffic and JetStream cross as without security, while a leaf
// without TLS, with a CA that did not sign the hub, without the leaf key
// or with another role's key never links, and nothing signs in without a
// key.
func TestSecuredMultiCluster(t *testing.T) {
	keyDir := t.TempDir()
	keys, err := security.EnsureKeys(keyDir)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := keys.ServerAuth()
	if err != nil {
		t.Fatal(err)
	}
	tlsFiles := clustertest.LeafTLS(t)
	tlsFiles.Verify = true
	cfg := cluster.DefaultMultiClusterConfig(t.TempDir(),
		cluster.ClusterSpec{ID: "A", Servers: 1},
		cluster.ClusterSpec{ID: "B", Servers: 2})
	cfg.Auth = auth
	cfg.LeafTLS = tlsFiles
	cfg.LeafReconnectInterval = clustertest.LeafReconnectInterval
	cfg.Logger = clustertest.Logger(t)
	mc, err := cluster.StartMultiCluster(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.Shutdown(context.Background()) })
	ctx := t.Context()

	asAgent := keys.Option(security.RoleAgent)
	a := clustertest.Connect(t, mc.Cluster("A").URL(), asAgent)
	b := clustertest.Connect(t, mc.Cluster("B").Server(1).ClientURL(), asAgent)
	expectDelivery(t, a, b, "pmix.evt.global.1")
	expectDelivery(t, b, a, "pmix.evt.B.ns.job.1")
	kv, err := newJS(t, b, "A").CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "PMIXBUS_PUBLISH"})
	if err != nil {
		t.Fatalf("A's bucket from B: %v", err)
	}
	if _, err := kv.PutString(ctx, "g.k", "v"); err != nil {
		t.Fatal(err)
	}
	if d, err := cluster.TopDomain(ctx, b); d != cluster.DefaultHubDomain || err != nil {
		t.Errorf("TopDomain from B = %q, %v", d, err)
	}
	// A watcher in B sees A's events, and cannot read A's bucket.
	var v clustertest.Violations
	watch := clustertest.Connect(t, mc.Cluster("B").URL(), keys.Option(security.RoleWatch), v.Option())
	expectDelivery(t, a, watch, "pmix.evt.global.2")
	if err := watch.PublishRequest("$JS.A.API.DIRECT.GET.KV_PMIXBUS_PUBLISH", watch.NewRespInbox(), []byte(`{"last_by_subj":"$KV.PMIXBUS_PUBLISH.g.k"}`)); err != nil {
		t.Fatal(err)
	}
	v.Fence(t, watch)
	if !v.Has(clustertest.Publish("$JS.A.API.DIRECT.GET.KV_PMIXBUS_PUBLISH")) {
		t.Errorf("watch read A's bucket from B; violations %v", v.All())
	}

	for _, url := range []string{mc.HubURL(), mc.Cluster("A").URL(), mc.Cluster("B").Server(0).ClientURL()} {
		if nc, err := nats.Connect(url, nats.NoReconnect()); !errors.Is(err, nats.ErrAuthorization) {
			if nc != nil {
				nc.Close()
			}
			t.Errorf("%s without a key: %v", url, err)
		}
	}

	// Would-be leaves of the hub, each wrong in one way. They start at
	// once and are given the same time to link, which none may use.
	plain := *tlsFiles
	plain.CA = clustertest.OtherCA(t)
	otherKeys, err := security.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	otherAuth, err := otherKeys.ServerAuth()
	if err != nil {
		t.Fatal(err)
	}
	agentAsLeaf := *auth
	agentAsLeaf.LeafSeed = seedIn(t, security.KeyFile(keyDir, security.RoleAgent))
	rogues := []struct {
		name string
		mod  func(*cluster.Config)
	}{
		{"without TLS", func(c *cluster.Config) { c.LeafTLS = nil }},
		{"trusting another CA", func(c *cluster.Config) { c.LeafTLS = &plain }},
		{"without a key", func(c *cluster.Config) { c.Auth = nil }},
		{"with another set of keys", func(c *cluster.Config) { c.Auth = otherAuth }},
		{"with the agent key", func(c *cluster.Config) { c.Auth = &agentAsLeaf }},
	}
	var servers []*cluster.Server
	for i, r := range rogues {
		sc := cluster.DefaultConfig(cluster.ID(fmt.Sprintf("R%d", i)), t.TempDir())
		sc.LeafRemotes = []string{mc.Hub().LeafURL()}
		sc.LeafReconnectInterval = clustertest.LeafReconnectInterval
		sc.Auth = auth
		sc.LeafTLS = tlsFiles
		sc.Logger = clustertest.Logger(t)
		r.mod(&sc)
		s, err := cluster.StartServer(ctx, sc)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
		servers = append(servers, s)
	}
	time.Sleep(10 * clustertest.LeafReconnectInterval) // a test of absence: the links get ten tries
	for i, s := range servers {
		if n := s.NATS().NumLeafNodes(); n != 0 {
			t.Errorf("a leaf %s linked", rogues[i].name)
		}
	}
	if n := mc.Hub().NATS().NumLeafNodes(); n != 3 {
		t.Errorf("the hub has %d leaf links, want A's and B's 3", n)
	}
}

// seedIn returns the seed in a key file, as a rogue server that stole it
// would use it.
func seedIn(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	return string(seed)
}
