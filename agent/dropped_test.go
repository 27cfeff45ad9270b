package agent_test

import (
	"fmt"
	"log/slog"
	"os"
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

// TestDroppedJobEventsRecovered (issue 12, item 7): when the agent's inbox
// overflows, NATS drops events (a slow consumer). The job events among
// them are in the cache: an attached client still gets every one, once
// and in order; the drops are counted, job events apart, and logged once
// per burst, not once per drop.
//
// The inbox is made small, so a few thousand events overflow it; the
// events stream is large enough to hold them all (with the default 512 it
// would have evicted most before the recovery read them), or a rank not
// attached yet has them retained in the job-events stream.
// PMIXBUS_SOAK=1 floods with 100,000 events through the default inbox.
func TestDroppedJobEventsRecovered(t *testing.T) {
	t.Run("events stream holds them", func(t *testing.T) {
		testDroppedJobEvents(t, false)
	})
	t.Run("retained for a rank not attached", func(t *testing.T) {
		testDroppedJobEvents(t, true)
	})
}

func testDroppedJobEvents(t *testing.T, retained bool) {
	n, inbox := 5000, 256
	if os.Getenv("PMIXBUS_SOAK") != "" {
		n, inbox = 100_000, 0
	}
	const code = pmix.ExternalErrBase - 81
	srv := clustertest.StartServer(t, "A")
	var logs syncBuffer
	a := newAgent(t, srv.ClientURL(), "unix:"+filepath.Join(sockDir(t), "a.sock"), func(c *agent.Config) {
		if inbox > 0 {
			agent.SetInboxSize(c, inbox)
		}
		c.CacheSize = 2 * n
		if retained {
			c.CacheSize = 16 // evicts nearly everything: only the job-events stream has them
		}
		c.CacheMemory = true
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, a)
	if err := a.RegisterJob(t.Context(), agent.Job{Nspace: "j", Session: "s", Procs: map[pmix.Rank]string{0: "n1", 1: "n1"}}); err != nil {
		t.Fatal(err)
	}
	env, err := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "j", Rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	if retained {
		if _, err := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "j", Rank: 1}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.Init(t.Context(), client.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Finalize(t.Context()) }()
	var mu sync.Mutex
	var got []int64
	if _, err := c.RegisterEventHandler(t.Context(), []pmix.Status{code}, nil, func(call *bus.Call, done bus.Done) {
		v, _ := pmix.LookupValue(call.Info, "test.seq")
		i, _ := v.Int()
		mu.Lock()
		got = append(got, i)
		mu.Unlock()
		done(pmix.EventNoActionTaken, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if retained {
		// The job's retainer exists before the flood.
		clustertest.WaitFor(t, 10*time.Second, func() error {
			if s, err := a.CacheStats(t.Context()); err != nil || s.JobMsgs != 0 {
				return fmt.Errorf("cache %+v, %v", s, err)
			}
			return nil
		})
	}

	start := time.Now()
	for i := range n {
		if _, err := a.Notify(t.Context(), code, pmix.RangeLocal, false, []pmix.Info{pmix.NewInfo("test.seq", pmix.Int64(int64(i)))}); err != nil {
			t.Fatal(err)
		}
	}
	clustertest.WaitFor(t, time.Minute, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) < n {
			return fmt.Errorf("%d of %d job events delivered; stats %+v", len(got), n, a.Stats())
		}
		return nil
	})
	s := a.Stats()
	t.Logf("%d job events in %v: %d dropped by NATS (%d job), %d recovered, in %d recoveries", n, time.Since(start), s.EventsDropped, s.JobEventsDropped, s.JobEventsRecovered, a.Recoveries())
	if s.JobEventsDropped == 0 || s.EventsDropped != s.JobEventsDropped {
		t.Fatalf("the inbox did not overflow, or drops are miscounted: %+v", s)
	}
	if s.JobEventsRecovered != s.JobEventsDropped {
		t.Errorf("recovered %d of %d dropped job events", s.JobEventsRecovered, s.JobEventsDropped)
	}
	mu.Lock()
	for i, seq := range got {
		if seq != int64(i) {
			mu.Unlock()
			t.Fatalf("delivery %d is event #%d (of %d delivered): not each once and in order", i, seq, len(got))
		}
	}
	mu.Unlock()
	// Once per burst: a warning when drops begin, one when the agent has
	// caught up; not one per subscription episode.
	clustertest.WaitFor(t, 10*time.Second, func() error {
		l := logs.String()
		begun, ended := strings.Count(l, "NATS is dropping events"), strings.Count(l, "caught up after dropping")
		if begun == 0 || begun != ended || uint64(begun) > a.Recoveries() {
			return fmt.Errorf("%d bursts logged, %d ends, %d recoveries", begun, ended, a.Recoveries())
		}
		return nil
	})
}
