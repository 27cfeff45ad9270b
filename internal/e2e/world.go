package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
)

// WaitTime bounds every wait of the tests: long, for a loaded machine;
// what they wait for comes sooner.
const WaitTime = 20 * time.Second

// Registration attributes for the two kinds of event (RFC0002): a
// registration takes job events only unless it gives PMIX_EVENT_ENVIRO_LEVEL
// (see package bus, Filters).
var (
	JobLevel    = pmix.NewInfo(pmix.KeyEventJobLevel, pmix.Bool(true))
	EnviroLevel = pmix.NewInfo(pmix.KeyEventEnviroLevel, pmix.Bool(true))
)

// World is two clusters (A, B) of one NATS server each, joined by leaf
// nodes through a hub, with two agents per cluster and clients of three
// jobs (WorldSpec):
//
//	A: node a1: jobA.0 jobA.1 jobA2.0   node a2: jobA.2 jobA.3     (session s1)
//	B: node b1: jobB.0 jobB.1           node b2: jobB.2            (session s1 too)
//
// It is a thin layer on agenttest.World that adds a recorder to every
// client.
type World struct {
	t       *testing.T
	W       *agenttest.World
	MC      *cluster.MultiCluster
	Agents  map[string]*agent.Agent // by node
	clients map[string]*Client      // by "cluster:nspace.rank"
}

// Client is a client of a World with the recorder its handlers use.
type Client struct {
	Name    string // cluster-qualified proc, e.g. "A:jobA.0"
	cluster string
	node    string
	C       *client.Client
	Rec     *Recorder
}

// WorldSpec is the declaration of the World NewWorld starts.
var WorldSpec = agenttest.Spec{
	Clusters: []agenttest.Cluster{
		{ID: "A", Nodes: []string{"a1", "a2"}},
		{ID: "B", Nodes: []string{"b1", "b2"}},
	},
	Jobs: []agenttest.Job{
		{Cluster: "A", Nspace: "jobA", Session: "s1", Nodes: []string{"a1", "a1", "a2", "a2"}},
		{Cluster: "A", Nspace: "jobA2", Session: "s1", Nodes: []string{"a1"}},
		{Cluster: "B", Nspace: "jobB", Session: "s1", Nodes: []string{"b1", "b1", "b2"}},
	},
	Agent: func(c *agent.Config) { c.HandlerTimeout = 10 * time.Second },
}

// NewWorld starts a World (WorldSpec) for t.
func NewWorld(t *testing.T) *World {
	t.Helper()
	return WorldOf(t, agenttest.Start(t, WorldSpec))
}

// WorldOf wraps aw, giving each of its clients a recorder.
func WorldOf(t *testing.T, aw *agenttest.World) *World {
	w := &World{t: t, W: aw, MC: aw.MultiCluster(), Agents: map[string]*agent.Agent{}, clients: map[string]*Client{}}
	for _, n := range aw.Nodes() {
		w.Agents[n] = aw.Agent(n)
	}
	for _, p := range aw.Procs() {
		if c := aw.Client(p.Name); c != nil {
			w.clients[p.Name] = &Client{Name: p.Name, cluster: string(p.Cluster), node: p.Node, C: c, Rec: NewRecorder()}
		}
	}
	return w
}

// ShortDir is a temporary directory with a short path, for Unix sockets.
func ShortDir(t *testing.T) string { return agenttest.SocketDir(t) }

// StartAgent starts node's agent again, after its Shutdown; it has no job.
func (w *World) StartAgent(node string) *agent.Agent {
	w.t.Helper()
	a, err := w.W.StartAgent(w.t.Context(), node)
	if err != nil {
		w.t.Fatal(err)
	}
	w.Agents[node] = a
	return a
}

// RunAgent starts a lone agent, and shuts it down when the test ends.
func RunAgent(t *testing.T, cfg agent.Config) *agent.Agent {
	t.Helper()
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Shutdown(ctx); err != nil {
			t.Errorf("agent %s shutdown: %v", cfg.Node, err)
		}
	})
	return a
}

// Attach registers proc p of cluster clusterID with the agent of its node
// (in WorldSpec) and attaches it again.
func (w *World) Attach(clusterID string, p pmix.Proc, node string) *Client {
	w.t.Helper()
	name := clusterID + ":" + p.String()
	c, err := w.W.Attach(w.t.Context(), name)
	if err != nil {
		w.t.Fatal(err)
	}
	tc := &Client{Name: name, cluster: clusterID, node: node, C: c, Rec: NewRecorder()}
	w.clients[name] = tc
	return tc
}

