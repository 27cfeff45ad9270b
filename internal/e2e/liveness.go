package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
)

// Liveness in the tests: a node is declared down within a second of its
// agent's last refresh.
const (
	LiveInterval = 250 * time.Millisecond
	LiveTTL      = time.Second
)

// WaitSeen waits until each of the agents sees exactly nodes alive.
func WaitSeen(t *testing.T, w *World, nodes []string, agents ...string) {
	t.Helper()
	for _, n := range agents {
		clustertest.WaitFor(t, WaitTime, func() error {
			var got []string
			for _, e := range w.Agents[n].Agents() {
				got = append(got, e.Node)
			}
			if !slices.Equal(got, nodes) {
				return fmt.Errorf("%s sees %v, want %v", n, got, nodes)
			}
			return nil
		})
	}
}

// StartCuttable starts the world of spec with node's agent linked to
// NATS through a CutProxy, which it returns.
func StartCuttable(t *testing.T, spec agenttest.Spec, node string) (*agenttest.World, *clustertest.CutProxy) {
	t.Helper()
	link, err := clustertest.NewCutProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	agentOf := spec.Agent
	spec.Agent = func(c *agent.Config) {
		if agentOf != nil {
			agentOf(c)
		}
		if c.Node == node {
			u, err := link.Via(c.URL)
			if err != nil {
				t.Error(err)
			}
			c.URL = u
		}
	}
	w := agenttest.Start(t, spec)
	t.Cleanup(link.Restore) // before the world's cleanup: the agent must reach NATS to stop
	return w, link
}
