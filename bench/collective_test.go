package bench

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

// BenchmarkCollective runs the collective benchmark once per b.N round
// and reports the targets as metrics (go test -bench=Collective
// -benchtime=1x ./bench/).
func BenchmarkCollective(b *testing.B) {
	benchmarkReport(b, func(ctx context.Context) (*Report, error) { return Collective(ctx, CollectiveConfig{}) })
}

// TestCollectiveSmoke runs the benchmark small, to keep it working; it
// checks that it runs and that the message count meets its bound, not how
// fast.
func TestCollectiveSmoke(t *testing.T) {
	r, err := Collective(t.Context(), CollectiveConfig{Procs: 16, Agents: 4, Rounds: 2, DataProcs: 8, DataSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	r.Print(testWriter{t})
	if len(r.Targets) != 4 || !r.Targets[0].OK() {
		t.Fatalf("targets: %v", r.Targets)
	}
}

// TestCollectiveCSmoke runs the fence of C ranks small, to keep it
// working: 4 ranks on 2 agents, one run of 5 fences, no in-process
// clients; it checks the target is there, not how fast.
func TestCollectiveCSmoke(t *testing.T) {
	lib := peerLib(t)
	r, err := Collective(t.Context(), CollectiveConfig{CRanks: 4, Agents: 2, Rounds: 1, CFences: 5, COnly: true,
		LibDir: lib, Include: filepath.Join("..", "cabi", "include")})
	if err != nil {
		t.Fatal(err)
	}
	r.Print(testWriter{t})
	if len(r.Targets) != 1 || r.Targets[0].Name != "fence_c_4_2agents_vs_rtt_per_level" {
		t.Fatalf("targets: %v", r.Targets)
	}
}

// TestCollectiveCNeedsLibrary: C ranks without a library are a bad
// parameter, said before anything starts.
func TestCollectiveCNeedsLibrary(t *testing.T) {
	if _, err := Collective(t.Context(), CollectiveConfig{CRanks: 4, COnly: true, LibDir: t.TempDir()}); !errors.Is(err, pmix.ErrBadParam) {
		t.Fatalf("%v, want PMIX_ERR_BAD_PARAM", err)
	}
}
