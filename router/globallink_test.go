package router

import (
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/launch/liveness"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// A GLOBAL event sent again after an outage goes out once per other
// cluster, each copy for that cluster's streams alone: the sender's own
// cache never stores it a second time, whatever its duplicate window.
// Knowing of no other cluster, it goes out once, for every cache.
func TestSendAgainSparesOwnCache(t *testing.T) {
	srv := clustertest.StartServer(t, "B")
	nc := clustertest.Connect(t, srv.ClientURL())
	all, jobs := subjects.CacheSubjects("B")
	from, to := subjects.JobCopyTransform("B")
	cache, err := jetstream.OpenEventCache(t.Context(), nc, jetstream.EventCacheConfig{Cluster: "B", Subjects: all, JobSubjects: jobs, CopyFrom: from, CopyTo: to, MaxMsgs: 100})
	if err != nil {
		t.Fatal(err)
	}
	live, err := nc.SubscribeSync(subjects.Global().Wildcard())
	if err != nil {
		t.Fatal(err)
	}
	a := &Link{nc: nc, cluster: "B"}
	code := pmix.ExternalErrBase - 1
	m := &event.Message{ID: "e1", Code: code, Range: pmix.RangeGlobal, Source: bus.Origin{Cluster: "B", Node: "b1"}, Time: time.Now()}
	stored := func() jetstream.ReadPoint {
		t.Helper()
		// The events stream first: the job-events copy is queued once
		// it is past.
		if err := cache.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		rp, err := cache.Mark(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return rp
	}

	others := []liveness.ClusterInfo{{Cluster: "A", Domain: "A"}, {Cluster: "C", Domain: "C"}}
	if err := a.sendAgain(m, others); err != nil {
		t.Fatal(err)
	}
	if rp := stored(); rp != (jetstream.ReadPoint{}) {
		t.Fatalf("the sender's own cache stored a copy meant for the others: %+v", rp)
	}
	for _, want := range []string{"PMIXBUS_EVENTS_A", "PMIXBUS_EVENTS_C"} {
		msg, err := live.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got := msg.Header.Get("Nats-Expected-Stream"); got != want || msg.Header.Get(CatchupHeader) != "B" || msg.Header.Get(jetstream.MsgIDHeader) != "e1" {
			t.Fatalf("copy headers %v, want it for %s, marked as B's, with the event's id", msg.Header, want)
		}
	}

	if err := a.sendAgain(m, nil); err != nil {
		t.Fatal(err)
	}
	if rp := stored(); rp != (jetstream.ReadPoint{Events: 1, Jobs: 1}) {
		t.Fatalf("with no other cluster known, the copy for all was stored at %+v, want once in each stream", rp)
	}
}
