package events

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// stalledClient attaches with env as a client would, registers a default
// handler, and then never reads again.
func stalledClient(t *testing.T, env map[string]string) net.Conn {
	t.Helper()
	network, addr, err := proto.ParseAddr(env[agent.EnvAgent])
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rank, err := pmix.ParseRank(env[agent.EnvRank])
	if err != nil {
		t.Fatal(err)
	}
	call := func(f *proto.Frame) {
		t.Helper()
		if err := proto.WriteFrame(c, f); err != nil {
			t.Fatal(err)
		}
		r, err := proto.ReadFrame(c, proto.DefaultMaxFrame)
		if err != nil || r.Type != proto.TypeReply || r.Status != pmix.Success {
			t.Fatalf("%v: %+v %v", f.Type, r, err)
		}
	}
	call(&proto.Frame{Type: proto.TypeHello, Seq: 1, Version: proto.Version, Nspace: env[agent.EnvNspace], Rank: rank, Credential: env[agent.EnvCredential]})
	call(&proto.Frame{Type: proto.TypeRegister, Seq: 2})
	return c
}

// TestStalledClientsDoNotStallOthers: three clients that stop reading do
// not delay the events of a client that reads (the agent's writes to them
// used to block its dispatch goroutine for up to the write timeout each);
// they are cut off once their queue is full, and told why.
func TestStalledClientsDoNotStallOthers(t *testing.T) {
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs: []agenttest.Job{
			{Cluster: "A", Nspace: "ok", Nodes: []string{"n1"}},
			{Cluster: "A", Nspace: "stuck", Nodes: []string{"n1", "n1", "n1"}, Detached: true},
		},
		Agent: func(c *agent.Config) {
			c.WriteTimeout = time.Hour // a stalled write would stall dispatch for good
			c.ClientQueueLimit = 1 << 20
		},
	})
	var stalled []net.Conn
	for r := range 3 {
		stalled = append(stalled, stalledClient(t, w.Env(fmt.Sprintf("A:stuck.%d", r))))
	}
	var got atomic.Int64
	healthy := w.Client("A:ok.0")
	if _, err := healthy.RegisterEventHandler(t.Context(), nil, nil, func(_ *bus.Call, done bus.Done) {
		got.Add(1)
		done(pmix.EventNoActionTaken, nil)
	}); err != nil {
		t.Fatal(err)
	}
	a := w.Agent("n1")
	const events = 4000 // well past the stalled clients' queues and socket buffers
	info := []pmix.Info{pmix.NewInfo(pmix.KeyEventDoNotCache, pmix.Bool(true)), pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String(strings.Repeat("x", 1000)))}
	for range events {
		if _, err := a.Notify(t.Context(), -3001, pmix.RangeLocal, false, info); err != nil {
			t.Fatal(err)
		}
	}
	clustertest.WaitFor(t, 60*time.Second, func() error {
		if n := got.Load(); n < events {
			return fmt.Errorf("the reading client got %d of %d events", n, events)
		}
		if s := a.Stats(); s.ClientsAttached != 1 {
			return fmt.Errorf("%d clients still attached", s.ClientsAttached)
		}
		return nil
	})
	// A stalled client that reads again finds, after what was queued for
	// it, why it was cut off.
	_ = stalled[0].SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		f, err := proto.ReadFrame(stalled[0], proto.DefaultMaxFrame)
		if err != nil {
			t.Fatalf("no error frame before the connection ended: %v", err)
		}
		if f.Type == proto.TypeError {
			if f.Status != pmix.ErrOutOfResource || !strings.Contains(f.Message, "not reading") {
				t.Fatalf("error frame %+v", f)
			}
			break
		}
	}
}
