package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocalNATS: each local agent is found by its own registration; with
// several a tool needs the cluster; with none it says so and names no
// server of its own (never nats://127.0.0.1:4222).
func TestLocalNATS(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	if _, err := localNATS(""); err == nil || !strings.Contains(err.Error(), "--nats") {
		t.Fatalf("none: %v", err)
	}
	removeA, err := registerLocal(localEndpoint{Kind: "agent", Cluster: "A", Name: "n1", URL: "nats://127.0.0.1:1111"})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := localNATS(""); err != nil || u != "nats://127.0.0.1:1111" {
		t.Fatalf("one: %q, %v", u, err)
	}
	removeB, err := registerLocal(localEndpoint{Kind: "agent", Cluster: "B", Name: "n1", URL: "nats://127.0.0.1:2222"})
	if err != nil {
		t.Fatal(err)
	}
	defer removeB()
	// A second agent of cluster A on the same server is no ambiguity.
	removeA2, err := registerLocal(localEndpoint{Kind: "agent", Cluster: "A", Name: "n2", URL: "nats://127.0.0.1:1111"})
	if err != nil {
		t.Fatal(err)
	}
	defer removeA2()
	if _, err := localNATS(""); err == nil || !strings.Contains(err.Error(), "--cluster") || !strings.Contains(err.Error(), "2222") {
		t.Fatalf("two clusters, none named: %v", err)
	}
	for c, want := range map[string]string{"A": "nats://127.0.0.1:1111", "B": "nats://127.0.0.1:2222"} {
		if u, err := localNATS(c); err != nil || u != want {
			t.Fatalf("cluster %s: %q, %v", c, u, err)
		}
	}
	if _, err := localNATS("C"); err == nil || !strings.Contains(err.Error(), "of cluster C") {
		t.Fatalf("cluster C: %v", err)
	}
	// One that stops is gone at once; one killed (its pid gone) is
	// dropped and its file removed.
	removeA()
	removeA2()
	dir, _ := localDir()
	stale := filepath.Join(dir, "agent.C.n9.999999999.json")
	b, _ := json.Marshal(localEndpoint{Kind: "agent", Cluster: "C", Name: "n9", URL: "nats://127.0.0.1:9999", Pid: 999999999})
	if err := os.WriteFile(stale, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if u, err := localNATS(""); err != nil || u != "nats://127.0.0.1:2222" {
		t.Fatalf("after stops: %q, %v", u, err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("a dead agent's registration stays: %v", err)
	}
}

func TestDefaultStateDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/x/state")
	if d, err := defaultStateDir(); err != nil || d != "/x/state/pmixbus" {
		t.Fatalf("XDG_STATE_HOME: %q, %v", d, err)
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/u")
	want := "/home/u/.local/state/pmixbus"
	if os.Geteuid() == 0 {
		want = "/var/lib/pmixbus"
	}
	if d, err := defaultStateDir(); err != nil || d != want {
		t.Fatalf("default: %q, %v; want %q", d, err, want)
	}
	if d, _ := defaultStateDir(); strings.HasPrefix(d, os.TempDir()) {
		t.Fatalf("state in the temp dir: %s", d)
	}
}
