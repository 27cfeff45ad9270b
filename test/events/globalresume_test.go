package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
	"github.com/pmixbus/pmixbus/subjects"
)

// TestGlobalResumeAfterOneLinkDown: only B's leaf link goes down; A and
// the hub stay linked. The cacheable GLOBAL events sent meanwhile in A
// (by its RM, and by a tool on the hub naming cluster A, which has no
// stream of its own) reach B's clients once the link is back, each once,
// in A's order: B's events stream resumes sourcing A's. B's own reach A
// so too. A transient one notified in A succeeds there, whose link is
// up, and never reaches B. Nobody gets anything twice, and a late
// registration on either side is replayed the other's from its own
// cluster's stream.
func TestGlobalResumeAfterOneLinkDown(t *testing.T) {
	w := e2e.NewWorld(t)
	const n = 3
	var (
		codeA      = pmix.ExternalErrBase - 310 // from A's RM
		codeHub    = pmix.ExternalErrBase - 311 // from a tool on the hub, as A's RM
		codeB      = pmix.ExternalErrBase - 312 // from B's RM
		codeT      = pmix.ExternalErrBase - 313 // from A's RM, not to be cached
		codeBefore = pmix.ExternalErrBase - 314 // from A's RM, before the outage
	)
	codes := []pmix.Status{codeA, codeHub, codeB, codeT, codeBefore, e2e.FenceCode}
	far1, far2, near := w.Client("B:jobB.0"), w.Client("B:jobB.2"), w.Client("A:jobA.1")
	for _, c := range []*e2e.Client{far1, far2, near} {
		c.Register(t, codes, nil, pmix.EventNoActionTaken)
	}
	w.WaitSourced()
	a1, b1 := w.Agents["a1"], w.Agents["b1"]
	seq := func(i int) []pmix.Info { return []pmix.Info{pmix.NewInfo("test.seq", pmix.String(fmt.Sprint(i)))} }
	notify := func(a *agent.Agent, code pmix.Status, info []pmix.Info) {
		t.Helper()
		if _, err := a.Notify(t.Context(), code, pmix.RangeGlobal, false, info); err != nil {
			t.Fatalf("notify %v: %v", code, err)
		}
	}
	notify(a1, codeBefore, nil)
	for _, c := range []*e2e.Client{far1, far2, near} {
		c.Rec.WaitCount(t, codeBefore, 1)
	}

	if err := w.MC.CutLinks("B"); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		for _, a := range []string{"b1", "b2"} {
			if !w.Agents[a].Stats().GlobalLinkDown {
				return fmt.Errorf("%s has not seen the link go down", a)
			}
		}
		if a1.Stats().GlobalLinkDown {
			return errors.New("a1 sees its link down")
		}
		return nil
	})

	hub := clustertest.Connect(t, w.MC.HubURL(), w.W.Keys().Option(security.RoleRM), nats.CustomInboxPrefix(security.RMInboxPrefix))
	hubEvent := func(cl string, i int) error {
		m := &event.Message{ID: "hubtool." + nuid.Next(), Code: codeHub, Range: pmix.RangeGlobal,
			Source: bus.Origin{Cluster: cl, Node: "tool"}, Info: seq(i), Time: time.Now()}
		return event.PublishStored(t.Context(), hub, m, subjects.GlobalFrom(cl), cl)
	}
	for i := range n {
		notify(a1, codeA, seq(i))
		if err := hubEvent("A", i); err != nil {
			t.Fatalf("a GLOBAL event from the hub, as A's RM: %v", err)
		}
		notify(b1, codeB, seq(i))
	}
	// The hub has no stream: an event naming it (or B, cut off) is
	// stored nowhere, and says so.
	for _, cl := range []string{"hub", "B"} {
		if err := hubEvent(cl, 0); !errors.Is(err, pmix.ErrUnreach) || !strings.Contains(err.Error(), "PMIXBUS_EVENTS_"+cl) {
			t.Errorf("a GLOBAL event from the hub as %s: %v, want PMIX_ERR_UNREACH naming its stream", cl, err)
		}
	}
	transient := []pmix.Info{pmix.NewInfo(pmix.KeyEventDoNotCache, pmix.Bool(true))}
	notify(a1, codeT, transient) // A's link is up: it cannot tell B is cut off
	for _, code := range []pmix.Status{codeA, codeHub} {
		near.Rec.WaitCount(t, code, n)
	}
	near.Rec.WaitCount(t, codeT, 1)
	for _, c := range []*e2e.Client{far1, far2} {
		c.Rec.WaitCount(t, codeB, n)
		if got := len(c.Rec.Of(codeA)); got != 0 {
			t.Fatalf("%s got %d of A's events across a cut link", c.Name, got)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), e2e.WaitTime)
	defer cancel()
	if err := w.MC.RestoreLinks(ctx, "B"); err != nil {
		t.Fatal(err)
	}
	notify(a1, codeA, seq(n)) // as the link returns: after those of the outage
	// A fence from each side: sourced after the rest of its origin's.
	notify(a1, e2e.FenceCode, nil)
	notify(b1, e2e.FenceCode, nil)
	for _, c := range []*e2e.Client{far1, far2, near} {
		c.Rec.WaitCount(t, e2e.FenceCode, 2)
	}

	inOrder := func(c *e2e.Client, code pmix.Status) {
		t.Helper()
		var got []string
		for _, d := range c.Rec.Of(code) {
			for _, in := range d.Info {
				if s, ok := in.Value.Str(); ok && in.Key == "test.seq" {
					got = append(got, s)
				}
			}
		}
		want := []string{"0", "1", "2"}
		if code == codeA {
			want = append(want, "3")
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s got %v events %v, want %v", c.Name, code, got, want)
		}
	}
	for _, c := range []*e2e.Client{far1, far2, near} {
		for _, code := range []pmix.Status{codeA, codeHub, codeB} {
			inOrder(c, code)
		}
		if got := len(c.Rec.Of(codeBefore)); got != 1 {
			t.Errorf("%s got the event sent before the outage %d times", c.Name, got)
		}
	}
	for _, c := range []*e2e.Client{far1, far2} {
		if got := len(c.Rec.Of(codeT)); got != 0 {
			t.Errorf("%s got the transient GLOBAL event of the outage %d times", c.Name, got)
		}
	}
	if got := len(near.Rec.Of(codeT)); got != 1 {
		t.Errorf("%s got the transient GLOBAL event %d times", near.Name, got)
	}
	// A late registration is replayed the other cluster's events of the
	// outage from its own cluster's stream, which sourced them.
	for _, c := range []*e2e.Client{near, far1} {
		late := &e2e.Client{Name: c.Name + " (late)", C: c.C, Rec: e2e.NewRecorder()}
		late.Register(t, []pmix.Status{codeA, codeHub, codeB, e2e.FenceCode}, nil, pmix.EventNoActionTaken)
		late.Rec.WaitCount(t, e2e.FenceCode, 2)
		for _, code := range []pmix.Status{codeA, codeHub, codeB} {
			inOrder(late, code)
		}
	}
}

