package bench

import (
	"context"
	"testing"
	"time"
)

// BenchmarkLaunch runs the launch benchmark once per b.N round
// (go test -run XXX -bench Launch -benchtime 1x ./bench/).
func BenchmarkLaunch(b *testing.B) {
	benchmarkReport(b, func(ctx context.Context) (*Report, error) { return Launch(ctx, LaunchConfig{Rank: rankCommand(b)}) })
}

// TestLaunchSmoke runs the launch benchmark small, to keep it working:
// 2 ranks, one round, one kill, one agent killed with a short TTL.
func TestLaunchSmoke(t *testing.T) {
	r, err := Launch(t.Context(), LaunchConfig{Rank: rankCommand(t), Sizes: []int{2}, Rounds: 1, Kills: 1, NodeDowns: 1,
		LivenessInterval: 250 * time.Millisecond, LivenessTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.Print(testWriter{t})
	var names []string
	for _, tg := range r.Targets {
		names = append(names, tg.Name)
	}
	if len(names) != 3 || names[0] != "launch_2_vs_floor" || names[1] != "kill9_event_p50_ms" || names[2] != "nodedown_max_vs_ttl" {
		t.Fatalf("targets: %v", names)
	}
}
