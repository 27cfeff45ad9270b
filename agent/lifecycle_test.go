package agent_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
)

func sockDir(t *testing.T) string { return agenttest.SocketDir(t) }

func newAgent(t *testing.T, url, listen string, adjust func(*agent.Config)) *agent.Agent {
	t.Helper()
	cfg := agent.DefaultConfig("A", "n1")
	cfg.URL = url
	cfg.Listen = listen
	cfg.Logger = clustertest.Logger(t)
	if adjust != nil {
		adjust(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func shutdown(t *testing.T, a *agent.Agent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// Shutdown keeps to its context even when NATS is gone and clients are
// attached with registrations (it used to take 20 s for a 1 s context:
// every client's detach flushed NATS and cleaned up its data, one after
// another, each waiting for a server that was not there).
func TestShutdownHonoursContext(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	a := newAgent(t, srv.ClientURL(), "unix:"+filepath.Join(sockDir(t), "a.sock"), nil)
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := a.RegisterJob(t.Context(), agent.Job{Nspace: "j", Procs: map[pmix.Rank]string{0: "n1", 1: "n1", 2: "n1"}}); err != nil {
		t.Fatal(err)
	}
	for r := range pmix.Rank(3) {
		env, err := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "j", Rank: r})
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.Init(t.Context(), client.WithEnv(env))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Finalize(context.Background()) })
		if _, err := c.RegisterEventHandler(t.Context(), []pmix.Status{-3001}, nil, func(_ *bus.Call, done bus.Done) { done(pmix.EventNoActionTaken, nil) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err := a.Shutdown(ctx)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Shutdown with a 1 s context took %v (err %v)", took, err)
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v", err)
	}
}

// A connection that never says hello is closed by Shutdown, which does not
// wait for the hello timeout.
func TestShutdownClosesConnectionsInHello(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	a := newAgent(t, srv.ClientURL(), "unix:"+filepath.Join(sockDir(t), "a.sock"), func(c *agent.Config) { c.HelloTimeout = time.Hour })
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", strings.TrimPrefix(a.Addr(), "unix:"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if n := a.OpenConns(); n != 1 {
			return fmt.Errorf("%d connections accepted", n)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a connection in hello: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection still open after Shutdown")
	}
}

// A Start that fails undoes what it started: no goroutine is left behind.
func TestFailedStartLeavesNothing(t *testing.T) {
	clustertest.CheckGoroutines(t)
	srv := clustertest.StartServer(t, "A")
	a := newAgent(t, srv.ClientURL(), "unix:/nonexistent-dir/pmixbus/a.sock", nil)
	if err := a.Start(t.Context()); err == nil {
		shutdown(t, a)
		t.Fatal("Start listening in a missing directory succeeded")
	}
}

// After Shutdown every host method says so.
func TestHostMethodsAfterShutdown(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	a := newAgent(t, srv.ClientURL(), "unix:"+filepath.Join(sockDir(t), "a.sock"), nil)
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	p := pmix.Proc{Nspace: "j", Rank: 0}
	if err := a.RegisterJob(t.Context(), agent.Job{Nspace: "j", Procs: map[pmix.Rank]string{0: "n1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RegisterClient(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	shutdown(t, a)
	checks := map[string]error{
		"RegisterJob":      a.RegisterJob(t.Context(), agent.Job{Nspace: "k"}),
		"DeregisterJob":    a.DeregisterJob(t.Context(), "j"),
		"DeregisterClient": a.DeregisterClient(t.Context(), p),
		"OnRMEvent":        a.OnRMEvent(t.Context(), nil),
	}
	_, checks["RegisterClient"] = a.RegisterClient(t.Context(), pmix.Proc{Nspace: "j", Rank: 1})
	_, checks["Notify"] = a.Notify(t.Context(), -3001, pmix.RangeLocal, false, nil)
	for name, err := range checks {
		if !errors.Is(err, agent.ErrClosed) {
			t.Errorf("%s after Shutdown: %v, want ErrClosed", name, err)
		}
	}
}

// A second agent for the same socket refuses to start and leaves the
// first one's socket alone.
func TestSecondAgentOnSameSocketRefused(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	listen := "unix:" + filepath.Join(sockDir(t), "a.sock")
	a := newAgent(t, srv.ClientURL(), listen, nil)
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, a)
	b := newAgent(t, srv.ClientURL(), listen, nil)
	err := b.Start(t.Context())
	if err == nil {
		shutdown(t, b)
		t.Fatal("second agent started on a socket in use")
	}
	if !strings.Contains(err.Error(), "another agent is listening on") {
		t.Fatalf("second agent: %v", err)
	}
	c := attachOne(t, a) // the first agent's socket still works
	_ = c.Finalize(t.Context())
}

// attachOne registers job j, one rank on n1, with a and attaches its
// client.
func attachOne(t *testing.T, a *agent.Agent) *client.Client {
	t.Helper()
	if err := a.RegisterJob(t.Context(), agent.Job{Nspace: "j", Procs: map[pmix.Rank]string{0: "n1"}}); err != nil {
		t.Fatal(err)
	}
	env, err := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "j", Rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Init(t.Context(), client.WithEnv(env))
	if err != nil {
		t.Fatalf("attaching j.0: %v", err)
	}
	return c
}

// A socket file left by an agent that died is taken over.
func TestStaleSocketTakenOver(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	path := filepath.Join(sockDir(t), "a.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the file stays, nobody listens
	a := newAgent(t, srv.ClientURL(), "unix:"+path, nil)
	if err := a.Start(t.Context()); err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	shutdown(t, a)
}
