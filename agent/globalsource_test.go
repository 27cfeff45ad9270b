package agent_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
)

// seqs records the test.seq values of the events a handler got, by code.
type seqs struct {
	mu  sync.Mutex
	got map[pmix.Status][]string
}

func (s *seqs) handler(c *bus.Call, done bus.Done) {
	s.mu.Lock()
	if s.got == nil {
		s.got = map[pmix.Status][]string{}
	}
	v := "-"
	for _, in := range c.Info {
		if str, ok := in.Value.Str(); ok && in.Key == "test.seq" {
			v = str
		}
	}
	s.got[c.Code] = append(s.got[c.Code], v)
	s.mu.Unlock()
	done(pmix.EventNoActionTaken, nil)
}

func (s *seqs) of(code pmix.Status) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got[code])
}

// waitSeqs waits until s has exactly want of code, and fails if it has
// more or others.
func waitSeqs(t *testing.T, name string, s *seqs, code pmix.Status, want []string) {
	t.Helper()
	clustertest.WaitFor(t, 30*time.Second, func() error {
		if got := s.of(code); !slices.Equal(got, want) {
			if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
				t.Fatalf("%s got %v of %v, want %v", name, got, code, want)
			}
			return fmt.Errorf("%s got %v of %v, want %v", name, got, code, want)
		}
		return nil
	})
}

func register(t *testing.T, c *client.Client, codes ...pmix.Status) *seqs {
	t.Helper()
	s := &seqs{}
	if _, err := c.RegisterEventHandler(t.Context(), codes, nil, s.handler); err != nil {
		t.Fatal(err)
	}
	return s
}

// GLOBAL events by stream sourcing between the clusters' domains: a GLOBAL
// event notified in A reaches B's clients once, as a copy of what B's
// events stream sourced from A's. With B's leaf link cut, the N that A
// sends meanwhile reach B's clients once the link is back, each once, in
// A's order, with no catch-up (JetStream resumes the source). A
// registration made on B afterwards is replayed A's GLOBAL events from
// B's stream. Both on one server per cluster, and on three with
// replicated streams (R3).
func TestSourcedGlobalEvents(t *testing.T) {
	for _, servers := range []int{1, 3} {
		t.Run(fmt.Sprintf("R%d", servers), func(t *testing.T) { testSourcedGlobalEvents(t, servers) })
	}
}

func testSourcedGlobalEvents(t *testing.T, servers int) {
	spec := agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A", Servers: servers, Nodes: []string{"a1"}}, {ID: "B", Servers: servers, Nodes: []string{"b1", "b2"}}},
		Jobs: []agenttest.Job{
			{Cluster: "A", Nspace: "jobA", Session: "s1", Nodes: []string{"a1"}},
			{Cluster: "B", Nspace: "jobB", Session: "s1", Nodes: []string{"b1", "b2"}},
		},
		Agent: func(c *agent.Config) { c.HandlerTimeout = 10 * time.Second },
	}
	w := agenttest.Start(t, spec)
	const (
		codeA  = pmix.ExternalErrBase - 320 // from A's RM
		codeB  = pmix.ExternalErrBase - 321 // from B's RM
		fenceA = pmix.ExternalErrBase - 322
	)
	near := register(t, w.Client("A:jobA.0"), codeA, codeB, fenceA)
	far := []*seqs{register(t, w.Client("B:jobB.0"), codeA, codeB, fenceA), register(t, w.Client("B:jobB.1"), codeA, codeB, fenceA)}
	a1, b1 := w.Agent("a1"), w.Agent("b1")
	var sent []string
	notify := func(a *agent.Agent, code pmix.Status, seq string) {
		t.Helper()
		info := []pmix.Info{pmix.NewInfo("test.seq", pmix.String(seq))}
		if _, err := a.Notify(t.Context(), code, pmix.RangeGlobal, false, info); err != nil {
			t.Fatalf("notify %v: %v", code, err)
		}
	}

	// Each stream sources the other's once it learns of it; an event
	// sent before that is sourced all the same, from the stream's start.
	notify(a1, codeA, "0")
	notify(b1, codeB, "0")
	sent = append(sent, "0")
	for i, s := range far {
		waitSeqs(t, fmt.Sprint("B client ", i), s, codeA, sent)
		waitSeqs(t, fmt.Sprint("B client ", i), s, codeB, []string{"0"})
	}
	waitSeqs(t, "A client", near, codeA, sent)
	waitSeqs(t, "A client", near, codeB, []string{"0"})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := w.WaitSourced(ctx); err != nil {
		t.Fatal(err)
	}

	mc := w.MultiCluster()
	if err := mc.CutLinks("B"); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 30*time.Second, func() error {
		if !b1.Stats().GlobalLinkDown {
			return errors.New("b1 has not seen the link go down")
		}
		return nil
	})
	const n = 20
	for i := 1; i <= n; i++ {
		notify(a1, codeA, fmt.Sprint(i))
		sent = append(sent, fmt.Sprint(i))
	}
	notify(b1, codeB, "1") // B's own: stored in B, sourced by A once the link is back
	waitSeqs(t, "A client", near, codeA, sent)
	for i, s := range far {
		if got := s.of(codeA); len(got) != 1 {
			t.Fatalf("B client %d got %v across a cut link", i, got)
		}
	}
	if err := mc.RestoreLinks(ctx, "B"); err != nil {
		t.Fatal(err)
	}
	for i, s := range far {
		waitSeqs(t, fmt.Sprint("B client ", i), s, codeA, sent)
		waitSeqs(t, fmt.Sprint("B client ", i), s, codeB, []string{"0", "1"})
	}
	waitSeqs(t, "A client", near, codeB, []string{"0", "1"})
	// Nothing more comes: a fence sent after the rest arrives after it.
	notify(a1, fenceA, "f")
	for i, s := range far {
		waitSeqs(t, fmt.Sprint("B client ", i), s, fenceA, []string{"f"})
		if got := s.of(codeA); !slices.Equal(got, sent) {
			t.Errorf("B client %d got %v, want %v", i, got, sent)
		}
	}

	// A late registrant on B: A's GLOBAL events replayed from B's stream.
	late := register(t, w.Client("B:jobB.1"), codeA, fenceA)
	waitSeqs(t, "B's late registration", late, fenceA, []string{"f"})
	if got := late.of(codeA); !slices.Equal(got, sent) {
		t.Errorf("B's late registration was replayed %v, want %v", got, sent)
	}
}
