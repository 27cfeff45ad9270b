package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
)

func TestStartServer(t *testing.T) {
	tests := []struct {
		name       string
		mod        func(*cluster.Config)
		wantLeaf   bool
		wantMon    bool
		wantHostIn string
	}{
		{name: "default", mod: func(*cluster.Config) {}, wantHostIn: "127.0.0.1"},
		{name: "hub with monitoring", mod: func(c *cluster.Config) {
			c.LeafPort = -1
			c.MonitorPort = -1
		}, wantLeaf: true, wantMon: true, wantHostIn: "127.0.0.1"},
		{name: "wildcard host reported as loopback", mod: func(c *cluster.Config) { c.Host = "0.0.0.0" }, wantHostIn: "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cluster.DefaultConfig("A", t.TempDir())
			cfg.Logger = clustertest.Logger(t)
			tt.mod(&cfg)
			s, err := cluster.StartServer(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Shutdown(context.Background()) })

			if s.Name() != "A" || s.Cluster() != "A" || s.Domain() != "A" || !s.Running() {
				t.Fatalf("name %q cluster %q domain %q running %v", s.Name(), s.Cluster(), s.Domain(), s.Running())
			}
			if !strings.HasPrefix(s.ClientURL(), "nats://"+tt.wantHostIn+":") {
				t.Errorf("ClientURL() = %q", s.ClientURL())
			}
			if got := s.LeafURL() != ""; got != tt.wantLeaf {
				t.Errorf("LeafURL() = %q, want one: %v", s.LeafURL(), tt.wantLeaf)
			}
			if s.RouteURL() != "" {
				t.Errorf("RouteURL() = %q for a standalone server", s.RouteURL())
			}
			if got := s.MonitorURL() != ""; got != tt.wantMon {
				t.Fatalf("MonitorURL() = %q, want one: %v", s.MonitorURL(), tt.wantMon)
			}
			if tt.wantMon {
				resp, err := http.Get(s.MonitorURL() + "/healthz?js-enabled-only=true")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("healthz: %s", resp.Status)
				}
			}

			nc := clustertest.Connect(t, s.ClientURL())
			for _, domain := range []string{"", "A"} {
				js := newJS(t, nc, domain)
				if _, err := js.AccountInfo(t.Context()); err != nil {
					t.Errorf("JetStream (domain %q): %v", domain, err)
				}
			}
		})
	}
}

func TestServerShutdownAndRestart(t *testing.T) {
	s := clustertest.StartServer(t, "A")
	url := s.ClientURL()
	ctx := t.Context()

	if err := s.Restart(ctx); !errors.Is(err, cluster.ErrRunning) {
		t.Fatalf("Restart of a running server = %v, want ErrRunning", err)
	}

	nc := clustertest.Connect(t, url)
	kv, err := newJS(t, nc, "").CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PutString(ctx, "k", "kept"); err != nil {
		t.Fatal(err)
	}

	// Concurrent and repeated shutdowns all wait for the same one.
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = s.Shutdown(ctx) })
	}
	wg.Wait()
	for _, err := range append(errs, s.Shutdown(ctx)) {
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	}
	if s.Running() {
		t.Fatal("Running() after Shutdown")
	}
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "nats://"), time.Second); err == nil {
		c.Close()
		t.Fatal("client port still open after Shutdown")
	}

	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if s.ClientURL() != url {
		t.Fatalf("restarted on %s, was %s", s.ClientURL(), url)
	}
	// The client reconnects to the same URL and finds the data kept.
	clustertest.WaitFor(t, 5*time.Second, func() error {
		e, err := kv.Get(ctx, "k")
		if err != nil {
			return err
		}
		if string(e.Value()) != "kept" {
			return fmt.Errorf("value %q", e.Value())
		}
		return nil
	})
}

func TestStartServerErrors(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	tests := []struct {
		name    string
		mod     func(*cluster.Config)
		wantErr error
	}{
		{name: "invalid config", mod: func(c *cluster.Config) { c.Cluster = "a:b" }, wantErr: cluster.ErrInvalidConfig},
		{name: "leaf TLS files missing", mod: func(c *cluster.Config) {
			c.LeafPort = -1
			c.LeafTLS = &cluster.LeafTLS{Cert: filepath.Join(c.StoreDir, "none.pem"), Key: filepath.Join(c.StoreDir, "none-key.pem")}
		}, wantErr: cluster.ErrInvalidConfig},
		{name: "leaf CA without a certificate", mod: func(c *cluster.Config) {
			c.LeafRemotes = []string{"nats-leaf://127.0.0.1:1"}
			c.LeafTLS = &cluster.LeafTLS{CA: filepath.Join(c.StoreDir, "ca.pem")}
			if err := os.WriteFile(c.LeafTLS.CA, []byte("not PEM"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, wantErr: cluster.ErrInvalidConfig},
		{name: "port taken", mod: func(c *cluster.Config) {
			c.Port = taken.Addr().(*net.TCPAddr).Port
			c.ReadyTimeout = 500 * time.Millisecond
		}, wantErr: cluster.ErrNotReady},
		{name: "JetStream cannot store", mod: func(c *cluster.Config) {
			// nats-server keeps its data in <StoreDir>/jetstream; a file there
			// stops JetStream from starting.
			if err := os.WriteFile(filepath.Join(c.StoreDir, "jetstream"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, wantErr: cluster.ErrNotReady},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cluster.DefaultConfig("A", t.TempDir())
			tt.mod(&cfg)
			s, err := cluster.StartServer(t.Context(), cfg)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("StartServer = %v, want %v", err, tt.wantErr)
			}
			if s != nil {
				t.Fatal("StartServer returned a server with an error")
			}
		})
	}
}

// newJS returns a JetStream context on nc, in domain unless it is empty.
func newJS(t testing.TB, nc *nats.Conn, domain string) jetstream.JetStream {
	t.Helper()
	var (
		js  jetstream.JetStream
		err error
	)
	if domain == "" {
		js, err = jetstream.New(nc)
	} else {
		js, err = jetstream.NewWithDomain(nc, domain)
	}
	if err != nil {
		t.Fatal(err)
	}
	return js
}
