package bench

import (
	"context"
	"testing"
)

// BenchmarkStalled runs the stalled-readers benchmark once per b.N round
// (go test -run XXX -bench Stalled -benchtime 1x ./bench/).
func BenchmarkStalled(b *testing.B) {
	benchmarkReport(b, func(ctx context.Context) (*Report, error) { return Stalled(ctx, StalledConfig{}) })
}

// TestStalledSmoke runs the stalled-readers benchmark small, to keep it
// working.
func TestStalledSmoke(t *testing.T) {
	r, err := Stalled(t.Context(), StalledConfig{Events: 200, Rate: 2000, Payload: 100, Stalled: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Targets) != 1 || r.Targets[0].Name != "stalled_p99_vs_alone" {
		t.Fatalf("targets: %v", r.Targets)
	}
}
