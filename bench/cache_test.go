package bench

import (
	"context"
	"testing"
)

// BenchmarkCache runs the cache benchmark once per b.N round
// (go test -bench=Cache -benchtime=1x ./bench/).
func BenchmarkCache(b *testing.B) {
	benchmarkReport(b, func(ctx context.Context) (*Report, error) { return Cache(ctx, CacheConfig{}) })
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
