package exchange

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
)

// jobInfoSpec is one cluster of two agents and two jobs:
//
//	n1: sim.0 sim.1 sim.2
//	n2: aaa.0 aaa.1 sim.3 sim.4   (aaa sorts first: its procs come first in node ranks)
//
// sim's host gives a universe size of 64; aaa's gives nothing.
func jobInfoSpec() agenttest.Spec {
	return agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A", Nodes: []string{"n1", "n2"}}},
		Jobs: []agenttest.Job{
			{Cluster: "A", Nspace: "sim", Nodes: []string{"n1", "n1", "n1", "n2", "n2"},
				Info: []pmix.Info{pmix.NewInfo(pmix.KeyUnivSize, pmix.Uint32(64))}},
			{Cluster: "A", Nspace: "aaa", Nodes: []string{"n2", "n2"}},
		},
	}
}

// simInfo is what every key says of sim's rank r, by the rules of
// docs/protocol.md ("Job-level info").
func simInfo(r pmix.Rank) map[string]pmix.Value {
	onN1 := r < 3
	v := map[string]pmix.Value{
		pmix.KeyJobSize:   pmix.Uint32(5),
		pmix.KeyUnivSize:  pmix.Uint32(64),
		pmix.KeyAppNum:    pmix.Uint32(0),
		pmix.KeyClusterID: pmix.String("A"),
		pmix.KeyNspace:    pmix.String("sim"),
		pmix.KeyRank:      pmix.RankValue(r),
	}
	if onN1 {
		v[pmix.KeyHostname] = pmix.String("n1")
		v[pmix.KeyLocalSize] = pmix.Uint32(3)
		v[pmix.KeyLocalPeers] = pmix.String("0,1,2")
		v[pmix.KeyLocalRank] = pmix.Uint16(uint16(r))
		v[pmix.KeyNodeRank] = pmix.Uint16(uint16(r))
	} else {
		v[pmix.KeyHostname] = pmix.String("n2")
		v[pmix.KeyLocalSize] = pmix.Uint32(2)
		v[pmix.KeyLocalPeers] = pmix.String("3,4")
		v[pmix.KeyLocalRank] = pmix.Uint16(uint16(r - 3))
		v[pmix.KeyNodeRank] = pmix.Uint16(uint16(r - 3 + 2)) // after aaa.0, aaa.1
	}
	return v
}

// checkGet fails the test unless c's Get of key for proc is want, of
// want's type.
func checkGet(t *testing.T, c *client.Client, proc pmix.Proc, key string, want pmix.Value, info ...pmix.Info) {
	t.Helper()
	got, err := c.Get(t.Context(), proc, key, info)
	if err != nil || !got.Equal(want) {
		t.Errorf("%v: get %s of %v: %v (%v), %v; want %v (%v)", c.Proc(), key, proc, got, got.Type(), err, want, want.Type())
	}
}

// TestJobLevelInfo: every client of a job placed 3/2 on two agents gets
// every job-level and proc-level key of its own and of every other rank
// with the exact PMIx type; node ranks count the other job on the node,
// registered after sim's clients attached (aaa sorts first: the node
// ranks of sim.3 and sim.4 moved); the host's universe size wins over the
// computed one.
func TestJobLevelInfo(t *testing.T) {
	w := agenttest.Start(t, jobInfoSpec())
	sim := pmix.Proc{Nspace: "sim", Rank: pmix.RankWildcard}
	for me := range pmix.Rank(5) {
		c := w.Client(fmt.Sprintf("A:sim.%d", me))
		for key, want := range simInfo(me) {
			checkGet(t, c, pmix.Proc{Nspace: "sim", Rank: me}, key, want)
			checkGet(t, c, pmix.Proc{Nspace: "A:sim", Rank: me}, key, want)
			if !pmix.ProcLevel(key) && key != pmix.KeyHostname { // WILDCARD: the job's, on the caller's node
				checkGet(t, c, sim, key, want)
			}
		}
		// Another rank's, on another node or the same: from the agent.
		for peer := range pmix.Rank(5) {
			for key, want := range simInfo(peer) {
				checkGet(t, c, pmix.Proc{Nspace: "sim", Rank: peer}, key, want)
			}
		}
		checkGet(t, c, sim, pmix.KeyHostname, simInfo(me)[pmix.KeyHostname])
		if _, err := c.Get(t.Context(), sim, pmix.KeyLocalRank, nil); !errors.Is(err, pmix.ErrNotFound) {
			t.Errorf("%v: local rank of WILDCARD: %v, want PMIX_ERR_NOT_FOUND", c.Proc(), err)
		}
	}
	aaa1 := w.Client("A:aaa.1")
	checkGet(t, aaa1, pmix.Proc{Nspace: "aaa", Rank: pmix.RankWildcard}, pmix.KeyUnivSize, pmix.Uint32(2))
	checkGet(t, aaa1, pmix.Proc{Nspace: "aaa", Rank: 1}, pmix.KeyNodeRank, pmix.Uint16(1))
	checkGet(t, aaa1, pmix.Proc{Nspace: "aaa", Rank: pmix.RankWildcard}, pmix.KeyLocalPeers, pmix.String("0,1"))
	// Another job of the agent, and its local keys on a node it has no proc on.
	checkGet(t, aaa1, sim, pmix.KeyLocalPeers, pmix.String("3,4"))
	if _, err := w.Client("A:sim.0").Get(t.Context(), pmix.Proc{Nspace: "aaa", Rank: pmix.RankWildcard}, pmix.KeyLocalSize, nil); !errors.Is(err, pmix.ErrNotFound) {
		t.Errorf("aaa's local size on n1, where it has no proc: %v, want PMIX_ERR_NOT_FOUND", err)
	}
}

