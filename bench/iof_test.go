package bench

import (
	"context"
	"testing"
)

// BenchmarkIOF runs the output benchmark once per b.N round
// (go test -run XXX -bench IOF -benchtime 1x ./bench/).
func BenchmarkIOF(b *testing.B) {
	benchmarkReport(b, func(ctx context.Context) (*Report, error) { return IOF(ctx, IOFConfig{Rank: rankCommand(b)}) })
}

// TestIOFSmoke runs the output benchmark small, to keep it working.
func TestIOFSmoke(t *testing.T) {
	r, err := IOF(t.Context(), IOFConfig{Rank: rankCommand(t), Ranks: 2, Bytes: 1 << 20, Rounds: 1, Lines: 5})
	if err != nil {
		t.Fatal(err)
	}
	r.Print(testWriter{t})
	if len(r.Targets) != 2 || r.Targets[0].Name != "iof_throughput_vs_raw_js" || r.Targets[1].Name != "iof_line_latency_vs_rtt" {
		t.Fatalf("targets: %v", r.Targets)
	}
}
