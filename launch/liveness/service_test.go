package liveness_test

import (
	"context"
	"errors"
	"fmt"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/launch/liveness"
	"github.com/pmixbus/pmixbus/pmix"
)

const waitTime = 10 * time.Second

// fakeHost records what a service raises.
type fakeHost struct {
	mu     sync.Mutex
	jobs   []liveness.HostedJob
	raised []*event.Message
	downs  []liveness.NodeDown
}

func (h *fakeHost) HostedJobs() []liveness.HostedJob {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.jobs)
}

func (h *fakeHost) Raise(m *event.Message) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.raised = append(h.raised, m)
	return nil
}

func (h *fakeHost) setJobs(jobs ...liveness.HostedJob) {
	h.mu.Lock()
	h.jobs = jobs
	h.mu.Unlock()
}

func (h *fakeHost) nodeDowns() []liveness.NodeDown {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.downs)
}

// node is one agent's liveness service on a connection of its own.
type node struct {
	name string
	nc   *nats.Conn
	host *fakeHost
	svc  *liveness.Service
}

// fast is a configuration that declares a node down within a second.
func fast(nc *nats.Conn, id cluster.ID, name string, h liveness.Host) liveness.Config {
	cfg := liveness.DefaultConfig()
	cfg.Conn, cfg.Cluster, cfg.Node, cfg.Listen, cfg.Host = nc, id, name, "unix:/tmp/"+name+".sock", h
	cfg.Interval, cfg.TTL, cfg.MarkerTTL = 200*time.Millisecond, time.Second, time.Second
	cfg.Slots = 4
	cfg.Version = "test"
	return cfg
}

// startNode starts a service for node name of cluster A on url, and shuts
// it down at cleanup.
func startNode(t *testing.T, url, name string, jobs ...liveness.HostedJob) *node {
	t.Helper()
	return startNodeWith(t, url, name, nil, jobs...)
}

// startNodeWith is startNode with tune, if not nil, adjusting fast's
// configuration first.
func startNodeWith(t *testing.T, url, name string, tune func(*liveness.Config), jobs ...liveness.HostedJob) *node {
	t.Helper()
	n := &node{name: name, nc: clustertest.Connect(t, url), host: &fakeHost{jobs: jobs}}
	cfg := fast(n.nc, "A", name, n.host)
	cfg.Logger = clustertest.Logger(t)
	if tune != nil {
		tune(&cfg)
	}
	svc, err := liveness.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	svc.OnNodeDown(func(d liveness.NodeDown) {
		n.host.mu.Lock()
		n.host.downs = append(n.host.downs, d)
		n.host.mu.Unlock()
	})
	if err := svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTime)
		defer cancel()
		_ = svc.Shutdown(ctx) // a killed node's cannot delete its key
	})
	n.svc = svc
	return n
}

func nodesOf(es []liveness.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Node)
	}
	return out
}

// waitBeats waits until every node has refreshed its key n more times: a
// clock that moves only as fast as the services do, for "nothing happened
// in that time".
func waitBeats(t *testing.T, n uint64, nodes ...*node) {
	t.Helper()
	start := make([]uint64, len(nodes))
	for i, nd := range nodes {
		start[i] = nd.svc.Stats().Beats
	}
	clustertest.WaitFor(t, waitTime, func() error {
		for i, nd := range nodes {
			if got := nd.svc.Stats().Beats - start[i]; got < n {
				return fmt.Errorf("%s beat %d times, want %d", nd.name, got, n)
			}
		}
		return nil
	})
}