// TestGetNotFound: an unknown key, nspace or rank is PMIX_ERR_NOT_FOUND
// at once, naming what was asked, even under PMIX_TIMEOUT for a PMIx key.
func TestGetNotFound(t *testing.T) {
	w := agenttest.Start(t, jobInfoSpec())
	c := w.Client("A:sim.0")
	wait := pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(20))
	for _, tc := range []struct {
		proc pmix.Proc
		key  string
		info []pmix.Info
	}{
		{pmix.Proc{Nspace: "sim", Rank: pmix.RankWildcard}, "pmix.no.such", nil},
		{pmix.Proc{Nspace: "sim", Rank: 0}, "pmix.no.such", nil},
		{pmix.Proc{Nspace: "sim", Rank: 3}, "pmix.no.such", nil},
		{pmix.Proc{Nspace: "sim", Rank: 3}, "pmix.no.such", []pmix.Info{wait}}, // never waited for
		{pmix.Proc{Nspace: "sim", Rank: 1}, "pmix.no.such", []pmix.Info{wait}},
		// Not committed: waited for (direct modex) but with PMIX_IMMEDIATE.
		{pmix.Proc{Nspace: "sim", Rank: 3}, "user.key", []pmix.Info{pmix.NewInfo(pmix.KeyImmediate, pmix.Bool(true))}},
		{pmix.Proc{Nspace: "sim", Rank: 9}, pmix.KeyJobSize, nil},
		{pmix.Proc{Nspace: "nojob", Rank: pmix.RankWildcard}, pmix.KeyJobSize, nil},
		{pmix.Proc{Nspace: "nojob", Rank: 0}, pmix.KeyHostname, nil},
		{pmix.Proc{Nspace: "nojob", Rank: 0}, pmix.KeyHostname, []pmix.Info{wait}},
	} {
		start := time.Now()
		v, err := c.Get(t.Context(), tc.proc, tc.key, tc.info)
		if !errors.Is(err, pmix.ErrNotFound) {
			t.Errorf("get %s of %v (%v): %v, %v; want PMIX_ERR_NOT_FOUND", tc.key, tc.proc, tc.info, v, err)
			continue
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("get %s of %v (%v) took %v: want PMIX_ERR_NOT_FOUND at once", tc.key, tc.proc, tc.info, d)
		}
		if msg := err.Error(); !strings.Contains(msg, tc.key) || !strings.Contains(msg, tc.proc.Nspace) {
			t.Errorf("get %s of %v: %q does not name the key and the proc", tc.key, tc.proc, msg)
		}
	}
}

