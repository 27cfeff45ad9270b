package bench

import (
	"context"
	"os"
	"strings"
	"testing"
)

// BenchmarkScale runs the scale benchmark once per b.N round
// (go test -run XXX -bench Scale -benchtime 1x -timeout 1h ./bench/).
func BenchmarkScale(b *testing.B) {
	benchmarkReport(b, func(ctx context.Context) (*Report, error) { return Scale(ctx, ScaleConfig{Helper: helperCommand(b)}) })
}

// TestScaleSmoke runs the scale benchmark small, to keep it working: two
// steps, each client in the helper process reached by every event.
func TestScaleSmoke(t *testing.T) {
	dir := t.TempDir()
	r, err := Scale(t.Context(), ScaleConfig{Clients: []int{20, 50}, RegisterRounds: 5, EventRounds: 2, Helper: helperCommand(t), ProfileDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r.Print(&b)
	t.Log("\n" + b.String())
	names := []string{"heap_per_client_kib_20", "heap_per_client_kib_50", "register_p50_50_vs_20", "deliver_all_ms_50"}
	if len(r.Targets) != len(names) {
		t.Fatalf("targets: %v", r.Targets)
	}
	for i, n := range names {
		if r.Targets[i].Name != n {
			t.Errorf("target %d is %s, want %s", i, r.Targets[i].Name, n)
		}
	}
	for _, f := range []string{"agent-20.pprof", "nats-20.pprof", "clients-20.pprof", "agent-50.pprof", "nats-50.pprof", "clients-50.pprof", "agent-50.cpu.pprof", "clients-50.cpu.pprof"} {
		if st, err := os.Stat(dir + "/" + f); err != nil || st.Size() == 0 {
			t.Errorf("profile %s: %v", f, err)
		}
	}
}
