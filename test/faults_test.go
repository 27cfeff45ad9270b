package test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// raw is a client speaking the protocol by hand, to misbehave.
type raw struct {
	t *testing.T
	c net.Conn
}

func dialRaw(t *testing.T, a *agent.Agent) *raw {
	t.Helper()
	network, addr, _ := strings.Cut(a.Addr(), ":")
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &raw{t: t, c: c}
}

func (r *raw) send(f *proto.Frame) {
	r.t.Helper()
	if err := proto.WriteFrame(r.c, f); err != nil {
		r.t.Fatal(err)
	}
}

func (r *raw) recv() *proto.Frame {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(waitTime))
	f, err := proto.ReadFrame(r.c, proto.DefaultMaxFrame)
	if err != nil {
		r.t.Fatalf("reading from the agent: %v", err)
	}
	return f
}

// closedByAgent waits until the agent closes the connection.
func (r *raw) closedByAgent() {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(waitTime))
	for {
		if _, err := proto.ReadFrame(r.c, proto.DefaultMaxFrame); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset") {
				return
			}
			r.t.Fatalf("waiting for close: %v", err)
		}
	}
}

// hello attaches as a client of protocol version 1, which gets an invoke
// frame per invocation: what a client written before version 2 sees.
func (r *raw) hello(env map[string]string) {
	r.t.Helper()
	rank, _ := strconv.Atoi(env[agent.EnvRank])
	r.send(&proto.Frame{Type: proto.TypeHello, Seq: 1, Version: 1, Nspace: env[agent.EnvNspace], Rank: pmix.Rank(rank), Credential: env[agent.EnvCredential]})
	if f := r.recv(); f.Type != proto.TypeReply || f.Status != pmix.Success {
		r.t.Fatalf("hello refused: %+v", f)
	}
}

// TestClientDiesMidChain: a client whose handler is in flight when it dies
// is passed over with PMIX_ERR_LOST_CONNECTION_TO_CLIENT; its chain ends
// and is reported, and the other receivers are untouched.
func TestClientDiesMidChain(t *testing.T) {
	w := newWorld(t)
	a := w.agents["a2"]
	if err := a.RegisterJob(t.Context(), agent.Job{Nspace: "doomed", Session: "s1", Procs: map[pmix.Rank]string{0: "a2"}}); err != nil {
		t.Fatal(err)
	}
	env, err := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "doomed", Rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, a)
	r.hello(env)
	r.send(&proto.Frame{Type: proto.TypeRegister, Seq: 2, Codes: []pmix.Status{pmix.EventNodeDown}, Info: []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("slow"))}})
	if f := r.recv(); f.Err() != nil {
		t.Fatal(f.Err())
	}
	peer := w.client("A:jobA.2")
	peer.register(t, []pmix.Status{pmix.EventNodeDown}, nil, pmix.EventNoActionTaken)
	outcomes := make(chan event.OutcomeReport, 8)
	a.OnOutcome(func(o event.OutcomeReport) { outcomes <- o })

	id, err := w.agents["a1"].Notify(t.Context(), pmix.EventNodeDown, pmix.RangeGlobal, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f := r.recv(); f.Type != proto.TypeInvoke {
		t.Fatalf("want an invoke, got %+v", f)
	}
	r.c.Close() // dies without answering

	deadline := time.After(waitTime)
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
			peer.rec.waitCount(t, pmix.EventNodeDown, 1)
			return
		case <-deadline:
			t.Fatal("the dead client's chain never ended")
		}
	}
}

