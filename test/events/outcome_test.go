package events

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
	"github.com/pmixbus/pmixbus/subjects"
)

// TestOutcomeReportsOnlyWhenHeard: an agent publishes no outcome report
// while nobody subscribes to them, and a listener — here on another
// cluster's server, over the leaf links — receives the report of every
// chain that ended after it subscribed, even before the agent's next probe
// for listeners. The host's OnOutcome callbacks get every report.
func TestOutcomeReportsOnlyWhenHeard(t *testing.T) {
	w := e2e.NewWorld(t)
	a1, a2 := w.Agents["a1"], w.Agents["a2"]
	rcv := w.Client("A:jobA.3") // on a2
	code := pmix.ExternalErrBase - 40
	rcv.Register(t, []pmix.Status{code}, nil, pmix.EventNoActionTaken)
	local := make(chan event.OutcomeReport, 16)
	a2.OnOutcome(func(r event.OutcomeReport) { local <- r })
	notify := func() string {
		t.Helper()
		id, err := a1.Notify(t.Context(), code, pmix.RangeNamespace, false, []pmix.Info{pmix.NewInfo(pmix.KeyNspace, pmix.String("jobA"))})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	expectLocal := func(id string) {
		t.Helper()
		select {
		case r := <-local:
			if r.EventID != id {
				t.Fatalf("OnOutcome got event %s, want %s", r.EventID, id)
			}
		case <-time.After(e2e.WaitTime):
			t.Fatal("OnOutcome never called")
		}
	}

	first := notify()
	expectLocal(first)
	checkFor(t, func() bool { return a2.Stats().OutcomesUnheard >= 1 })
	if n := a2.Stats().OutcomesPublished; n != 0 {
		t.Fatalf("%d reports published with nobody listening", n)
	}

	nc, err := nats.Connect(w.W.URL("B"), w.W.Keys().Option(security.RoleWatch), nats.CustomInboxPrefix(security.WatchInboxPrefix))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msgs := make(chan *nats.Msg, 64)
	if _, err := nc.ChanSubscribe("pmix.outcome."+subjects.ClusterToken("A")+".*", msgs); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	subject := event.OutcomeSubject("A", "a2")
	w.WaitInterest("A", subject)

	second := notify()
	expectLocal(second)
	deadline := time.After(e2e.WaitTime)
	for {
		select {
		case m := <-msgs:
			rs, err := event.UnmarshalOutcomes(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs { // a probe is an empty batch
				if r.EventID == first {
					t.Fatalf("report of %s, which ended before anyone listened, published", first)
				}
				if r.EventID == second && m.Subject == subject && r.Client == (pmix.Proc{Nspace: "jobA", Rank: 3}) {
					// The agent counts a report once its publish returned:
					// the listener may have it first.
					checkFor(t, func() bool { return a2.Stats().OutcomesPublished >= 1 })
					return
				}
			}
		case <-deadline:
			t.Fatal("the listener never got the report")
		}
	}
}

// checkFor waits, polling, until cond holds.
func checkFor(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), e2e.WaitTime)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition never held")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
