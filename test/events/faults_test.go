package events

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// TestClientDiesMidChain: a client whose handler is in flight when it dies
// is passed over with PMIX_ERR_LOST_CONNECTION_TO_CLIENT; its chain ends
// and is reported, and the other receivers are untouched.
func TestClientDiesMidChain(t *testing.T) {
	w := e2e.NewWorld(t)
	a := w.Agents["a2"]
	if err := a.RegisterJob(t.Context(), agent.Job{Nspace: "doomed", Session: "s1", Procs: map[pmix.Rank]string{0: "a2"}}); err != nil {
		t.Fatal(err)
	}
	env, err := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "doomed", Rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	r := e2e.DialRaw(t, a)
	r.Hello(env)
	r.Send(&proto.Frame{Type: proto.TypeRegister, Seq: 2, Codes: []pmix.Status{pmix.EventNodeDown}, Info: []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("slow"))}})
	if f := r.Recv(); f.Err() != nil {
		t.Fatal(f.Err())
	}
	peer := w.Client("A:jobA.2")
	peer.Register(t, []pmix.Status{pmix.EventNodeDown}, nil, pmix.EventNoActionTaken)
	outcomes := make(chan event.OutcomeReport, 8)
	a.OnOutcome(func(o event.OutcomeReport) { outcomes <- o })

	id, err := w.Agents["a1"].Notify(t.Context(), pmix.EventNodeDown, pmix.RangeGlobal, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f := r.Recv(); f.Type != proto.TypeInvoke {
		t.Fatalf("want an invoke, got %+v", f)
	}
	r.C.Close() // dies without answering

	deadline := time.After(e2e.WaitTime)
	for {
		select {
		case o := <-outcomes:
			if o.Client.Nspace != "doomed" {
				continue
			}
			if o.EventID != id {
				t.Fatalf("outcome of event %q, want %q", o.EventID, id)
			}
			if len(o.Outcome.Ran) != 1 || o.Outcome.Ran[0].Status != pmix.ErrLostConnectionToClient {
				t.Fatalf("outcome %+v", o.Outcome)
			}
			peer.Rec.WaitCount(t, pmix.EventNodeDown, 1)
			return
		case <-deadline:
			t.Fatal("the dead client's chain never ended")
		}
	}
}

// TestAgentRestartLosesConnection: when the agent goes away its clients'
// own PMIX_ERR_LOST_CONNECTION handlers run, and their calls fail with it.
func TestAgentRestartLosesConnection(t *testing.T) {
	w := e2e.NewWorld(t)
	c := w.Client("B:jobB.2")
	lost := make(chan string, 2)
	if _, err := c.C.RegisterEventHandler(t.Context(), []pmix.Status{pmix.ErrLostConnection}, nil, func(call *bus.Call, done bus.Done) {
		lost <- call.Name
		done(pmix.EventActionComplete, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Agents["b2"].Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(e2e.WaitTime):
		t.Fatal("no PMIX_ERR_LOST_CONNECTION event")
	}
	if err := c.C.NotifyEvent(t.Context(), 1, pmix.RangeGlobal, nil); !errors.Is(err, pmix.ErrLostConnection) {
		t.Fatalf("notify after loss: %v", err)
	}
	// A new agent on the same socket serves new clients.
	w.StartAgent("b2")
	if err := w.Agents["b2"].RegisterJob(t.Context(), agent.Job{Nspace: "jobB", Session: "s1", Procs: map[pmix.Rank]string{2: "b2"}}); err != nil {
		t.Fatal(err)
	}
	again := w.Attach("B", pmix.Proc{Nspace: "jobB", Rank: 2}, "b2")
	again.Register(t, nil, nil, pmix.EventNoActionTaken)
	w.WaitSourced()
	if err := w.Client("A:jobA.0").C.NotifyEvent(t.Context(), 7, pmix.RangeGlobal, nil); err != nil {
		t.Fatal(err)
	}
	again.Rec.WaitCount(t, 7, 1)
}

// TestNoSpoofing: a client cannot attach as another rank, cannot reuse a
// credential, and the source of its events is what the agent stamps,
// whatever its frames claim.
func TestNoSpoofing(t *testing.T) {
	w := e2e.NewWorld(t)
	a := w.Agents["a1"]
	if err := a.RegisterJob(t.Context(), agent.Job{Nspace: "spoof", Session: "s1", Procs: map[pmix.Rank]string{0: "a1", 1: "a1"}}); err != nil {
		t.Fatal(err)
	}
	env0, _ := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "spoof", Rank: 0})
	env1, _ := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "spoof", Rank: 1})

	// Rank 0's credential does not make anyone rank 1.
	r := e2e.DialRaw(t, a)
	r.Send(&proto.Frame{Type: proto.TypeHello, Seq: 1, Version: proto.Version, Nspace: "spoof", Rank: 1, Credential: env0[agent.EnvCredential]})
	if f := r.Recv(); f.Type != proto.TypeError || f.Status != pmix.ErrInvalidCred {
		t.Fatalf("attach as another rank: %+v", f)
	}
	r.ClosedByAgent()

	// A second attach with a credential in use is refused.
	r1 := e2e.DialRaw(t, a)
	r1.Hello(env1)
	r2 := e2e.DialRaw(t, a)
	r2.Send(&proto.Frame{Type: proto.TypeHello, Seq: 1, Version: proto.Version, Nspace: "spoof", Rank: 1, Credential: env1[agent.EnvCredential]})
	if f := r2.Recv(); f.Status != pmix.ErrInvalidOperation {
		t.Fatalf("second attach: %+v", f)
	}

	// A notify that claims another source is stamped with the real one.
	rcv := w.Client("A:jobA.0")
	rcv.Register(t, []pmix.Status{77}, nil, pmix.EventNoActionTaken)
	r1.Send(&proto.Frame{Type: proto.TypeNotify, Seq: 2, Code: 77, Range: pmix.RangeGlobal, Source: pmix.Proc{Nspace: "jobA", Rank: 3}})
	if f := r1.Recv(); f.Err() != nil {
		t.Fatal(f.Err())
	}
	rcv.Rec.WaitCount(t, 77, 1)
	if src := rcv.Rec.Of(77)[0].Source; src != (pmix.Proc{Nspace: "spoof", Rank: 1}) {
		t.Fatalf("source %v", src)
	}
}

