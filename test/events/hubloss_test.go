package events

import (
	"context"
	"errors"
	"testing"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
)

// TestGlobalDuringHubOutage: with the hub down, a cacheable GLOBAL event
// notified in A still succeeds and reaches B once the hub is back, once
// (B's events stream resumes sourcing A's); one that may not be cached
// says it reached A only (a GLOBAL notify used to report success while
// nothing crossed).
func TestGlobalDuringHubOutage(t *testing.T) {
	w := e2e.NewWorld(t)
	code := pmix.ExternalErrBase - 300
	far, near := w.Client("B:jobB.0"), w.Client("A:jobA.1")
	for _, c := range []*e2e.Client{far, near} {
		c.Register(t, []pmix.Status{code}, nil, pmix.EventNoActionTaken)
		c.Register(t, []pmix.Status{e2e.FenceCode}, nil, pmix.EventNoActionTaken)
	}
	w.WaitSourced()
	a1 := w.Agents["a1"]

	if err := w.MC.ShutdownHub(t.Context()); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		if !a1.Stats().GlobalLinkDown {
			return errors.New("a1 has not seen the link go down")
		}
		return nil
	})
	if _, err := a1.Notify(t.Context(), code, pmix.RangeGlobal, false, nil); err != nil {
		t.Fatalf("a cacheable GLOBAL event during the outage: %v", err)
	}
	transient := []pmix.Info{pmix.NewInfo(pmix.KeyEventDoNotCache, pmix.Bool(true))}
	if _, err := a1.Notify(t.Context(), code, pmix.RangeGlobal, false, transient); !errors.Is(err, pmix.ErrUnreach) {
		t.Fatalf("a GLOBAL event that may not be cached, during the outage: %v, want PMIX_ERR_UNREACH", err)
	}
	near.Rec.WaitCount(t, code, 2) // both reached A

	ctx, cancel := context.WithTimeout(t.Context(), e2e.WaitTime)
	defer cancel()
	if err := w.MC.RestartHub(ctx); err != nil {
		t.Fatal(err)
	}
	far.Rec.WaitCount(t, code, 1) // the cacheable one crossed once the hub was back
	// Nothing more comes: the fence is sourced after the event.
	if _, err := a1.Notify(t.Context(), e2e.FenceCode, pmix.RangeGlobal, false, nil); err != nil {
		t.Fatal(err)
	}
	far.Rec.WaitCount(t, e2e.FenceCode, 1)
	near.Rec.WaitCount(t, e2e.FenceCode, 1)
	if n := len(far.Rec.Of(code)); n != 1 {
		t.Errorf("B got the event %d times, want once", n)
	}
	if n := len(near.Rec.Of(code)); n != 2 {
		t.Errorf("A got %d events, want the 2 sent", n)
	}
}
