package bench

import (
	"context"
	"testing"
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
