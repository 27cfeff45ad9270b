package event_test

import (
	"testing"
	"time"

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
	cache, err := jetstream.OpenEventCache(t.Context(), nc, jetstream.EventCacheConfig{Cluster: "A", Subjects: all, JobSubjects: jobs, CopyFrom: from, CopyTo: to, MaxMsgs: 100})
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
	if err := cache.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	rp, err := cache.Mark(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := (jetstream.ReadPoint{Events: 2, Jobs: 2}); rp != want {
		t.Fatalf("stored up to %+v, want %+v: one message per node, the second publish a duplicate", rp, want)
	}
}