// TestGetOptionalImmediate: PMIX_OPTIONAL looks only in the process (its
// own job's info is there; another rank's is not, nor its node rank);
// PMIX_IMMEDIATE answers from what the agent holds, which the job map is.
func TestGetOptionalImmediate(t *testing.T) {
	w := agenttest.Start(t, jobInfoSpec())
	c := w.Client("A:sim.1")
	optional := pmix.NewInfo(pmix.KeyOptional, pmix.Bool(true))
	immediate := pmix.NewInfo(pmix.KeyImmediate, pmix.Bool(true))
	sim := pmix.Proc{Nspace: "sim", Rank: pmix.RankWildcard}
	self := pmix.Proc{Nspace: "sim", Rank: 1}
	peer := pmix.Proc{Nspace: "sim", Rank: 3}
	for _, info := range []pmix.Info{optional, immediate} {
		checkGet(t, c, sim, pmix.KeyJobSize, pmix.Uint32(5), info)
		checkGet(t, c, sim, pmix.KeyLocalPeers, pmix.String("0,1,2"), info)
		checkGet(t, c, self, pmix.KeyLocalRank, pmix.Uint16(1), info)
		checkGet(t, c, self, pmix.KeyHostname, pmix.String("n1"), info)
	}
	checkGet(t, c, self, pmix.KeyNodeRank, pmix.Uint16(1), immediate) // the agent's to answer
	checkGet(t, c, peer, pmix.KeyHostname, pmix.String("n2"), immediate)
	checkGet(t, c, peer, pmix.KeyNodeRank, pmix.Uint16(2), immediate)
	for _, tc := range []struct {
		proc pmix.Proc
		key  string
	}{{peer, pmix.KeyHostname}, {peer, pmix.KeyLocalRank}, {self, pmix.KeyNodeRank}} {
		if v, err := c.Get(t.Context(), tc.proc, tc.key, []pmix.Info{optional}); !errors.Is(err, pmix.ErrNotFound) {
			t.Errorf("PMIX_OPTIONAL get %s of %v: %v, %v; want PMIX_ERR_NOT_FOUND (not in the process)", tc.key, tc.proc, v, err)
		}
	}
	if v, err := c.Get(t.Context(), sim, "pmix.no.such", []pmix.Info{optional}); !errors.Is(err, pmix.ErrNotFound) {
		t.Errorf("PMIX_OPTIONAL get of an unknown key: %v, %v; want PMIX_ERR_NOT_FOUND", v, err)
	}
}

// TestOwnJobInfoIsLocal: a client answers its own job's keys from what it
// got at attach: they still answer once its agent dropped it, when
// anything asked of the agent fails. The node rank, which may move, is
// the agent's to answer.
func TestOwnJobInfoIsLocal(t *testing.T) {
	w := agenttest.Start(t, jobInfoSpec())
	c := w.Client("A:sim.4")
	if err := w.Agent("n2").DeregisterClient(t.Context(), pmix.Proc{Nspace: "sim", Rank: 4}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Lost():
	case <-time.After(e2e.WaitTime):
		t.Fatal("the client was not dropped")
	}
	if _, err := c.Get(t.Context(), pmix.Proc{Nspace: "sim", Rank: 0}, pmix.KeyHostname, nil); !errors.Is(err, client.ErrLostConnection) {
		t.Fatalf("get of another rank's hostname without an agent: %v, want ErrLostConnection", err)
	}
	for key, want := range simInfo(4) {
		if key == pmix.KeyNodeRank {
			continue
		}
		checkGet(t, c, pmix.Proc{Nspace: "sim", Rank: 4}, key, want)
		if !pmix.ProcLevel(key) {
			checkGet(t, c, pmix.Proc{Nspace: "sim", Rank: pmix.RankWildcard}, key, want)
		}
	}
}

// TestConnectCarriesJobSize: a connect brings the computed job-level info
// of another cluster's job, whose host registered none (RFC0003).
func TestConnectCarriesJobSize(t *testing.T) {
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}, {ID: "B"}},
		Jobs: []agenttest.Job{
			{Cluster: "A", Nspace: "ja", Nodes: []string{"a1", "a1"}},
			{Cluster: "B", Nspace: "jb", Nodes: []string{"b1"}},
		},
	})
	ctx, cancel := context.WithTimeout(t.Context(), e2e.WaitTime)
	defer cancel()
	jb := pmix.Proc{Nspace: "B:jb", Rank: pmix.RankWildcard}
	a0 := w.Client("A:ja.0")
	if _, err := a0.Get(ctx, jb, pmix.KeyJobSize, nil); !errors.Is(err, pmix.ErrNotFound) {
		t.Fatalf("B:jb's job size before the connect: %v, want PMIX_ERR_NOT_FOUND", err)
	}
	procs := []pmix.Proc{{Nspace: "A:ja", Rank: pmix.RankWildcard}, jb}
	errs := make(chan error, 3)
	for _, n := range []string{"A:ja.0", "A:ja.1", "B:jb.0"} {
		go func() {
			_, _, err := w.Client(n).Connect(ctx, procs, nil)
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("connect: %v", err)
		}
	}
	checkGet(t, a0, jb, pmix.KeyJobSize, pmix.Uint32(1))
	checkGet(t, a0, jb, pmix.KeyUnivSize, pmix.Uint32(1))
	checkGet(t, w.Client("B:jb.0"), pmix.Proc{Nspace: "A:ja", Rank: pmix.RankWildcard}, pmix.KeyJobSize, pmix.Uint32(2))
}
