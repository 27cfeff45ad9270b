package router

import (
	"errors"
	"fmt"
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
	all, jobs := subjects.CacheSubjects("B", false)
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
	others := []liveness.ClusterInfo{{Cluster: "A", Domain: "A"}, {Cluster: "C", Domain: "C"}}
	if err := a.sendAgain(m, others); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PMIXBUS_EVENTS_A", "PMIXBUS_EVENTS_C"} {
		msg, err := live.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got := msg.Header.Get("Nats-Expected-Stream"); got != want || msg.Header.Get(CatchupHeader) != "B" || msg.Header.Get(jetstream.MsgIDHeader) != event.MsgID("e1", subjects.GlobalFrom("B")) {
			t.Fatalf("copy headers %v, want it for %s, marked as B's, with the event's id", msg.Header, want)
		}
	}

	// Another event, for all: stored in the sender's cache, and first
	// there, the copies meant for the others before it not stored.
	m2 := *m
	m2.ID = "e2"
	if err := a.sendAgain(&m2, nil); err != nil {
		t.Fatal(err)
	}
	var got []jetstream.CachedMsg
	clustertest.WaitFor(t, 10*time.Second, func() error {
		got = nil
		if _, err := cache.ReadSeqs(t.Context(), 1, 10, nil, func(b []jetstream.CachedMsg) error {
			got = append(got, b...)
			return nil
		}); err != nil {
			return err
		}
		if len(got) == 0 {
			return fmt.Errorf("nothing stored yet")
		}
		return nil
	})
	if len(got) != 1 || got[0].ID != event.MsgID("e2", subjects.GlobalFrom("B")) {
		t.Fatalf("the sender's own cache stored %+v; want the event for all alone", got)
	}
}

// With the other clusters' GLOBAL events sourced, a cacheable GLOBAL event
// published while the link is down is not held for sending again (the
// others source it from this cluster's stream); a transient one still
// says it reached this cluster only.
func TestSourcedLinkHoldsNothing(t *testing.T) {
	l := NewLink(LinkConfig{Cluster: "B"})
	l.SourceGlobal(&jetstream.EventCache{})
	l.watched.Store(true)
	l.down.Store(true)
	m := &event.Message{ID: "e1", Code: pmix.ExternalErrBase - 1, Range: pmix.RangeGlobal, Source: bus.Origin{Cluster: "B", Node: "b1"}, Time: time.Now()}
	if err := l.sent(m); err != nil {
		t.Fatalf("a cacheable GLOBAL event while the link is down: %v", err)
	}
	if st := l.Stats(); st.Held != 0 || !st.Down {
		t.Errorf("stats %+v, want nothing held", st)
	}
	m.Info = []pmix.Info{pmix.NewInfo(pmix.KeyEventDoNotCache, pmix.Bool(true))}
	if err := l.sent(m); !errors.Is(err, pmix.ErrUnreach) {
		t.Errorf("a transient GLOBAL event while the link is down: %v, want PMIX_ERR_UNREACH", err)
	}
}
