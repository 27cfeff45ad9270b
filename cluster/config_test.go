package cluster_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/pmixbus/pmixbus/cluster"
)

// userKey returns the public key of a fresh user nkey.
func userKey(t *testing.T) string {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func TestConfigValidate(t *testing.T) {
	valid := cluster.DefaultConfig("A", "/tmp/store")
	tests := []struct {
		name    string
		mod     func(*cluster.Config)
		wantErr []string // substrings; none means valid
		wantID  bool     // whether the error also wraps ErrInvalidID
	}{
		{name: "default", mod: func(*cluster.Config) {}},
		{name: "full", mod: func(c *cluster.Config) {
			c.Name = "A-0"
			c.Port, c.RoutePort, c.LeafPort, c.MonitorPort = 4222, 6222, 7422, 8222
			c.Routes = []string{"nats-route://10.0.0.1:6222"}
			c.LeafRemotes = []string{"nats-leaf://hub:7422", "nats://hub2:7422"}
		}},
		{name: "empty cluster", mod: func(c *cluster.Config) { c.Cluster = "" }, wantErr: []string{"Cluster:", "empty"}, wantID: true},
		{name: "colon in cluster", mod: func(c *cluster.Config) { c.Cluster = "a:b" }, wantErr: []string{"contains ':'"}, wantID: true},
		{name: "bad name", mod: func(c *cluster.Config) { c.Name = "a b" }, wantErr: []string{"Name:"}, wantID: true},
		{name: "no store", mod: func(c *cluster.Config) { c.StoreDir = " " }, wantErr: []string{"StoreDir"}},
		{name: "port zero", mod: func(c *cluster.Config) { c.Port = 0 }, wantErr: []string{"Port: 0"}},
		{name: "port range", mod: func(c *cluster.Config) { c.Port = 70000 }, wantErr: []string{"Port: 70000 out of range"}},
		{name: "leaf port range", mod: func(c *cluster.Config) { c.LeafPort = -2 }, wantErr: []string{"LeafPort: -2"}},
		{name: "routes without port", mod: func(c *cluster.Config) { c.Routes = []string{"nats-route://h:1"} }, wantErr: []string{"without RoutePort"}},
		{name: "route scheme", mod: func(c *cluster.Config) {
			c.RoutePort = -1
			c.Routes = []string{"http://h:1"}
		}, wantErr: []string{`scheme "http"`}},
		{name: "leaf remote without host", mod: func(c *cluster.Config) { c.LeafRemotes = []string{"nats-leaf://"} }, wantErr: []string{"no host"}},
		{name: "negative durations", mod: func(c *cluster.Config) {
			c.ReadyTimeout = -1
			c.LeafReconnectInterval = -1
		}, wantErr: []string{"ReadyTimeout", "LeafReconnectInterval"}},
		{name: "secured hub", mod: func(c *cluster.Config) {
			c.LeafPort = -1
			c.Auth = &cluster.Auth{Users: []*server.NkeyUser{{Nkey: userKey(t)}}, Client: nats.Name("probe")}
			c.LeafTLS = &cluster.LeafTLS{Cert: "c.pem", Key: "k.pem", CA: "ca.pem", Verify: true}
		}},
		{name: "auth problems", mod: func(c *cluster.Config) {
			c.RoutePort = -1
			c.Routes = []string{"nats-route://h:1"}
			c.Auth = &cluster.Auth{Users: []*server.NkeyUser{{Nkey: "not a key"}}, LeafSeed: "SUnot"}
		}, wantErr: []string{"Auth.Users[0]: not a user nkey", "Auth.LeafSeed", "Auth.Client: nil", "Auth.RoutePassword: empty"}},
		{name: "auth without users", mod: func(c *cluster.Config) { c.Auth = &cluster.Auth{Client: nats.Name("probe")} }, wantErr: []string{"Auth.Users: none"}},
		{name: "leaf TLS problems", mod: func(c *cluster.Config) {
			c.LeafPort = -1
			c.LeafTLS = &cluster.LeafTLS{Key: "k.pem", Verify: true}
		}, wantErr: []string{"Cert and Key go together", "needs Cert and Key", "Verify needs the CA"}},
		{name: "all problems at once", mod: func(c *cluster.Config) {
			c.Cluster = ""
			c.StoreDir = ""
			c.Port = 0
		}, wantErr: []string{"Cluster:", "StoreDir", "Port: 0"}, wantID: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid
			tt.mod(&c)
			checkValidate(t, c.Validate(), tt.wantErr, tt.wantID)
		})
	}
}

func TestClusterConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     cluster.ClusterConfig
		wantErr []string
		wantID  bool
	}{
		{name: "default", cfg: cluster.DefaultClusterConfig("A", 3, "/tmp/x")},
		{name: "no servers", cfg: cluster.DefaultClusterConfig("A", 0, "/tmp/x"), wantErr: []string{"Servers: 0"}},
		{name: "bad id", cfg: cluster.DefaultClusterConfig("A:1", 1, "/tmp/x"), wantErr: []string{"ID:"}, wantID: true},
		{name: "no dir", cfg: cluster.DefaultClusterConfig("A", 1, ""), wantErr: []string{"BaseDir"}},
		{name: "bad remote", cfg: func() cluster.ClusterConfig {
			c := cluster.DefaultClusterConfig("A", 1, "/tmp/x")
			c.LeafRemotes = []string{"ftp://h:1"}
			return c
		}(), wantErr: []string{"LeafRemotes", `scheme "ftp"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkValidate(t, tt.cfg.Validate(), tt.wantErr, tt.wantID)
		})
	}
}

func TestMultiClusterConfigValidate(t *testing.T) {
	a := cluster.ClusterSpec{ID: "A", Servers: 1}
	b := cluster.ClusterSpec{ID: "B", Servers: 3}
	tests := []struct {
		name    string
		cfg     cluster.MultiClusterConfig
		wantErr []string
		wantID  bool
	}{
		{name: "default", cfg: cluster.DefaultMultiClusterConfig("/tmp/x", a, b)},
		{name: "empty hub domain means default", cfg: func() cluster.MultiClusterConfig {
			c := cluster.DefaultMultiClusterConfig("/tmp/x", a)
			c.HubDomain = ""
			return c
		}()},
		{name: "no clusters", cfg: cluster.DefaultMultiClusterConfig("/tmp/x"), wantErr: []string{"Clusters: none"}},
		{name: "duplicate", cfg: cluster.DefaultMultiClusterConfig("/tmp/x", a, b, a), wantErr: []string{`Clusters[2].ID: "A" appears twice`}},
		{name: "hub clash", cfg: cluster.DefaultMultiClusterConfig("/tmp/x", a, cluster.ClusterSpec{ID: "hub", Servers: 1}), wantErr: []string{"hub's domain"}},
		{name: "bad hub domain", cfg: func() cluster.MultiClusterConfig {
			c := cluster.DefaultMultiClusterConfig("/tmp/x", a)
			c.HubDomain = "h.u.b"
			return c
		}(), wantErr: []string{"HubDomain"}, wantID: true},
		{name: "bad spec", cfg: cluster.DefaultMultiClusterConfig("/tmp/x", cluster.ClusterSpec{ID: "", Servers: 0}), wantErr: []string{"Clusters[0].ID", "Clusters[0].Servers: 0"}, wantID: true},
		{name: "no dir", cfg: cluster.DefaultMultiClusterConfig("", a), wantErr: []string{"BaseDir"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkValidate(t, tt.cfg.Validate(), tt.wantErr, tt.wantID)
		})
	}
}

func checkValidate(t *testing.T, err error, wantErr []string, wantID bool) {
	t.Helper()
	if len(wantErr) == 0 {
		if err != nil {
			t.Fatalf("Validate() = %v, want nil", err)
		}
		return
	}
	if !errors.Is(err, cluster.ErrInvalidConfig) {
		t.Fatalf("Validate() = %v, want ErrInvalidConfig", err)
	}
	if got := errors.Is(err, cluster.ErrInvalidID); got != wantID {
		t.Errorf("errors.Is(err, ErrInvalidID) = %v, want %v (err: %v)", got, wantID, err)
	}
	for _, w := range wantErr {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Validate() = %q, want it to say %q", err, w)
		}
	}
}