// An agent that starts while its cluster's leaf link is down (it can, with
// the GLOBAL domain given) cannot tell at start whether it is below a top:
// it asks again until the top answers, and from then on watches the link
// as the others do, so that a later outage is seen. (It never watched.)
func TestAgentStartedWithLinkDownWatchesIt(t *testing.T) {
	spec := e2e.WorldSpec
	spec.Agent = func(c *agent.Config) {
		e2e.WorldSpec.Agent(c)
		c.GlobalDomain = cluster.DefaultHubDomain
	}
	w := e2e.WorldOf(t, agenttest.Start(t, spec))
	if err := w.Agents["b2"].Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := w.MC.CutLinks("B"); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		if !w.Agents["b1"].Stats().GlobalLinkDown {
			return errors.New("b1 has not seen the link go down")
		}
		return nil
	})
	b2 := w.StartAgent("b2")
	if err := w.MC.RestoreLinks(t.Context(), "B"); err != nil {
		t.Fatal(err)
	}
	// Once b2 has found the top (within a probe interval of the link's
	// return), cutting the link again is seen.
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		if !b2.Stats().GlobalLinkWatched {
			return errors.New("b2 does not watch its link yet")
		}
		return nil
	})
	if err := w.MC.CutLinks("B"); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		if !b2.Stats().GlobalLinkDown {
			return errors.New("b2, started while its link was down, has not seen it go down again")
		}
		return nil
	})
}
