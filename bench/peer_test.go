package bench

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
)

// peerLib is the libpmix.so.2 the peer benchmark's test runs with:
// PMIXBUS_PMIX_LIB, or lib/ at the top of the tree, where `make` builds it.
func peerLib(t *testing.T) string {
	dir := os.Getenv("PMIXBUS_PMIX_LIB")
	if dir == "" {
		dir, _ = filepath.Abs(filepath.Join("..", "lib"))
	}
	if _, err := os.Stat(filepath.Join(dir, "libpmix.so.2")); err != nil {
		t.Skipf("no libpmix.so.2 in %s (make builds it; PMIXBUS_PMIX_LIB names another)", dir)
	}
	return dir
}

// TestPeerSmoke runs the peer benchmark small, to keep it working: every
// measurement once at 2 ranks, against mpirun where it is installed.
func TestPeerSmoke(t *testing.T) {
	lib := peerLib(t)
	r, err := Peer(t.Context(), PeerConfig{LibDir: lib, Include: filepath.Join("..", "cabi", "include"),
		Sizes: []int{2}, Fences: 5, Notifies: 5, Lines: 5, Launch: 2, Rounds: 1, Idle: 100 * time.Millisecond,
		GroupRanks: 4, GroupAgents: 2, Groups: 2, FanoutRanks: 3, FanoutEvents: 5})
	if err != nil {
		t.Fatal(err)
	}
	r.Print(testWriter{t})
	text := strings.Join(r.Lines, "\n")
	for _, want := range []string{"fence, 2 ranks", "first fence with PMIX_COLLECT_DATA", "one output line", "its floor: one NATS message", "notify round trip", "fan-out, LOCAL", "peak RSS", "threads of a rank", "group construct, 4 ranks on 2 agents"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q line in the report", want)
		}
	}
	if _, err := os.Stat("/usr/bin/mpirun"); err == nil && len(r.Targets) < 4 {
		t.Errorf("mpirun is installed but the report has %d targets", len(r.Targets))
	}
}

func TestPeerNeedsLibrary(t *testing.T) {
	for _, dir := range []string{"", t.TempDir()} {
		if _, err := Peer(t.Context(), PeerConfig{LibDir: dir}); !errors.Is(err, pmix.ErrBadParam) {
			t.Errorf("LibDir %q: %v, want PMIX_ERR_BAD_PARAM", dir, err)
		}
	}
	lib := peerLib(t)
	if _, err := Peer(t.Context(), PeerConfig{LibDir: lib, Only: []string{"fence", "fences"}}); !errors.Is(err, pmix.ErrBadParam) || !strings.Contains(err.Error(), `"fences"`) {
		t.Errorf("Only fences: %v, want PMIX_ERR_BAD_PARAM naming it", err)
	}
}

func TestPeerOutput(t *testing.T) {
	var o peerOutput
	for _, p := range []string{"fence_data 1200\nfen", "ce 300\n", "garbage line here\nsize 4\n"} {
		if _, err := o.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := o.Write([]byte("t 1\nt 2\n")); err != nil {
		t.Fatal(err)
	}
	r, err := o.run(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.values["fence_data"] != 1200 || r.values["fence"] != 300 || r.values["size"] != 4 || len(r.delays) != 2 || r.took != time.Second {
		t.Fatalf("parsed %+v", r)
	}
	var empty peerOutput
	if _, err := empty.run(0); err == nil {
		t.Fatal("a run that printed nothing measured: no error")
	}
}
