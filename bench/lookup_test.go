package bench

import (
	"context"
	"testing"
)

// BenchmarkLookup runs the publish/lookup benchmark once per b.N round and
// reports the ratios as metrics (go test -bench=Lookup -benchtime=1x ./bench/).
func BenchmarkLookup(b *testing.B) {
	benchmarkReport(b, func(ctx context.Context) (*Report, error) { return Lookup(ctx, LookupConfig{}) })
}

// TestLookupSmoke runs the benchmark small, to keep it working; it checks
// that it runs, not how fast.
func TestLookupSmoke(t *testing.T) {
	r, err := Lookup(t.Context(), LookupConfig{Rounds: 20, WaitRounds: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Targets) != 3 {
		t.Fatalf("targets: %v", r.Targets)
	}
	r.Print(testWriter{t})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
