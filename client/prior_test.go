package client

import (
	"testing"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// TestPriorResultsOnlyWhenEdited: a completion carries the prior results
// only if the handler changed them; the agent keeps them as they were
// otherwise (docs/protocol.md, *Handler invocation*), so a chain of n
// handlers does not send every result back n times.
func TestPriorResultsOnlyWhenEdited(t *testing.T) {
	a, c := startFakeAgent(t)
	mustRegister(t, c, []pmix.Status{codeX}, named("keep"), func(call *bus.Call, done bus.Done) {
		done(pmix.EventNoActionTaken, nil)
	})
	mustRegister(t, c, []pmix.Status{codeX}, named("edit"), func(call *bus.Call, done bus.Done) {
		call.Results[1].Value = pmix.String("changed")
		done(pmix.EventNoActionTaken, nil)
	})
	mustRegister(t, c, []pmix.Status{codeX}, named("remove"), func(call *bus.Call, done bus.Done) {
		call.Results[1].Key = ""
		done(pmix.EventNoActionTaken, nil)
	})
	prior := []pmix.Info{
		pmix.NewInfo("earlier", pmix.StatusValue(pmix.EventNoActionTaken)),
		pmix.NewInfo("k", pmix.String("v")),
	}
	invoke := func(name string) *proto.Frame {
		t.Helper()
		a.mu.Lock()
		a.seq++
		f := &proto.Frame{Type: proto.TypeInvoke, Seq: a.seq, ID: a.ids[name], Name: name, Code: codeX, Results: prior}
		a.mu.Unlock()
		a.write(proto.AppendFrame(nil, f))
		return a.answer()
	}

	if f := invoke("keep"); f.HasPrior {
		t.Fatalf("unchanged prior results sent back: %v", f.Prior)
	}
	f := invoke("edit")
	if !f.HasPrior || len(f.Prior) != 2 || f.Prior[1].Key != "k" {
		t.Fatalf("edited prior results: has %v, %v", f.HasPrior, f.Prior)
	}
	if s, _ := f.Prior[1].Value.Str(); s != "changed" {
		t.Fatalf("edited value %v", f.Prior[1].Value)
	}
	f = invoke("remove")
	if !f.HasPrior || len(f.Prior) != 2 || f.Prior[1].Key != "" || f.Prior[0].Key != "earlier" {
		t.Fatalf("removed entry: has %v, %v", f.HasPrior, f.Prior)
	}
	// A handler that saw no prior results sends none back.
	if f := a.invoke("keep", codeX); f.HasPrior {
		t.Fatalf("prior results sent for an invocation without: %v", f.Prior)
	}
}
