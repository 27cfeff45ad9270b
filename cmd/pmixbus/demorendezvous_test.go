package main

import (
	"strings"
	"testing"
	"time"
)

// TestDemoRendezvous runs the demo's RFC0003 step on the demo's clusters
// and agents (without its client processes).
func TestDemoRendezvous(t *testing.T) {
	var out strings.Builder
	d := &demo{out: &out, state: newDemoState(), start: time.Now(), dir: shortTempDir(t)}
	t.Cleanup(func() {
		d.dir = "" // shortTempDir removes it
		if err := d.close(); err != nil {
			t.Error(err)
		}
	})
	if err := d.startClusters(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := d.startAgents(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := d.rendezvous(t.Context()); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{`east:rdv-east.0 looked up rendezvous-west: "west:rdv-west", published by west:rdv-west.0`, "both found each other"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	t.Log(out.String())
}
