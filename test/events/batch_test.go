package events

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// TestBatchedInvocations: a client of protocol version 2 gets its
// invocations in invoke-batch frames, in the order the agent received the
// events, and may answer them all in one invoke-done-batch frame: every
// chain ends with the status it was given. A client stating a version
// newer than the agent's is answered with the agent's.
func TestBatchedInvocations(t *testing.T) {
	w := e2e.NewWorld(t)
	a := w.Agents["a1"]
	env := w.SoloEnv("a1", "batch")
	r := e2e.DialRaw(t, a)
	r.Send(&proto.Frame{Type: proto.TypeHello, Seq: 1, Version: proto.Version + 1, Nspace: "batch", Rank: 0, Credential: env[agent.EnvCredential]})
	if f := r.Recv(); f.Type != proto.TypeReply || f.Status != pmix.Success || f.Version != proto.Version {
		t.Fatalf("hello of version %d: %+v, want a reply of version %d", proto.Version+1, f, proto.Version)
	}
	const code = -3201
	r.Send(&proto.Frame{Type: proto.TypeRegister, Seq: 2, Codes: []pmix.Status{code}, Info: []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("h"))}})
	if f := r.Recv(); f.Type != proto.TypeReply || f.Status != pmix.Success {
		t.Fatalf("register: %+v", f)
	}
	var mu sync.Mutex
	var outcomes []event.OutcomeReport
	a.OnOutcome(func(o event.OutcomeReport) {
		if o.Client.Nspace == "batch" {
			mu.Lock()
			outcomes = append(outcomes, o)
			mu.Unlock()
		}
	})

	const n = 40
	for i := range n {
		if _, err := a.Notify(t.Context(), code, pmix.RangeLocal, false, []pmix.Info{pmix.NewInfo("i", pmix.Uint32(uint32(i)))}); err != nil {
			t.Fatal(err)
		}
	}
	var invs []proto.Invoke
	for len(invs) < n {
		f := r.Recv()
		if f.Type != proto.TypeInvokeBatch {
			t.Fatalf("a client of version 2 got %v, want invoke-batch", f.Type)
		}
		invs = append(invs, f.Invokes...)
	}
	done := &proto.Frame{Type: proto.TypeInvokeDoneBatch}
	for i, inv := range invs {
		v, ok := pmix.LookupValue(inv.Info, "i")
		if !ok || !v.Equal(pmix.Uint32(uint32(i))) || inv.Name != "h" || inv.Code != code {
			t.Fatalf("invocation %d: %+v, want event %d's", i, inv, i)
		}
		st := pmix.EventNoActionTaken
		if i%2 == 1 {
			st = pmix.EventActionComplete
		}
		done.Dones = append(done.Dones, proto.Done{Seq: inv.Seq, Status: st})
	}
	r.Send(done) // every completion in one frame
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(outcomes) < n {
			return fmt.Errorf("%d of %d chains ended", len(outcomes), n)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	complete := 0
	for _, o := range outcomes {
		if len(o.Outcome.Ran) != 1 || o.Outcome.Ran[0].Name != "h" {
			t.Fatalf("outcome %+v", o.Outcome)
		}
		switch o.Outcome.Ran[0].Status {
		case pmix.EventActionComplete:
			complete++
		case pmix.EventNoActionTaken:
		default:
			t.Fatalf("outcome %+v", o.Outcome)
		}
	}
	if complete != n/2 {
		t.Fatalf("%d chains ended with PMIX_EVENT_ACTION_COMPLETE, want %d", complete, n/2)
	}
}

// TestBatchWithHandlerCallingTheAgent: a burst of events reaches a client's
// handler in order while one handler of the burst makes a blocking request
// to the agent: the request is answered (it does not wait behind the
// batch's answers), and the handlers after it still run, in order.
func TestBatchWithHandlerCallingTheAgent(t *testing.T) {
	w := e2e.NewWorld(t)
	c := w.Client("A:jobA.0")
	c.Register(t, nil, nil, pmix.EventNoActionTaken)
	const code, n = -3301, 64
	var mu sync.Mutex
	var order []uint32
	var reqErr error
	if _, err := c.C.RegisterEventHandler(t.Context(), []pmix.Status{code}, nil, func(call *bus.Call, d bus.Done) {
		v, _ := pmix.LookupValue(call.Info, "i")
		i, _ := v.Int()
		if i == n/2 {
			ctx, cancel := context.WithTimeout(context.Background(), e2e.WaitTime)
			err := c.C.NotifyEvent(ctx, -3302, pmix.RangeLocal, nil)
			cancel()
			mu.Lock()
			reqErr = err
			mu.Unlock()
		}
		mu.Lock()
		order = append(order, uint32(i))
		mu.Unlock()
		d(pmix.EventNoActionTaken, nil)
	}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := w.Agents["a1"].Notify(t.Context(), code, pmix.RangeLocal, false, []pmix.Info{pmix.NewInfo("i", pmix.Uint32(uint32(i)))}); err != nil {
			t.Fatal(err)
		}
	}
	clustertest.WaitFor(t, 3*e2e.WaitTime, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(order) < n {
			return fmt.Errorf("%d of %d handlers ran", len(order), n)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if reqErr != nil {
		t.Fatalf("the request from inside a handler: %v", reqErr)
	}
	for i, got := range order {
		if got != uint32(i) {
			t.Fatalf("handlers ran in the order %v", order)
		}
	}
	c.Rec.WaitCount(t, -3302, 1)
}
