package e2e

import (
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// Raw is a client speaking the protocol by hand, to misbehave.
type Raw struct {
	t *testing.T
	C net.Conn
}

// DialRaw connects to agent a's socket; the connection is closed when
// the test ends.
func DialRaw(t *testing.T, a *agent.Agent) *Raw {
	t.Helper()
	network, addr, _ := strings.Cut(a.Addr(), ":")
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &Raw{t: t, C: c}
}

// Send writes f; a failure fails the test.
func (r *Raw) Send(f *proto.Frame) {
	r.t.Helper()
	if err := proto.WriteFrame(r.C, f); err != nil {
		r.t.Fatal(err)
	}
}

// Recv reads the next frame, WaitTime at most; a failure fails the test.
func (r *Raw) Recv() *proto.Frame {
	r.t.Helper()
	_ = r.C.SetReadDeadline(time.Now().Add(WaitTime))
	f, err := proto.ReadFrame(r.C, proto.DefaultMaxFrame)
	if err != nil {
		r.t.Fatalf("reading from the agent: %v", err)
	}
	return f
}

// ClosedByAgent waits until the agent closes the connection.
func (r *Raw) ClosedByAgent() {
	r.t.Helper()
	_ = r.C.SetReadDeadline(time.Now().Add(WaitTime))
	for {
		if _, err := proto.ReadFrame(r.C, proto.DefaultMaxFrame); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset") {
				return
			}
			r.t.Fatalf("waiting for close: %v", err)
		}
	}
}

// Hello attaches as a client of protocol version 1, which gets an invoke
// frame per invocation: what a client written before version 2 sees.
func (r *Raw) Hello(env map[string]string) {
	r.t.Helper()
	rank, _ := strconv.Atoi(env[agent.EnvRank])
	r.Send(&proto.Frame{Type: proto.TypeHello, Seq: 1, Version: 1, Nspace: env[agent.EnvNspace], Rank: pmix.Rank(rank), Credential: env[agent.EnvCredential]})
	if f := r.Recv(); f.Type != proto.TypeReply || f.Status != pmix.Success {
		r.t.Fatalf("hello refused: %+v", f)
	}
}
