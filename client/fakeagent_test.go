package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

const waitTime = 10 * time.Second

// fakeAgent plays the agent's side of the protocol for one client, over
// loopback TCP: it accepts the hello, answers registrations (handing out
// ids), notifications and finalize, and lets a test send whatever it likes,
// invokes and broken frames included.
type fakeAgent struct {
	t    *testing.T
	ln   net.Listener
	conn chan net.Conn // the accepted connection, once

	wmu sync.Mutex
	c   net.Conn

	mu      sync.Mutex
	nextID  uint64
	ids     map[string]uint64 // agent registration id by handler name
	seq     uint64
	invokes chan *proto.Frame // invoke-done frames from the client
	// received: the notify and invoke-done frames from the client, in
	// the order they arrived.
	received []*proto.Frame
	done     chan struct{}
}

// startFakeAgent starts the fake agent and attaches a client to it.
func startFakeAgent(t *testing.T, opts ...Option) (*fakeAgent, *Client) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &fakeAgent{t: t, ln: ln, conn: make(chan net.Conn, 1), ids: map[string]uint64{}, invokes: make(chan *proto.Frame, 16), done: make(chan struct{})}
	go a.serve()
	t.Cleanup(func() {
		ln.Close()
		a.wmu.Lock()
		if a.c != nil {
			a.c.Close()
		}
		a.wmu.Unlock()
		<-a.done
	})
	env := map[string]string{EnvNspace: "job1", EnvRank: "0", EnvAgent: "tcp:" + ln.Addr().String(), EnvCredential: "00"}
	c, err := Init(t.Context(), append([]Option{WithEnv(env)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTime)
		defer cancel()
		_ = c.Finalize(ctx)
	})
	return a, c
}

func (a *fakeAgent) serve() {
	defer close(a.done)
	c, err := a.ln.Accept()
	if err != nil {
		return
	}
	a.wmu.Lock()
	a.c = c
	a.wmu.Unlock()
	r := proto.NewReader(c, proto.DefaultMaxFrame)
	for {
		f, err := r.ReadFrame()
		if err != nil {
			return
		}
		reply := &proto.Frame{Type: proto.TypeReply, Seq: f.Seq}
		if f.Type == proto.TypeNotify || f.Type == proto.TypeInvokeDone {
			a.mu.Lock()
			a.received = append(a.received, f)
			a.mu.Unlock()
		}
		switch f.Type {
		case proto.TypeHello:
			reply.Info = []pmix.Info{
				pmix.NewInfo(pmix.KeyClusterID, pmix.String("A")),
				pmix.NewInfo(pmix.KeyHostname, pmix.String("n1")),
				pmix.NewInfo(pmix.KeySessionID, pmix.String("s1")),
			}
		case proto.TypeRegister:
			a.mu.Lock()
			a.nextID++
			reply.ID = a.nextID
			if v, ok := pmix.LookupValue(f.Info, pmix.KeyEventHdlrName); ok {
				name, _ := v.Str()
				a.ids[name] = a.nextID
			}
			a.mu.Unlock()
		case proto.TypeInvokeDone:
			a.invokes <- f
			continue
		}
		a.write(proto.AppendFrame(nil, reply))
		if f.Type == proto.TypeFinalize {
			return
		}
	}
}

func (a *fakeAgent) write(b []byte, err error) {
	if err != nil {
		a.t.Error(err)
		return
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if _, err := a.c.Write(b); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
		a.t.Logf("fake agent write: %v", err)
	}
}

// invoke asks the client to run the handler registered under name and
// returns its answer.
func (a *fakeAgent) invoke(name string, code pmix.Status) *proto.Frame {
	a.t.Helper()
	a.send(name, code)
	return a.answer()
}

// send asks the client to run the handler registered under name.
func (a *fakeAgent) send(name string, code pmix.Status) {
	a.mu.Lock()
	a.seq++
	f := &proto.Frame{Type: proto.TypeInvoke, Seq: a.seq, ID: a.ids[name], Name: name, Code: code}
	a.mu.Unlock()
	a.write(proto.AppendFrame(nil, f))
}

// receivedFrames returns the notify and invoke-done frames received so far.
func (a *fakeAgent) receivedFrames() []*proto.Frame {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.received)
}

// waitUntil polls cond until it holds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	clustertest.WaitFor(t, waitTime, func() error {
		if !cond() {
			return fmt.Errorf("not yet: %s", what)
		}
		return nil
	})
}

// answer waits for the next invoke-done.
func (a *fakeAgent) answer() *proto.Frame {
	a.t.Helper()
	select {
	case f := <-a.invokes:
		return f
	case <-time.After(waitTime):
		a.t.Fatal("no invoke-done from the client")
		return nil
	}
}

// garble sends a frame whose length prefix is right and whose body is not
// a frame.
func (a *fakeAgent) garble() { a.write(lengthPrefixed(3, []byte{0xc1, 0xc1, 0xc1}), nil) }

// oversize sends a length prefix beyond the client's limit.
func (a *fakeAgent) oversize() { a.write(lengthPrefixed(proto.DefaultMaxFrame+1, nil), nil) }

func lengthPrefixed(n uint32, body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, n), body...)
}
