package agent_test

import (
	"testing"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/pmix"
)

// TestHelloWaitsForStamp: once a client's attach has returned, the agent
// has noted from where it receives its job's events live. Stamped later,
// the events the client published at once would count as owed to it and
// be retained for it until the job ends (seen as
// TestRetainedBacklogReplayedOnce keeping 38 of them under load).
func TestHelloWaitsForStamp(t *testing.T) {
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A", Nodes: []string{"n1"}}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "job", Session: "s", Nodes: []string{"n1", "n1", "n1"}}},
	})
	a := w.Agent("n1")
	for r := range pmix.Rank(3) {
		if p := (pmix.Proc{Nspace: "job", Rank: r}); !a.Stamped(p) {
			t.Errorf("%v attached without its retention stamp", p)
		}
	}
}
