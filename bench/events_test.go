package bench

import (
	"os"
	"testing"
)

// BenchmarkEvents runs the events benchmark once per b.N round and reports
// the ratios as metrics (go test -bench=Events -benchtime=1x ./bench/).
func BenchmarkEvents(b *testing.B) {
	for range b.N {
		r, err := Events(b.Context(), EventsConfig{})
		if err != nil {
			b.Fatal(err)
		}
		r.Print(os.Stdout)
		for _, t := range r.Targets {
			b.ReportMetric(t.Measured, t.Name)
		}
	}
}

// TestEventsSmoke runs the benchmark small, to keep it working; it checks
// that it runs, not how fast.
func TestEventsSmoke(t *testing.T) {
	r, err := Events(t.Context(), EventsConfig{LatencyRounds: 20, FanoutEvents: 10, Agents: 2, Clients: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Targets) != 2 {
		t.Fatalf("targets: %v", r.Targets)
	}
}
