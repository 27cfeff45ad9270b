package jetstream

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
)

const waitTime = 10 * time.Second

func openTestCache(t *testing.T, maxMsgs int64) (*EventCache, *nats.Conn) {
	t.Helper()
	s := clustertest.StartServer(t, "A")
	nc := clustertest.Connect(t, s.ClientURL())
	c, err := OpenEventCache(t.Context(), nc, EventCacheConfig{Cluster: "A", Subjects: []string{"ev.*"}, JobSubjects: []string{"job.*"}, MaxMsgs: maxMsgs})
	if err != nil {
		t.Fatal(err)
	}
	return c, nc
}

func publish(t *testing.T, nc *nats.Conn, subj, id string) {
	t.Helper()
	m := nats.NewMsg(subj)
	m.Header.Set(MsgIDHeader, id)
	m.Data = []byte(id)
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
}

// A read right after a burst of publishes sees all of them, in order:
// Read waits for the streams to store what reached the server first.
func TestReadSeesEverythingPublishedBefore(t *testing.T) {
	c, nc := openTestCache(t, 10000)
	const n = 3000
	for i := range n {
		publish(t, nc, "ev.x", fmt.Sprint(i))
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := c.Read(t.Context(), []string{"ev.x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("read %d of %d", len(got), n)
	}
	for i, m := range got {
		if m.ID != fmt.Sprint(i) {
			t.Fatalf("message %d is %s", i, m.ID)
		}
	}
}

// The events stream keeps the newest MaxMsgs and counts the rest as
// evicted; a job event retained in the job stream and evicted from the
// events stream comes back first, once.
func TestEvictionAndRetainedOrder(t *testing.T) {
	c, nc := openTestCache(t, 3)
	var mu sync.Mutex
	var held []*RetainedMsg
	r, err := c.Retain(t.Context(), "keep", []string{"job.*"}, time.Minute, func(m *RetainedMsg) {
		mu.Lock()
		held = append(held, m)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	publish(t, nc, "ev.j", "job-0")
	publish(t, nc, "job.j", "job-0") // its copy, as an agent publishes it
	for i := range 5 {
		publish(t, nc, "ev.e", fmt.Sprint("env-", i))
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	st, err := c.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Msgs != 3 || st.Evicted != 3 || st.JobMsgs != 1 {
		t.Fatalf("stats %+v; want 3 cached, 3 evicted, 1 job event", st)
	}
	got, err := c.Read(t.Context(), []string{"ev.*"}, []string{"job.*"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range got {
		ids = append(ids, m.ID)
	}
	if fmt.Sprint(ids) != "[job-0 env-2 env-3 env-4]" {
		t.Fatalf("read %v", ids)
	}
	clustertest.WaitFor(t, waitTime, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(held) == 0 {
			return fmt.Errorf("retainer saw nothing")
		}
		return nil
	})
	mu.Lock()
	first := held[0]
	mu.Unlock()
	if err := first.Ack(); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, waitTime, func() error {
		st, err := c.Stats(t.Context())
		if err != nil {
			return err
		}
		if st.JobMsgs != 0 {
			return fmt.Errorf("%d job events still retained", st.JobMsgs)
		}
		return nil
	})
}