func TestAgentsSeeEachOther(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	sim := liveness.HostedJob{Nspace: "sim", Session: "s1", Ranks: []pmix.Rank{0, 1}}
	a := startNode(t, srv.ClientURL(), "n1", sim)
	b := startNode(t, srv.ClientURL(), "n.2") // a name that needs escaping
	c := startNode(t, srv.ClientURL(), "n3")
	want := []string{"n.2", "n1", "n3"}
	for _, nd := range []*node{a, b, c} {
		clustertest.WaitFor(t, waitTime, func() error {
			if got := nodesOf(nd.svc.Agents()); !slices.Equal(got, want) {
				return fmt.Errorf("%s sees %v, want %v", nd.name, got, want)
			}
			return nil
		})
	}
	es, err := liveness.ReadAgents(t.Context(), a.nc, "A")
	if err != nil {
		t.Fatal(err)
	}
	if got := nodesOf(es); !slices.Equal(got, want) {
		t.Fatalf("ReadAgents: %v, want %v", got, want)
	}
	r := es[1].Record
	if es[1].State != liveness.Up || r == nil || r.Slots != 4 || r.Version != "test" || r.Listen != "unix:/tmp/n1.sock" ||
		r.TTL() != time.Second || r.Interval() != 200*time.Millisecond || len(r.Jobs) != 1 || r.Jobs[0].Nspace != "sim" || time.Since(es[1].At) > 5*time.Second {
		t.Fatalf("n1's entry: %+v, record %+v", es[1], r)
	}

	// A change of hosted jobs is in the key once Refresh returns.
	a.host.setJobs()
	if err := a.svc.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	es, err = liveness.ReadAgents(t.Context(), b.nc, "A")
	if err != nil || len(es[1].Record.Jobs) != 0 {
		t.Fatalf("after Refresh: %+v, %v", es, err)
	}

	cs, err := liveness.Clusters(t.Context(), c.nc, time.Second)
	if err != nil || len(cs) != 1 || cs[0].Cluster != "A" || cs[0].Domain != "A" {
		t.Fatalf("Clusters: %+v, %v", cs, err)
	}
}

// TestKilledNodeIsDeclaredDown: a node whose connection closes abruptly
// (no Shutdown) is declared down by every other node, with the same
// events: the same ids, one NODE_DOWN per job, one TERM_WO_SYNC per proc.
func TestKilledNodeIsDeclaredDown(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	a := startNode(t, srv.ClientURL(), "n1")
	b := startNode(t, srv.ClientURL(), "n2")
	jobs := []liveness.HostedJob{
		{Nspace: "sim", Session: "s1", Ranks: []pmix.Rank{2, 3}},
		{Nspace: "viz", Ranks: []pmix.Rank{0}},
	}
	c := startNode(t, srv.ClientURL(), "n3", jobs...)
	clustertest.WaitFor(t, waitTime, func() error {
		if len(a.svc.Agents()) != 3 || len(b.svc.Agents()) != 3 {
			return errors.New("not all seen")
		}
		return nil
	})
	killed := time.Now()
	c.nc.Close()
	for _, nd := range []*node{a, b} {
		clustertest.WaitFor(t, waitTime, func() error {
			if len(nd.host.nodeDowns()) == 0 {
				return fmt.Errorf("%s has declared nothing", nd.name)
			}
			return nil
		})
	}
	t.Logf("n3 killed → declared down by both others in %v (TTL 1s, interval 200ms); expiry %v after the last beat", time.Since(killed), a.host.nodeDowns()[0].At.Sub(a.host.nodeDowns()[0].LastBeat))
	da, db := a.host.nodeDowns()[0], b.host.nodeDowns()[0]
	if da.Node != "n3" || da.Revision != db.Revision || !slices.Equal(da.Events, db.Events) || da.Err != nil {
		t.Fatalf("n1 declared %+v, n2 %+v", da, db)
	}
	if len(da.Events) != 5 { // 2 NODE_DOWN + 3 TERM_WO_SYNC
		t.Fatalf("events %v", da.Events)
	}
	if got := nodesOf(a.svc.Agents()); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Fatalf("n1 still sees %v", got)
	}
	es, err := liveness.ReadAgents(t.Context(), a.nc, "A")
	if err != nil || len(es) != 3 || es[2].State != liveness.Down {
		t.Fatalf("ReadAgents after the expiry: %+v, %v", es, err)
	}

	// Nothing more: the others go on beating, and n3's expiry is not
	// raised twice.
	waitBeats(t, 6, a, b)
	if len(a.host.nodeDowns()) != 1 || len(b.host.nodeDowns()) != 1 {
		t.Fatalf("declared %d and %d times", len(a.host.nodeDowns()), len(b.host.nodeDowns()))
	}
}

