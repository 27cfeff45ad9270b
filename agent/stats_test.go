package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
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
