package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
)

// The agent says when NATS goes away and comes back, in its log and its
// stats (it used to say nothing for minutes).
func TestNATSHealthVisible(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	var logs clustertest.Buffer
	a := newAgent(t, srv.ClientURL(), "unix:"+filepath.Join(sockDir(t), "a.sock"), func(c *agent.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, a)
	if s := a.Stats(); !s.NATSConnected || s.NATSDisconnects != 0 {
		t.Fatalf("stats at start: %+v", s)
	}
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 20*time.Second, func() error {
		if s := a.Stats(); s.NATSConnected || s.NATSDisconnects == 0 {
			return fmt.Errorf("stats %+v", s)
		}
		if !strings.Contains(logs.String(), "NATS connection lost") {
			return fmt.Errorf("no log line yet")
		}
		return nil
	})
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 20*time.Second, func() error {
		if s := a.Stats(); !s.NATSConnected || s.NATSReconnects == 0 {
			return fmt.Errorf("stats %+v", s)
		}
		if !strings.Contains(logs.String(), "NATS connection back") {
			return fmt.Errorf("no log line yet")
		}
		return nil
	})
}

// The event counters follow what happens on the event path.
func TestStatsCountEvents(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	a := newAgent(t, srv.ClientURL(), "unix:"+filepath.Join(sockDir(t), "a.sock"), nil)
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, a)
	if err := a.RegisterJob(t.Context(), agent.Job{Nspace: "j", Procs: map[pmix.Rank]string{0: "n1", 1: "n1"}}); err != nil {
		t.Fatal(err)
	}
	env, err := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "j", Rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "j", Rank: 1}); err != nil {
		t.Fatal(err)
	}
	c, err := client.Init(t.Context(), client.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Finalize(context.Background()) }()
	ran := make(chan struct{}, 3)
	if _, err := c.RegisterEventHandler(t.Context(), []pmix.Status{-3001}, nil, func(_ *bus.Call, done bus.Done) {
		done(pmix.EventNoActionTaken, nil)
		ran <- struct{}{}
	}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := a.Notify(t.Context(), -3001, pmix.RangeLocal, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		<-ran
	}
	clustertest.WaitFor(t, 10*time.Second, func() error {
		s := a.Stats()
		if s.ClientsRegistered != 2 || s.ClientsAttached != 1 || s.Connections != 1 || s.EventsPublished != 3 ||
			s.EventsReceived != 3 || s.ChainsStarted != 3 || s.ChainsCompleted != 3 || s.Subscriptions == 0 {
			return fmt.Errorf("stats %+v", s)
		}
		return nil
	})
}

// A client's LOCAL event runs its node's chains before its copy comes
// from the events stream, and its copy runs none of them again; a
// registration made afterwards is replayed it from the cache, once.
func TestLocalEventRunsEarly(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	a := newAgent(t, srv.ClientURL(), "unix:"+filepath.Join(sockDir(t), "a.sock"), nil)
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, a)
	if err := a.RegisterJob(t.Context(), agent.Job{Nspace: "j", Procs: map[pmix.Rank]string{0: "n1", 1: "n1"}}); err != nil {
		t.Fatal(err)
	}
	var cs []*client.Client
	for r := range pmix.Rank(2) {
		env, err := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "j", Rank: r})
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.Init(t.Context(), client.WithEnv(env))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Finalize(context.Background()) }()
		cs = append(cs, c)
	}
	var mu sync.Mutex
	got := map[string]int{}
	handler := func(name string) bus.Handler {
		return func(_ *bus.Call, done bus.Done) {
			mu.Lock()
			got[name]++
			mu.Unlock()
			done(pmix.EventNoActionTaken, nil)
		}
	}
	count := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return got[name]
	}
	if _, err := cs[0].RegisterEventHandler(t.Context(), []pmix.Status{-3001}, nil, handler("before")); err != nil {
		t.Fatal(err)
	}
	// The registration's replay ends after its call returns: until then
	// its client's events wait for the copies, whole (not run first).
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if h := a.Stats().RegistrationsHeld; h != 0 {
			return fmt.Errorf("%d registrations held", h)
		}
		return nil
	})
	const n = 5
	for range n {
		if err := cs[1].NotifyEvent(t.Context(), -3001, pmix.RangeLocal, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Each runs first unless the agent's dispatch was busy for 100 ms
	// (a loaded machine): its copy may then come first, and run it.
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if s := a.Stats(); count("before") != n || s.EventsRunEarly == 0 || s.EventsReceived != n {
			return fmt.Errorf("handler ran %d times of %d; stats %+v", count("before"), n, s)
		}
		return nil
	})
	if _, err := cs[0].RegisterEventHandler(t.Context(), []pmix.Status{-3001}, nil, handler("after")); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if c := count("after"); c != n {
			return fmt.Errorf("the later registration was replayed %d of %d", c, n)
		}
		return nil
	})
	if c := count("before"); c != n {
		t.Fatalf("the first registration ran %d times for %d events", c, n)
	}
}