// TestCleanStopRaisesNothing: a node that shuts down deletes its key,
// and no node declares it down, even after its TTL has long passed.
func TestCleanStopRaisesNothing(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	a := startNode(t, srv.ClientURL(), "n1")
	b := startNode(t, srv.ClientURL(), "n2", liveness.HostedJob{Nspace: "sim", Ranks: []pmix.Rank{0}})
	clustertest.WaitFor(t, waitTime, func() error {
		if len(a.svc.Agents()) != 2 {
			return errors.New("n2 not seen")
		}
		return nil
	})
	if err := b.svc.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, waitTime, func() error {
		if got := nodesOf(a.svc.Agents()); !slices.Equal(got, []string{"n1"}) {
			return fmt.Errorf("n1 sees %v", got)
		}
		return nil
	})
	waitBeats(t, 10, a) // twice the TTL
	if d := a.host.nodeDowns(); len(d) != 0 {
		t.Fatalf("declared after a clean stop: %+v", d)
	}
	es, err := liveness.ReadAgents(t.Context(), a.nc, "A")
	if err != nil || len(es) != 2 || es[1].State != liveness.Stopped {
		t.Fatalf("ReadAgents: %+v, %v", es, err)
	}
	// The node can start again at once.
	startNode(t, srv.ClientURL(), "n2")
}

// TestPausedNodeRejoins: a node whose refreshes stop for longer than the
// TTL (a paused process) is declared down; when it resumes it finds its
// key gone, says so, and joins again.
func TestPausedNodeRejoins(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	a := startNode(t, srv.ClientURL(), "n1")
	b := startNode(t, srv.ClientURL(), "n2", liveness.HostedJob{Nspace: "sim", Ranks: []pmix.Rank{0}})
	resume := b.svc.PauseBeats()
	clustertest.WaitFor(t, waitTime, func() error {
		if len(a.host.nodeDowns()) != 1 {
			return errors.New("n2 not declared down")
		}
		return nil
	})
	resume()
	clustertest.WaitFor(t, waitTime, func() error {
		if b.svc.Stats().Rejoined != 1 {
			return errors.New("n2 has not rejoined")
		}
		if got := nodesOf(a.svc.Agents()); !slices.Equal(got, []string{"n1", "n2"}) {
			return fmt.Errorf("n1 sees %v", got)
		}
		return nil
	})
}

