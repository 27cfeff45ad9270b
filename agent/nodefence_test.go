package agent_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent/agenttest"
)

// oneNodeJob is a world of one agent and a job of n Go clients on it:
// its fences take the job's node barrier, the agent arriving for each.
func oneNodeJob(n int) agenttest.Spec {
	nodes := make([]string, n)
	for i := range nodes {
		nodes[i] = "n1"
	}
	return agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A", Nodes: []string{"n1"}}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "j", Nodes: nodes}},
	}
}

// fenceAll fences every named client at once and returns their errors.
func fenceAll(ctx context.Context, w *agenttest.World, names ...string) []error {
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() { errs[i] = w.Client(n).Fence(ctx, nil, nil) })
	}
	wg.Wait()
	return errs
}

// TestNodeFenceDeadlineIsTheClients: a Go client whose context ends
// while it waits at its job's barrier gives up alone; its arrival
// stands, so the other rank's fence completes that round, and the next
// round needs both again.
func TestNodeFenceDeadlineIsTheClients(t *testing.T) {
	w := agenttest.Start(t, oneNodeJob(2))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	defer stop()
	if err := w.Client("A:j.0").Fence(short, nil, nil); err == nil {
		t.Fatal("a fence alone succeeded")
	}
	if err := w.Client("A:j.1").Fence(ctx, nil, nil); err != nil {
		t.Fatalf("the round rank 0 gave up on: %v", err)
	}
	for i, err := range fenceAll(ctx, w, "A:j.0", "A:j.1") {
		if err != nil {
			t.Errorf("rank %d, next round: %v", i, err)
		}
	}
}
