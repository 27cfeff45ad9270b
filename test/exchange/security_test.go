package exchange

import (
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/publishlookup"
	"github.com/pmixbus/pmixbus/security"
)

// TestNATSBypassesClosed is issue 12's item 2. What the agent enforces —
// its socket, each process's credential, the access rules of published
// data — was bypassed by connecting to NATS directly: a process without
// credentials forged an event that another job's client took for one of
// jobX.0, read a value its access rules exclude, and purged the event
// cache. In a world secured as every agenttest world is by default, none
// of that works without a key, nor with the read-only watch key or the
// RM's key, while the agents go on as before.
func TestNATSBypassesClosed(t *testing.T) {
	w := e2e.NewWorld(t)
	keys := w.W.Keys()
	if keys == nil {
		t.Fatal("agenttest worlds are secured by default")
	}
	ctx := t.Context()
	urlA := w.W.URL("A")
	const code = pmix.Status(-3101)

	t.Run("no key, no connection", func(t *testing.T) {
		for _, url := range []string{urlA, w.W.URL("B"), w.MC.HubURL()} {
			clustertest.Refused(t, url)
		}
	})

	// jobA.0's data, for its own job only (NAMESPACE range).
	w.Client("A:jobA.0").Publish(t, e2e.Str("secret", "for jobA"), e2e.Rng(pmix.RangeNamespace))
	w.Client("A:jobA.1").LookupOne(t, "secret", "for jobA", "jobA.0")
	w.Client("A:jobA2.0").LookupFails(t, []string{"secret"}, pmix.ErrNotFound)

	victim := w.Client("A:jobA2.0")
	victim.Register(t, []pmix.Status{code}, nil, pmix.EventActionComplete)

	t.Run("watch key", func(t *testing.T) {
		var v clustertest.Violations
		snoop := clustertest.Connect(t, urlA, keys.Option(security.RoleWatch), v.Option())

		// A forged event, as jobX.0, to jobA2's namespace.
		forged := &event.Message{
			ID: "forged.1", Code: code, Range: pmix.RangeNamespace, Time: time.Now(),
			Source: bus.Origin{Cluster: "A", Node: "a1", Proc: pmix.Proc{Nspace: "jobX", Rank: 0}},
			Info:   []pmix.Info{pmix.NewInfo(pmix.KeyNspace, pmix.String("jobA2"))},
		}
		scopes, err := event.Scopes(event.Place{Cluster: "A", Node: "a1"}, forged, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := event.Publish(snoop, forged, scopes); err != nil {
			t.Fatal(err)
		}
		if err := snoop.Flush(); err != nil {
			t.Fatal(err)
		}
		v.Wait(t, e2e.WaitTime, clustertest.Publish(scopes[0].Subject(code)))

		// Reading jobA's value: from the bucket, or from the replies an
		// agent gets when it reads the bucket.
		for _, subj := range []string{"$JS.API.DIRECT.GET.KV_" + publishlookup.DefaultBucket, "$JS.API.STREAM.MSG.GET.KV_" + publishlookup.DefaultBucket} {
			if err := snoop.PublishRequest(subj, snoop.NewRespInbox(), []byte(`{"last_by_subj":"$KV.PMIXBUS_PUBLISH.n.jobA.secret"}`)); err != nil {
				t.Fatal(err)
			}
			v.Fence(t, snoop)
			if !v.Has(clustertest.Publish(subj)) {
				t.Errorf("watch may request %s", subj)
			}
		}
		for _, subj := range []string{"$KV.>", "_INBOX.>"} {
			if _, err := snoop.SubscribeSync(subj); err != nil {
				t.Fatal(err)
			}
			v.Fence(t, snoop)
			if !v.Has(clustertest.Subscription(subj)) {
				t.Errorf("watch may subscribe to %s", subj)
			}
		}
	})

	t.Run("watch and rm keys cannot touch the caches", func(t *testing.T) {
		for _, role := range []security.Role{security.RoleWatch, security.RoleRM} {
			var v clustertest.Violations
			nc := clustertest.Connect(t, w.W.URL("B"), keys.Option(role), v.Option())
			for _, subj := range []string{
				"$JS.A.API.STREAM.PURGE." + jetstream.EventStreamName("A"),
				"$JS.A.API.STREAM.PURGE." + jetstream.JobStreamName("A"),
				"$JS.A.API.STREAM.DELETE." + jetstream.EventStreamName("A"),
				"$JS.A.API.STREAM.UPDATE." + jetstream.EventStreamName("A"),
				"$JS.A.API.CONSUMER.DELETE." + jetstream.JobStreamName("A") + ".x",
				"$JS.A.API.STREAM.DELETE.KV_" + publishlookup.DefaultBucket,
			} {
				if err := nc.PublishRequest(subj, nc.NewRespInbox(), nil); err != nil {
					t.Fatal(err)
				}
				v.Fence(t, nc)
				if !v.Has(clustertest.Publish(subj)) {
					t.Errorf("%s may request %s", role, subj)
				}
			}
		}
	})

	// The agents' own event is the fence: a forged one, had it passed,
	// would have reached the victim first.
	if _, err := w.Agents["a1"].Notify(ctx, code, pmix.RangeNamespace, false, []pmix.Info{pmix.NewInfo(pmix.KeyNspace, pmix.String("jobA2"))}); err != nil {
		t.Fatal(err)
	}
	victim.Rec.WaitCount(t, code, 1)
	if got := victim.Rec.Of(code); len(got) != 1 || !got[0].Source.IsZero() {
		t.Fatalf("the victim saw %+v; want the RM's event only", got)
	}
	w.Client("A:jobA.1").LookupOne(t, "secret", "for jobA", "jobA.0")

	// The caches are whole: both streams are there, and the agent's event
	// is in the events cache (the job-events one lets go of an event once
	// every local client has it).
	js, err := natsjs.New(clustertest.Connect(t, urlA, keys.Option(security.RoleAgent)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(ctx, jetstream.JobStreamName("A")); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, jetstream.EventStreamName("A"))
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n == 0 {
		t.Errorf("the events cache is empty")
	}
}

// TestSecuredWorldOverTLS: two clusters whose leaf links to the hub run on
// mutual TLS, every connection signed in with its role's key: a GLOBAL
// event crosses to the other cluster's client and to a watcher on the
// hub, and GLOBAL data published in one cluster is found in the other.
func TestSecuredWorldOverTLS(t *testing.T) {
	files := clustertest.LeafTLS(t)
	files.Verify = true
	spec := e2e.WorldSpec
	spec.LeafTLS = files
	w := e2e.WorldOf(t, agenttest.Start(t, spec))
	const code = pmix.Status(-3102)

	a := w.Client("A:jobA.0")
	a.Register(t, []pmix.Status{code}, nil, pmix.EventActionComplete)
	watch := clustertest.Connect(t, w.MC.HubURL(), w.W.Keys().Option(security.RoleWatch))
	seen, err := watch.SubscribeSync("pmix.evt.global.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.W.WaitPropagation(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := w.Client("B:jobB.0").C.NotifyEvent(t.Context(), code, pmix.RangeGlobal, nil); err != nil {
		t.Fatal(err)
	}
	a.Rec.WaitCount(t, code, 1)
	if m, err := seen.NextMsg(e2e.WaitTime); err != nil || m.Subject != "pmix.evt.global.B.-3102" {
		t.Fatalf("the watcher on the hub: %v, %v", m, err)
	}

	w.Client("B:jobB.0").Publish(t, e2e.Str("over-tls", "B:jobB"), e2e.Rng(pmix.RangeGlobal))
	a.LookupOne(t, "over-tls", "B:jobB", "B:jobB.0")
}
