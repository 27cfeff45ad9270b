package bench

import (
	"os"
	"testing"
)

// BenchmarkCache runs the cache benchmark once per b.N round
// (go test -bench=Cache -benchtime=1x ./bench/).
func BenchmarkCache(b *testing.B) {
	for range b.N {
		r, err := Cache(b.Context(), CacheConfig{})
		if err != nil {
			b.Fatal(err)
		}
		r.Print(os.Stdout)
		for _, t := range r.Targets {
			b.ReportMetric(t.Measured, t.Name)
		}
	}
}

// TestCacheSmoke runs the cache benchmark small, to keep it working.
func TestCacheSmoke(t *testing.T) {
	r, err := Cache(t.Context(), CacheConfig{Events: 600, Replay: 512, Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Targets) != 2 {
		t.Fatalf("targets: %v", r.Targets)
	}
}