// SoloEnv registers a job of one process, rank 0 on node, with node's
// agent, and returns the launch environment of that process: for clients a
// test attaches its own way.
func (w *World) SoloEnv(node, nspace string) map[string]string {
	w.t.Helper()
	a := w.Agents[node]
	if err := a.RegisterJob(w.t.Context(), agent.Job{Nspace: nspace, Session: "s1", Procs: map[pmix.Rank]string{0: node}}); err != nil {
		w.t.Fatal(err)
	}
	env, err := a.RegisterClient(w.t.Context(), pmix.Proc{Nspace: nspace, Rank: 0})
	if err != nil {
		w.t.Fatal(err)
	}
	return env
}

// Client returns the client of name (e.g. "A:jobA.0"); none fails the
// test.
func (w *World) Client(name string) *Client {
	w.t.Helper()
	c, ok := w.clients[name]
	if !ok {
		w.t.Fatalf("no client %s", name)
	}
	return c
}

// Names returns the names of the clients, sorted.
func (w *World) Names() []string {
	out := make([]string, 0, len(w.clients))
	for n := range w.clients {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// NoneHeld waits, limit at most, until agent a holds no registration for
// its replay (docs/cache.md): each takes its events in its client's chain
// from then on.
func NoneHeld(t *testing.T, a *agent.Agent, limit time.Duration) {
	t.Helper()
	clustertest.WaitFor(t, limit, func() error {
		if n := a.Stats().RegistrationsHeld; n > 0 {
			return fmt.Errorf("%d registrations still replayed to", n)
		}
		return nil
	})
}

// WaitInterest waits until every server of cluster id has interest in
// subject over its leaf links (agenttest.World.WaitInterest).
func (w *World) WaitInterest(id, subject string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.t.Context(), WaitTime)
	defer cancel()
	if err := w.W.WaitInterest(ctx, cluster.ID(id), subject); err != nil {
		w.t.Fatal(err)
	}
}

// WaitSourced waits until every cluster's events stream sources the
// others' GLOBAL events (agenttest.World.WaitSourced).
func (w *World) WaitSourced() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.t.Context(), WaitTime)
	defer cancel()
	if err := w.W.WaitSourced(ctx); err != nil {
		w.t.Fatal(err)
	}
}

// Register registers a recording handler on tc that completes at once with
// status.
func (tc *Client) Register(t *testing.T, codes []pmix.Status, info []pmix.Info, status pmix.Status, results ...pmix.Info) bus.ID {
	t.Helper()
	id, err := tc.C.RegisterEventHandler(t.Context(), codes, info, tc.Rec.Handler(status, results...))
	if err != nil {
		t.Fatalf("%s: register: %v", tc.Name, err)
	}
	return id
}

// RegisterAll registers a recording handler for codes on each named
// client.
func RegisterAll(t *testing.T, w *World, names []string, codes ...pmix.Status) {
	t.Helper()
	for _, n := range names {
		w.Client(n).Register(t, codes, nil, pmix.EventNoActionTaken)
	}
}

// Delivery is one handler invocation a recorder saw.
type Delivery struct {
	Handler string
	Code    pmix.Status
	Source  pmix.Proc
	Info    []pmix.Info
	Results []pmix.Info
}

// Recorder records the deliveries of the handlers it makes; it is safe
// for concurrent use.
type Recorder struct {
	mu  sync.Mutex
	got []Delivery
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{} }

// Handler returns a handler that records each call and completes at once
// with status and results.
func (r *Recorder) Handler(status pmix.Status, results ...pmix.Info) bus.Handler {
	return func(c *bus.Call, done bus.Done) {
		r.mu.Lock()
		r.got = append(r.got, Delivery{Handler: c.Name, Code: c.Code, Source: c.Source, Info: c.Info, Results: slices.Clone(c.Results)})
		r.mu.Unlock()
		done(status, results)
	}
}

// All returns the deliveries so far, in order.
func (r *Recorder) All() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// Of returns the deliveries so far of code, in order.
func (r *Recorder) Of(code pmix.Status) []Delivery {
	var out []Delivery
	for _, d := range r.All() {
		if d.Code == code {
			out = append(out, d)
		}
	}
	return out
}

// WaitCount waits until the recorder has seen n deliveries of code.
func (r *Recorder) WaitCount(t *testing.T, code pmix.Status, n int) {
	t.Helper()
	clustertest.WaitFor(t, WaitTime, func() error {
		if got := len(r.Of(code)); got < n {
			return fmt.Errorf("%d of %d deliveries of %v", got, n, code)
		}
		return nil
	})
}

// Soak reports whether the full-scale runs were asked for.
func Soak() bool { return os.Getenv("PMIXBUS_SOAK") != "" }
