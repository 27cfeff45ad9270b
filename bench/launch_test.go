package bench

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkLaunch runs the launch benchmark once per b.N round
// (go test -run XXX -bench Launch -benchtime 1x ./bench/).
func BenchmarkLaunch(b *testing.B) {
	benchmarkReport(b, func(ctx context.Context) (*Report, error) { return Launch(ctx, LaunchConfig{Rank: rankCommand(b)}) })
}

// TestLaunchSmoke runs the launch benchmark small, to keep it working:
// 2 ranks on 2 agents, one round, one kill, one agent killed with a
// short TTL, one link cut (the agent, back, ends the rank it kept); the
// comparison with mpirun is skipped (no library given).
func TestLaunchSmoke(t *testing.T) {
	r, err := Launch(t.Context(), LaunchConfig{Rank: rankCommand(t), Sizes: []int{2}, Rounds: 1, Kills: 1, NodeDowns: 1, Cuts: 1, Agents: 2,
		LivenessInterval: 250 * time.Millisecond, LivenessTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.Print(testWriter{t})
	var names []string
	for _, tg := range r.Targets {
		names = append(names, tg.Name)
	}
	want := []string{"launch_2_vs_floor", "kill9_event_p50_ms", "nodedown_max_vs_ttl", "cut_report_max_minus_jobttl_s"}
	if !slices.Equal(names, want) {
		t.Fatalf("targets: %v, want %v", names, want)
	}
	if !strings.Contains(strings.Join(r.Lines, "\n"), "launch vs mpirun: skipped") {
		t.Errorf("the comparison with mpirun, without a library, does not say it was skipped")
	}
}