// TestNodeTaken: a second agent of a node whose agent is alive does not
// start; it waits for the key to expire (at most the TTL and a second),
// then says who holds it.
func TestNodeTaken(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	// The first agent's key lives longer: with fast's 1 s TTL, a loaded
	// machine that delays its refreshes lets it expire, and the node is
	// free again.
	startNodeWith(t, srv.ClientURL(), "n1", func(c *liveness.Config) {
		c.TTL, c.Interval = 5*time.Second, time.Second // the claim waits this TTL out
	})
	nc := clustertest.Connect(t, srv.ClientURL())
	svc, err := liveness.New(fast(nc, "A", "n1", &fakeHost{}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Shutdown(context.Background()) }()
	err = svc.Start(t.Context())
	if !errors.Is(err, liveness.ErrNodeTaken) || !errors.Is(err, pmix.ErrDuplicateKey) {
		t.Fatalf("Start: %v", err)
	}
	t.Log(err)
}

func TestConfigValidate(t *testing.T) {
	nc := &nats.Conn{}
	ok := fast(nc, "A", "n1", &fakeHost{})
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(*liveness.Config){
		"ttl below a second":      func(c *liveness.Config) { c.TTL = 500 * time.Millisecond },
		"ttl not whole seconds":   func(c *liveness.Config) { c.TTL = 1500 * time.Millisecond },
		"interval not below ttl":  func(c *liveness.Config) { c.Interval = c.TTL },
		"no interval":             func(c *liveness.Config) { c.Interval = 0 },
		"marker ttl below 1s":     func(c *liveness.Config) { c.MarkerTTL = 0 },
		"negative slots":          func(c *liveness.Config) { c.Slots = -1 },
		"no node":                 func(c *liveness.Config) { c.Node = "" },
		"no conn":                 func(c *liveness.Config) { c.Conn = nil },
		"no host":                 func(c *liveness.Config) { c.Host = nil },
		"bad cluster":             func(c *liveness.Config) { c.Cluster = "a:b" },
		"six replicas of the key": func(c *liveness.Config) { c.Replicas = 6 },
	} {
		c := ok
		f(&c)
		if err := c.Validate(); !errors.Is(err, liveness.ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestEvents: the events of a node down, as every agent makes them.
func TestEvents(t *testing.T) {
	at := time.Unix(1700000000, 0)
	d := liveness.NodeDown{Cluster: "A", Node: "n3", Revision: 42, At: at, Jobs: []liveness.HostedJob{
		{Nspace: "sim", Session: "s1", Ranks: []pmix.Rank{2, 3}},
		{Nspace: "idle"},
	}}
	ms := liveness.Events(d)
	if len(ms) != 3 {
		t.Fatalf("%d events", len(ms))
	}
	down := ms[0]
	procs, _ := pmix.LookupValue(down.Info, pmix.KeyEventAffectedProcs)
	ps, _ := procs.Procs()
	host, _ := pmix.LookupValue(down.Info, pmix.KeyHostname)
	if down.Code != pmix.EventNodeDown || down.Range != pmix.RangeNamespace || down.Environment || !down.Source.Proc.IsZero() ||
		!slices.Equal(ps, []pmix.Proc{{Nspace: "sim", Rank: 2}, {Nspace: "sim", Rank: 3}}) || !isStr(host, "n3") {
		t.Fatalf("NODE_DOWN: %+v", down)
	}
	for i, m := range ms[1:] {
		want := pmix.Proc{Nspace: "sim", Rank: pmix.Rank(2 + i)}
		v, _ := pmix.LookupValue(m.Info, pmix.KeyEventAffectedProc)
		p, isProc := v.Proc()
		if m.Code != pmix.ErrProcTermWOSync || m.Range != pmix.RangeNamespace || m.Source.Proc != want || m.Source.Node != "n3" ||
			m.Source.Session != "s1" || !isProc || p != want {
			t.Fatalf("TERM_WO_SYNC %d: %+v", i, m)
		}
	}
	again := liveness.Events(d)
	seen := map[string]bool{}
	for i := range ms {
		if again[i].ID != ms[i].ID || seen[ms[i].ID] {
			t.Fatalf("ids not deterministic and distinct: %s, %s", ms[i].ID, again[i].ID)
		}
		seen[ms[i].ID] = true
	}
	d.Revision++
	if liveness.Events(d)[0].ID == ms[0].ID {
		t.Fatal("another expiry of the same node has the same id")
	}
}

func isStr(v pmix.Value, want string) bool {
	s, ok := v.Str()
	return ok && s == want
}

// TestNATSRestartDeclaresNothing: the cluster's NATS server goes away for
// several TTLs and comes back. Either the agents' buffered refreshes reach
// it before it expires their keys, or it expires every key at once and the
// agents, whose own connections were down too, wait a TTL before
// declaring, by when every agent has found its key gone and created it
// again: either way nobody is declared down.
func TestNATSRestartDeclaresNothing(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	a := startNode(t, srv.ClientURL(), "n1")
	b := startNode(t, srv.ClientURL(), "n2", liveness.HostedJob{Nspace: "sim", Ranks: []pmix.Rank{0}})
	clustertest.WaitFor(t, waitTime, func() error {
		if len(a.svc.Agents()) != 2 || len(b.svc.Agents()) != 2 {
			return errors.New("not all seen")
		}
		return nil
	})
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	failed := func(n uint64) {
		t.Helper()
		clustertest.WaitFor(t, waitTime, func() error {
			for _, nd := range []*node{a, b} {
				if got := nd.svc.Stats().BeatFailures; got < n {
					return fmt.Errorf("%s: %d failed refreshes", nd.name, got)
				}
			}
			return nil
		})
	}
	failed(4) // each waits up to a TTL for its answer: an outage of several TTLs
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, waitTime, func() error {
		for _, nd := range []*node{a, b} {
			if got := nodesOf(nd.svc.Agents()); !slices.Equal(got, []string{"n1", "n2"}) {
				return fmt.Errorf("%s sees %v", nd.name, got)
			}
		}
		return nil
	})
	waitBeats(t, 10, a, b) // twice the TTL: past any confirmation wait
	for _, nd := range []*node{a, b} {
		t.Logf("%s: %+v", nd.name, nd.svc.Stats())
		if d := nd.host.nodeDowns(); len(d) != 0 {
			t.Errorf("%s declared %+v", nd.name, d)
		}
	}
}

// TestExpiryAfterOwnOutageIsConfirmed: an agent whose own connection was
// just down waits a TTL before declaring a node whose key expired: if the
// node's agent writes its key again meanwhile (it was cut off by the same
// outage), it is not declared; if not, it is, a TTL late.
func TestExpiryAfterOwnOutageIsConfirmed(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	a := startNode(t, srv.ClientURL(), "n1")
	b := startNode(t, srv.ClientURL(), "n2", liveness.HostedJob{Nspace: "sim", Ranks: []pmix.Rank{0}})
	clustertest.WaitFor(t, waitTime, func() error {
		if got := nodesOf(a.svc.Agents()); !slices.Equal(got, []string{"n1", "n2"}) {
			return fmt.Errorf("n1 sees %v", got)
		}
		return nil
	})
	a.svc.PretendOutage(true)
	resume := b.svc.PauseBeats()
	clustertest.WaitFor(t, waitTime, func() error {
		if got := nodesOf(a.svc.Agents()); !slices.Equal(got, []string{"n1"}) {
			return fmt.Errorf("n1 sees %v", got)
		}
		return nil
	})
	resume()
	clustertest.WaitFor(t, waitTime, func() error {
		if s := b.svc.Stats(); s.Rejoined != 1 {
			return fmt.Errorf("n2 has not rejoined: %+v", s)
		}
		return nil
	})
	waitBeats(t, 10, a) // twice the TTL: past the confirmation wait
	if d := a.host.nodeDowns(); len(d) != 0 {
		t.Fatalf("declared a node that came back: %+v", d)
	}

	// n2 dies for real: declared, one TTL later than otherwise.
	b.nc.Close()
	clustertest.WaitFor(t, waitTime, func() error {
		if len(a.host.nodeDowns()) != 1 {
			return errors.New("n2 not declared down")
		}
		return nil
	})
	d := a.host.nodeDowns()[0]
	if late := time.Since(d.At); late < time.Second {
		t.Errorf("declared %v after the expiry, want a TTL", late)
	}
}

// TestCleanStopAfterLostAnswer: a refresh whose answer was lost (written,
// but the agent kept the old revision) leaves the key at a revision the
// agent does not know; its clean stop still deletes it, and nobody
// declares the node down.
func TestCleanStopAfterLostAnswer(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	a := startNode(t, srv.ClientURL(), "n1")
	b := startNode(t, srv.ClientURL(), "n2", liveness.HostedJob{Nspace: "sim", Ranks: []pmix.Rank{0}})
	clustertest.WaitFor(t, waitTime, func() error {
		if len(a.svc.Agents()) != 2 {
			return errors.New("n2 not seen")
		}
		return nil
	})
	// Write n2's own record again behind its back, as a refresh whose
	// acknowledgement never came back: same record, a new revision.
	js, err := natsjs.New(a.nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), liveness.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(t.Context(), "n2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), "n2", e.Value()); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitBeats(t, 10, a) // twice the TTL
	if d := a.host.nodeDowns(); len(d) != 0 {
		t.Fatalf("declared after a clean stop: %+v", d)
	}
	if _, err := kv.Get(t.Context(), "n2"); !errors.Is(err, natsjs.ErrKeyNotFound) && !errors.Is(err, natsjs.ErrKeyDeleted) {
		t.Fatalf("n2's key after its clean stop: %v", err)
	}
}