// TestBadFrames: malformed and oversized frames get an error frame and the
// connection is dropped; the agent goes on serving everyone else.
func TestBadFrames(t *testing.T) {
	w := e2e.NewWorld(t)
	a := w.Agents["a1"]
	lenPrefix := func(n uint32, body []byte) []byte {
		var b bytes.Buffer
		_ = binary.Write(&b, binary.BigEndian, n)
		b.Write(body)
		return b.Bytes()
	}
	cases := []struct {
		name   string
		hello  bool
		bytes  []byte
		status pmix.Status
	}{
		{"garbage before hello", false, lenPrefix(3, []byte{0xc1, 0xc1, 0xc1}), pmix.ErrUnpackFailure},
		{"oversized before hello", false, lenPrefix(1<<30, nil), proto.ErrFrameTooLarge},
		{"garbage after hello", true, lenPrefix(2, []byte{0x92, 0x01}), pmix.ErrUnpackFailure},
		{"oversized after hello", true, lenPrefix(64<<20, nil), proto.ErrFrameTooLarge},
		{"not a hello first", false, mustFrame(&proto.Frame{Type: proto.TypeNotify, Seq: 1, Code: 1, Range: pmix.RangeGlobal}), pmix.ErrInvalidOperation},
		{"agent-only frame type", true, mustFrame(&proto.Frame{Type: proto.TypeInvoke, Seq: 5}), pmix.ErrInvalidOperation},
		{"version below the oldest", false, mustFrame(&proto.Frame{Type: proto.TypeHello, Seq: 1, Version: proto.MinVersion - 1}), pmix.ErrNotSupported},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e2e.DialRaw(t, a)
			if c.hello {
				p := pmix.Proc{Nspace: "jobA", Rank: pmix.Rank(0)}
				nspace := "bad" + strconv.Itoa(i)
				if err := a.RegisterJob(t.Context(), agent.Job{Nspace: nspace, Procs: map[pmix.Rank]string{0: "a1"}}); err != nil {
					t.Fatal(err)
				}
				p.Nspace = nspace
				env, err := a.RegisterClient(t.Context(), p)
				if err != nil {
					t.Fatal(err)
				}
				r.Hello(env)
			}
			if _, err := r.C.Write(c.bytes); err != nil {
				t.Fatal(err)
			}
			f := r.Recv()
			if f.Type != proto.TypeError || f.Status != c.status {
				t.Fatalf("got %v %v %q, want an error frame with %v", f.Type, f.Status, f.Message, c.status)
			}
			r.ClosedByAgent()
		})
	}
	// Still serving.
	rcv := w.Client("A:jobA.1")
	rcv.Register(t, []pmix.Status{5}, nil, pmix.EventNoActionTaken)
	if err := w.Client("A:jobA.0").C.NotifyEvent(t.Context(), 5, pmix.RangeLocal, nil); err != nil {
		t.Fatal(err)
	}
	rcv.Rec.WaitCount(t, 5, 1)
}

func mustFrame(f *proto.Frame) []byte {
	var b bytes.Buffer
	if err := proto.WriteFrame(&b, f); err != nil {
		panic(err)
	}
	return b.Bytes()
}
