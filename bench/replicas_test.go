package bench

import (
	"context"
	"testing"
)

// BenchmarkReplicas runs the replicas benchmark once per b.N round and
// reports the ratios as metrics (go test -bench=Replicas -benchtime=1x ./bench/).
func BenchmarkReplicas(b *testing.B) {
	benchmarkReport(b, func(ctx context.Context) (*Report, error) { return Replicas(ctx, ReplicasConfig{}) })
}

// TestReplicasSmoke runs the benchmark small, to keep it working; it
// checks that it runs on both clusters, not how fast.
func TestReplicasSmoke(t *testing.T) {
	r, err := Replicas(t.Context(), ReplicasConfig{Rounds: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Targets) != 3 {
		t.Fatalf("targets: %v", r.Targets)
	}
	r.Print(testWriter{t})
}
