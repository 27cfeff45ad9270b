package bench

import (
	"context"
	"testing"
)

// BenchmarkEvents runs the events benchmark once per b.N round and reports
// the ratios as metrics (go test -bench=Events -benchtime=1x ./bench/).
func BenchmarkEvents(b *testing.B) {
	benchmarkReport(b, func(ctx context.Context) (*Report, error) { return Events(ctx, EventsConfig{}) })
}

// TestEventsSmoke runs the benchmark small, to keep it working; it checks
// that it runs, not how fast.
func TestEventsSmoke(t *testing.T) {
	r, err := Events(t.Context(), EventsConfig{LatencyRounds: 20, FanoutEvents: 10, Agents: 2, Clients: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Targets) != 3 {
		t.Fatalf("targets: %v", r.Targets)
	}
}
