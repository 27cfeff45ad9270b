package demo

import (
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/agent/agenttest"
)

// TestRendezvous runs the demo's RFC0003 step on the demo's clusters and
// agents (without its client processes).
func TestRendezvous(t *testing.T) {
	var out strings.Builder
	d := &demo{out: &out, w: agenttest.Start(t, worldSpec())}
	if err := d.rendezvous(t.Context()); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{`east:rdv-east.0 looked up rendezvous-west: "west:rdv-west", published by west:rdv-west.0`, "both found each other", "heard the event sent to", "notified as one group across both clusters"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	t.Log(out.String())
}
