package test

import (
	"fmt"
	"testing"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// TestWindowEndToEnd: an agent keeps at most ChainWindow of a client's
// chains in flight. A client that holds its completions gets that many
// invocations, the rest waiting at the agent; each completion lets the next
// event's invocation out, in the order the events came; every event ends.
func TestWindowEndToEnd(t *testing.T) {
	const window, events = 4, 20
	spec := worldSpec
	spec.Agent = func(c *agent.Config) { c.HandlerTimeout = waitTime; c.ChainWindow = window }
	w := worldOf(t, agenttest.Start(t, spec))
	a := w.agents["a1"]
	env := w.soloEnv("a1", "win")
	r := dialRaw(t, a)
	r.send(&proto.Frame{Type: proto.TypeHello, Seq: 1, Version: proto.Version, Nspace: "win", Rank: 0, Credential: env[agent.EnvCredential]})
	if f := r.recv(); f.Type != proto.TypeReply || f.Status != pmix.Success {
		t.Fatalf("hello: %+v", f)
	}
	const code = -3202
	r.send(&proto.Frame{Type: proto.TypeRegister, Seq: 2, Codes: []pmix.Status{code}})
	if f := r.recv(); f.Type != proto.TypeReply || f.Status != pmix.Success {
		t.Fatalf("register: %+v", f)
	}
	noneHeld(t, a, waitTime)
	for i := range events {
		if _, err := a.Notify(t.Context(), code, pmix.RangeLocal, false, []pmix.Info{pmix.NewInfo("i", pmix.Uint32(uint32(i)))}); err != nil {
			t.Fatal(err)
		}
	}
	clustertest.WaitFor(t, waitTime, func() error {
		if s := a.Stats(); s.ChainsWaiting != events-window {
			return fmt.Errorf("%d events waiting, want %d", s.ChainsWaiting, events-window)
		}
		return nil
	})
	next := 0 // the event the next invocation must be of
	var inFlight []proto.Invoke
	read := func(want int) {
		t.Helper()
		for len(inFlight) < want {
			f := r.recv()
			if f.Type != proto.TypeInvokeBatch {
				t.Fatalf("got %v, want invoke-batch", f.Type)
			}
			for _, inv := range f.Invokes {
				if v, ok := pmix.LookupValue(inv.Info, "i"); !ok || !v.Equal(pmix.Uint32(uint32(next))) {
					t.Fatalf("invocation of %v, want event %d", v, next)
				}
				next++
				inFlight = append(inFlight, inv)
			}
		}
		if len(inFlight) > window {
			t.Fatalf("%d invocations in flight, window %d", len(inFlight), window)
		}
	}
	read(window)
	for next < events || len(inFlight) > 0 {
		// Complete the oldest two (or what is left): as many come next.
		k := min(2, len(inFlight))
		done := &proto.Frame{Type: proto.TypeInvokeDoneBatch}
		for _, inv := range inFlight[:k] {
			done.Dones = append(done.Dones, proto.Done{Seq: inv.Seq, Status: pmix.EventNoActionTaken})
		}
		inFlight = inFlight[k:]
		r.send(done)
		read(min(window, len(inFlight)+events-next))
	}
	clustertest.WaitFor(t, waitTime, func() error {
		s := a.Stats()
		if s.ChainsWaiting != 0 || s.ChainsCompleted < s.ChainsStarted {
			return fmt.Errorf("%d waiting, %d of %d chains ended", s.ChainsWaiting, s.ChainsCompleted, s.ChainsStarted)
		}
		return nil
	})
}
