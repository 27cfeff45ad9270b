package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
)

// TestStoreDirLocked: a second server on the store directory of a running
// one is refused at once, naming the holder, before it reads the store;
// the directory is free again once the first shut down, and a
// lock file left by a dead server blocks nobody.
func TestStoreDirLocked(t *testing.T) {
	dir := t.TempDir()
	// What a server killed with -9 leaves: a lock file nobody holds.
	if err := os.WriteFile(filepath.Join(dir, "pmixbus.lock"), []byte("999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := cluster.DefaultConfig("A", dir)
	cfg.Logger = clustertest.Logger(t)
	first, err := cluster.StartServer(t.Context(), cfg)
	if err != nil {
		t.Fatalf("a stale lock file blocked the server: %v", err)
	}
	t.Cleanup(func() { _ = first.Shutdown(context.Background()) })

	// The second server's client port is a free one of its own (-1), so
	// only the store can refuse it.
	second := cfg
	second.Name = "A2"
	start := time.Now()
	s, err := cluster.StartServer(t.Context(), second)
	if !errors.Is(err, cluster.ErrStoreInUse) || s != nil {
		t.Fatalf("second server on the store: %v, want ErrStoreInUse", err)
	}
	if took := time.Since(start); took > cfg.ReadyTimeout/2 {
		t.Errorf("the refusal took %v", took)
	}
	want := fmt.Sprintf("store dir %s is in use by another server (pid %d)", dir, os.Getpid())
	if err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}

	// Free while the first is down: another server may take it, and then
	// the first cannot come back on it.
	if err := first.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	s, err = cluster.StartServer(t.Context(), second)
	if err != nil {
		t.Fatalf("store dir after the holder shut down: %v", err)
	}
	if err := first.Restart(t.Context()); !errors.Is(err, cluster.ErrStoreInUse) || !strings.Contains(err.Error(), dir) {
		t.Errorf("restart on a store taken meanwhile: %v", err)
	}
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := first.Restart(t.Context()); err != nil {
		t.Fatalf("restart on the freed store: %v", err)
	}
}
