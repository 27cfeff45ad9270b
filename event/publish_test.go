package event_test

import (
	"fmt"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// TestPublishStoresEachScope: an event published to two scopes (CUSTOM
// to ranks on two nodes) is stored once per scope in the events stream and
// in the job-events stream, and published again it is a duplicate in both.
func TestPublishStoresEachScope(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	nc := clustertest.Connect(t, srv.ClientURL())
	all, jobs := subjects.CacheSubjects("A")
	from, to := subjects.JobCopyTransform("A")
	_, err := jetstream.OpenEventCache(t.Context(), nc, jetstream.EventCacheConfig{Cluster: "A", Subjects: all, JobSubjects: jobs, CopyFrom: from, CopyTo: to, MaxMsgs: 100})
	if err != nil {
		t.Fatal(err)
	}
	m := &event.Message{ID: "e1", Code: pmix.ExternalErrBase - 1, Range: pmix.RangeCustom, Time: time.Now()}
	scopes := []subjects.Scope{subjects.Agent("A", "n1"), subjects.Agent("A", "n2")}
	for range 2 {
		if err := event.Publish(nc, m, scopes); err != nil {
			t.Fatal(err)
		}
	}
	// A third publish, of another event, after them on the same
	// connection: once both streams have it, they have handled the two
	// publishes before it, the second a duplicate.
	if err := event.Publish(nc, &event.Message{ID: "e2", Code: pmix.ExternalErrBase - 1, Range: pmix.RangeCustom, Time: time.Now()}, scopes[:1]); err != nil {
		t.Fatal(err)
	}
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	lastOf := func(stream string) uint64 {
		st, err := js.Stream(t.Context(), stream)
		if err != nil {
			return 0
		}
		info, err := st.Info(t.Context())
		if err != nil {
			return 0
		}
		return info.State.LastSeq
	}
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if ev, jobs := lastOf(jetstream.EventStreamName("A")), lastOf(jetstream.JobStreamName("A")); ev != 3 || jobs != 3 {
			return fmt.Errorf("stored up to %d and %d, want 3 and 3: one message per node, the second publish a duplicate", ev, jobs)
		}
		return nil
	})
}
