package clustertest

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
)

// LeafReconnectInterval is the leaf reconnect interval of the topologies
// started here: short, so tests that restart a hub see links return quickly.
const LeafReconnectInterval = 100 * time.Millisecond

// shutdownTimeout bounds the cleanup that shuts a topology down.
const shutdownTimeout = 30 * time.Second

// StartServer starts a standalone server of cluster id with JetStream in
// domain id, and shuts it down at cleanup.
func StartServer(t testing.TB, id cluster.ID) *cluster.Server {
	t.Helper()
	cfg := cluster.DefaultConfig(id, storeDir(t))
	cfg.Logger = Logger(t)
	s, err := cluster.StartServer(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start server of cluster %s: %v", id, err)
	}
	ShutdownAtCleanup(t, "server "+s.Name(), s.Shutdown)
	return s
}

// StartCluster starts cluster id with the given number of routed servers (a
// standalone one if 1), and shuts it down at cleanup.
func StartCluster(t testing.TB, id cluster.ID, servers int) *cluster.Cluster {
	t.Helper()
	cfg := cluster.DefaultClusterConfig(id, servers, storeDir(t))
	cfg.Logger = Logger(t)
	c, err := cluster.StartCluster(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start cluster %s: %v", id, err)
	}
	ShutdownAtCleanup(t, "cluster "+string(id), c.Shutdown)
	return c
}

// StartMultiCluster starts the given clusters joined by leaf-node links to a
// hub in domain cluster.DefaultHubDomain, and shuts them down at cleanup.
func StartMultiCluster(t testing.TB, clusters ...cluster.ClusterSpec) *cluster.MultiCluster {
	t.Helper()
	cfg := cluster.DefaultMultiClusterConfig(storeDir(t), clusters...)
	cfg.Logger = Logger(t)
	cfg.LeafReconnectInterval = LeafReconnectInterval
	m, err := cluster.StartMultiCluster(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start multi-cluster: %v", err)
	}
	ShutdownAtCleanup(t, "multi-cluster", m.Shutdown)
	return m
}

// Connect connects to url (one URL or a comma-separated list) and closes the
// connection at cleanup. Unless opts say otherwise, the client keeps trying
// to reconnect for as long as the test runs, so tests that restart servers
// get their connections back.
func Connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append([]nats.Option{
		nats.Name(t.Name()),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(50 * time.Millisecond),
	}, opts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// storeDir is a directory for JetStream stores, removed once the test's
// servers are shut down. Unlike t.TempDir, its removal tries again for a
// while: a server's file store may still finish a write after
// WaitForShutdown returns, which makes a single RemoveAll fail with
// "directory not empty".
func storeDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pmixbus-"+strings.ReplaceAll(t.Name(), "/", "_")+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var err error
		for range 50 {
			if err = os.RemoveAll(dir); err == nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("removing the JetStream store %s: %v", dir, err)
	})
	return dir
}

// ShutdownAtCleanup registers a t.Cleanup that calls shutdown with a
// context of its own, bounded by 30 s, and reports its error. Not
// t.Context(): that one is canceled before cleanups run, so a shutdown
// given it returns before the server has stopped, and t.TempDir's removal
// then races the server's last writes to its store ("directory not empty").
func ShutdownAtCleanup(t testing.TB, what string, shutdown func(context.Context) error) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			t.Errorf("shut down %s: %v", what, err)
		}
	})
}

// Logger returns a logger writing to t.Log at the level PMIXBUS_TEST_LOG
// names (error, warn, info, debug or trace), or nil, meaning no logging,
// when it names none. Records written after the test ends are dropped.
func Logger(t testing.TB) *slog.Logger {
	level, ok := logLevel(os.Getenv("PMIXBUS_TEST_LOG"))
	if !ok {
		return nil
	}
	w := &testWriter{t: t}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

func logLevel(s string) (slog.Level, bool) {
	switch strings.ToLower(s) {
	case "error":
		return slog.LevelError, true
	case "warn":
		return slog.LevelWarn, true
	case "info":
		return slog.LevelInfo, true
	case "debug":
		return slog.LevelDebug, true
	case "trace":
		return cluster.LevelTrace, true
	}
	return 0, false
}

// testWriter hands each slog record to t.Log until the test ends.
type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
}