// TestAgentRestartLosesConnection: when the agent goes away its clients'
// own PMIX_ERR_LOST_CONNECTION handlers run, and their calls fail with it.
func TestAgentRestartLosesConnection(t *testing.T) {
	w := newWorld(t)
	c := w.client("B:jobB.2")
	lost := make(chan string, 2)
	if _, err := c.c.RegisterEventHandler(t.Context(), []pmix.Status{pmix.ErrLostConnection}, nil, func(call *bus.Call, done bus.Done) {
		lost <- call.Name
		done(pmix.EventActionComplete, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.agents["b2"].Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(waitTime):
		t.Fatal("no PMIX_ERR_LOST_CONNECTION event")
	}
	if err := c.c.NotifyEvent(t.Context(), 1, pmix.RangeGlobal, nil); !errors.Is(err, pmix.ErrLostConnection) {
		t.Fatalf("notify after loss: %v", err)
	}
	// A new agent on the same socket serves new clients.
	w.startAgent("b2")
	if err := w.agents["b2"].RegisterJob(t.Context(), agent.Job{Nspace: "jobB", Session: "s1", Procs: map[pmix.Rank]string{2: "b2"}}); err != nil {
		t.Fatal(err)
	}
	again := w.attach("B", pmix.Proc{Nspace: "jobB", Rank: 2}, "b2")
	again.register(t, nil, nil, pmix.EventNoActionTaken)
	w.waitSourced()
	if err := w.client("A:jobA.0").c.NotifyEvent(t.Context(), 7, pmix.RangeGlobal, nil); err != nil {
		t.Fatal(err)
	}
	again.rec.waitCount(t, 7, 1)
}

// TestNoSpoofing: a client cannot attach as another rank, cannot reuse a
// credential, and the source of its events is what the agent stamps,
// whatever its frames claim.
func TestNoSpoofing(t *testing.T) {
	w := newWorld(t)
	a := w.agents["a1"]
	if err := a.RegisterJob(t.Context(), agent.Job{Nspace: "spoof", Session: "s1", Procs: map[pmix.Rank]string{0: "a1", 1: "a1"}}); err != nil {
		t.Fatal(err)
	}
	env0, _ := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "spoof", Rank: 0})
	env1, _ := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "spoof", Rank: 1})

	// Rank 0's credential does not make anyone rank 1.
	r := dialRaw(t, a)
	r.send(&proto.Frame{Type: proto.TypeHello, Seq: 1, Version: proto.Version, Nspace: "spoof", Rank: 1, Credential: env0[agent.EnvCredential]})
	if f := r.recv(); f.Type != proto.TypeError || f.Status != pmix.ErrInvalidCred {
		t.Fatalf("attach as another rank: %+v", f)
	}
	r.closedByAgent()

	// A second attach with a credential in use is refused.
	r1 := dialRaw(t, a)
	r1.hello(env1)
	r2 := dialRaw(t, a)
	r2.send(&proto.Frame{Type: proto.TypeHello, Seq: 1, Version: proto.Version, Nspace: "spoof", Rank: 1, Credential: env1[agent.EnvCredential]})
	if f := r2.recv(); f.Status != pmix.ErrInvalidOperation {
		t.Fatalf("second attach: %+v", f)
	}

	// A notify that claims another source is stamped with the real one.
	rcv := w.client("A:jobA.0")
	rcv.register(t, []pmix.Status{77}, nil, pmix.EventNoActionTaken)
	r1.send(&proto.Frame{Type: proto.TypeNotify, Seq: 2, Code: 77, Range: pmix.RangeGlobal, Source: pmix.Proc{Nspace: "jobA", Rank: 3}})
	if f := r1.recv(); f.Err() != nil {
		t.Fatal(f.Err())
	}
	rcv.rec.waitCount(t, 77, 1)
	if src := rcv.rec.of(77)[0].Source; src != (pmix.Proc{Nspace: "spoof", Rank: 1}) {
		t.Fatalf("source %v", src)
	}
}

// TestBadFrames: malformed and oversized frames get an error frame and the
// connection is dropped; the agent goes on serving everyone else.
func TestBadFrames(t *testing.T) {
	w := newWorld(t)
	a := w.agents["a1"]
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
			r := dialRaw(t, a)
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
				r.hello(env)
			}
			if _, err := r.c.Write(c.bytes); err != nil {
				t.Fatal(err)
			}
			f := r.recv()
			if f.Type != proto.TypeError || f.Status != c.status {
				t.Fatalf("got %v %v %q, want an error frame with %v", f.Type, f.Status, f.Message, c.status)
			}
			r.closedByAgent()
		})
	}
	// Still serving.
	rcv := w.client("A:jobA.1")
	rcv.register(t, []pmix.Status{5}, nil, pmix.EventNoActionTaken)
	if err := w.client("A:jobA.0").c.NotifyEvent(t.Context(), 5, pmix.RangeLocal, nil); err != nil {
		t.Fatal(err)
	}
	rcv.rec.waitCount(t, 5, 1)
}

func mustFrame(f *proto.Frame) []byte {
	var b bytes.Buffer
	if err := proto.WriteFrame(&b, f); err != nil {
		panic(err)
	}
	return b.Bytes()
}
