package cluster_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

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
		clustertest.Refused(t, url)
	}

	// Would-be leaves of the hub, each wrong in one way: each logs its
	// link failing, and has no link then.
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
		{"without LeafTLS (the system's roots only)", func(c *cluster.Config) { c.LeafTLS = nil }},
		{"trusting another CA", func(c *cluster.Config) { c.LeafTLS = &plain }},
		{"without a key", func(c *cluster.Config) { c.Auth = nil }},
		{"with another set of keys", func(c *cluster.Config) { c.Auth = otherAuth }},
		{"with the agent key", func(c *cluster.Config) { c.Auth = &agentAsLeaf }},
	}
	for i, r := range rogues {
		sc := cluster.DefaultConfig(cluster.ID(fmt.Sprintf("R%d", i)), t.TempDir())
		sc.LeafRemotes = []string{mc.Hub().LeafURL()}
		sc.LeafReconnectInterval = clustertest.LeafReconnectInterval
		sc.Auth = auth
		sc.LeafTLS = tlsFiles
		log := &errorLog{}
		sc.Logger = slog.New(log)
		r.mod(&sc)
		s, err := cluster.StartServer(ctx, sc)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
		clustertest.WaitFor(t, 10*time.Second, func() error {
			if log.leafFailures() < 2 {
				return fmt.Errorf("a leaf %s has not failed to link twice", r.name)
			}
			return nil
		})
		if n := s.NATS().NumLeafNodes(); n != 0 {
			t.Errorf("a leaf %s linked", r.name)
		}
		t.Logf("a leaf %s: %s", r.name, log.first())
	}
	// A leaf that trusts the hub but shows no certificate of its own: the
	// hub ends the handshake (a nats-server leaf would then wait, linked
	// to nothing, for the hub's first message).
	if err := tlsWithoutCertificate(t, mc.Hub().LeafURL(), tlsFiles.CA); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("the hub took a TLS leaf without a certificate: %v", err)
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

// errorLog is a slog.Handler that keeps the error records of a server's
// log.
type errorLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *errorLog) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelError }

func (l *errorLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}

func (l *errorLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *errorLog) WithGroup(string) slog.Handler      { return l }

// leafFailures counts the errors of a leaf link: a refused sign-in or TLS
// handshake.
func (l *errorLog) leafFailures() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(strings.ToLower(m), "leafnode") {
			n++
		}
	}
	return n
}

func (l *errorLog) first() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.msgs) == 0 {
		return ""
	}
	return l.msgs[0]
}

// tlsWithoutCertificate opens a leaf connection to url as nats-server
// does — the hub's INFO in the clear, then TLS — trusting the hub's CA but
// showing no certificate, and returns the error of the first read after
// the handshake.
func tlsWithoutCertificate(t *testing.T, url, caFile string) error {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "nats-leaf://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if info, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.HasPrefix(info, "INFO ") {
		t.Fatalf("the hub's first line: %q, %v", info, err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tc := tls.Client(conn, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err := tc.Handshake(); err != nil {
		return err
	}
	_, err = tc.Read(make([]byte, 1))
	return err
}
