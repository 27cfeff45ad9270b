package events

import (
	"fmt"
	"testing"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// TestWindowEndToEnd: an agent keeps at most ChainWindow of a client's
// chains in flight. A client that holds its completions gets that many
// invocations, the rest waiting at the agent; each completion lets the next
// event's invocation out, in the order the events came; every event ends.
func TestWindowEndToEnd(t *testing.T) {
	const window, events = 4, 20
	spec := e2e.WorldSpec
	spec.Agent = func(c *agent.Config) { c.HandlerTimeout = e2e.WaitTime; c.ChainWindow = window }
	w := e2e.WorldOf(t, agenttest.Start(t, spec))
	a := w.Agents["a1"]
	env := w.SoloEnv("a1", "win")
	r := e2e.DialRaw(t, a)
	r.Send(&proto.Frame{Type: proto.TypeHello, Seq: 1, Version: proto.Version, Nspace: "win", Rank: 0, Credential: env[agent.EnvCredential]})
	if f := r.Recv(); f.Type != proto.TypeReply || f.Status != pmix.Success {
		t.Fatalf("hello: %+v", f)
	}
	const code = -3202
	r.Send(&proto.Frame{Type: proto.TypeRegister, Seq: 2, Codes: []pmix.Status{code}})
	if f := r.Recv(); f.Type != proto.TypeReply || f.Status != pmix.Success {
		t.Fatalf("register: %+v", f)
	}
	e2e.NoneHeld(t, a, e2e.WaitTime)
	for i := range events {
		if _, err := a.Notify(t.Context(), code, pmix.RangeLocal, false, []pmix.Info{pmix.NewInfo("i", pmix.Uint32(uint32(i)))}); err != nil {
			t.Fatal(err)
		}
	}
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
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
			f := r.Recv()
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
		r.Send(done)
		read(min(window, len(inFlight)+events-next))
	}
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		s := a.Stats()
		if s.ChainsWaiting != 0 || s.ChainsCompleted < s.ChainsStarted {
			return fmt.Errorf("%d waiting, %d of %d chains ended", s.ChainsWaiting, s.ChainsCompleted, s.ChainsStarted)
		}
		return nil
	})
}
