package test

import (
	"context"
	"fmt"
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

const waitTime = 20 * time.Second

// Registration attributes for the two kinds of event (RFC0002): a
// registration takes job events only unless it gives PMIX_EVENT_ENVIRO_LEVEL
// (see package bus, Filters).
var (
	jobLevel    = pmix.NewInfo(pmix.KeyEventJobLevel, pmix.Bool(true))
	enviroLevel = pmix.NewInfo(pmix.KeyEventEnviroLevel, pmix.Bool(true))
)

// world is two clusters (A, B) of one NATS server each, joined by leaf
// nodes through a hub, with two agents per cluster and clients of three
// jobs (worldSpec):
//
//	A: node a1: jobA.0 jobA.1 jobA2.0   node a2: jobA.2 jobA.3     (session s1)
//	B: node b1: jobB.0 jobB.1           node b2: jobB.2            (session s1 too)
//
// It is a thin layer on agenttest.World that adds a recorder to every
// client.
type world struct {
	t       *testing.T
	w       *agenttest.World
	mc      *cluster.MultiCluster
	agents  map[string]*agent.Agent // by node
	clients map[string]*tclient     // by "cluster:nspace.rank"
}

type tclient struct {
	name    string // cluster-qualified proc, e.g. "A:jobA.0"
	cluster string
	node    string
	c       *client.Client
	rec     *recorder
}

var worldSpec = agenttest.Spec{
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

func newWorld(t *testing.T) *world {
	t.Helper()
	return worldOf(t, agenttest.Start(t, worldSpec))
}

// worldOf wraps aw, giving each of its clients a recorder.
func worldOf(t *testing.T, aw *agenttest.World) *world {
	w := &world{t: t, w: aw, mc: aw.MultiCluster(), agents: map[string]*agent.Agent{}, clients: map[string]*tclient{}}
	for _, n := range aw.Nodes() {
		w.agents[n] = aw.Agent(n)
	}
	for _, p := range aw.Procs() {
		if c := aw.Client(p.Name); c != nil {
			w.clients[p.Name] = &tclient{name: p.Name, cluster: string(p.Cluster), node: p.Node, c: c, rec: newRecorder()}
		}
	}
	return w
}

// shortDir is a temporary directory with a short path, for Unix sockets.
func shortDir(t *testing.T) string { return agenttest.SocketDir(t) }

// startAgent starts node's agent again, after its Shutdown; it has no job.
func (w *world) startAgent(node string) *agent.Agent {
	w.t.Helper()
	a, err := w.w.StartAgent(w.t.Context(), node)
	if err != nil {
		w.t.Fatal(err)
	}
	w.agents[node] = a
	return a
}

// runAgent starts a lone agent, and shuts it down when the test ends.
func runAgent(t *testing.T, cfg agent.Config) *agent.Agent {
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

// attach registers proc p of cluster clusterID with the agent of its node
// (in worldSpec) and attaches it again.
func (w *world) attach(clusterID string, p pmix.Proc, node string) *tclient {
	w.t.Helper()
	name := clusterID + ":" + p.String()
	c, err := w.w.Attach(w.t.Context(), name)
	if err != nil {
		w.t.Fatal(err)
	}
	tc := &tclient{name: name, cluster: clusterID, node: node, c: c, rec: newRecorder()}
	w.clients[name] = tc
	return tc
}

// soloEnv registers a job of one process, rank 0 on node, with node's
// agent, and returns the launch environment of that process: for clients a
// test attaches its own way.
func (w *world) soloEnv(node, nspace string) map[string]string {
	w.t.Helper()
	a := w.agents[node]
	if err := a.RegisterJob(w.t.Context(), agent.Job{Nspace: nspace, Session: "s1", Procs: map[pmix.Rank]string{0: node}}); err != nil {
		w.t.Fatal(err)
	}
	env, err := a.RegisterClient(w.t.Context(), pmix.Proc{Nspace: nspace, Rank: 0})
	if err != nil {
		w.t.Fatal(err)
	}
	return env
}

func (w *world) client(name string) *tclient {
	w.t.Helper()
	c, ok := w.clients[name]
	if !ok {
		w.t.Fatalf("no client %s", name)
	}
	return c
}

func (w *world) names() []string {
	out := make([]string, 0, len(w.clients))
	for n := range w.clients {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// noneHeld waits, limit at most, until agent a holds no registration for
// its replay (docs/cache.md): each takes its events in its client's chain
// from then on.
func noneHeld(t *testing.T, a *agent.Agent, limit time.Duration) {
	t.Helper()
	clustertest.WaitFor(t, limit, func() error {
		if n := a.Stats().RegistrationsHeld; n > 0 {
			return fmt.Errorf("%d registrations still replayed to", n)
		}
		return nil
	})
}

// waitInterest waits until every server of cluster id has interest in
// subject over its leaf links (agenttest.World.WaitInterest).
func (w *world) waitInterest(id, subject string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.t.Context(), waitTime)
	defer cancel()
	if err := w.w.WaitInterest(ctx, cluster.ID(id), subject); err != nil {
		w.t.Fatal(err)
	}
}

// waitSourced waits until every cluster's events stream sources the
// others' GLOBAL events (agenttest.World.WaitSourced).
func (w *world) waitSourced() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.t.Context(), waitTime)
	defer cancel()
	if err := w.w.WaitSourced(ctx); err != nil {
		w.t.Fatal(err)
	}
}

// register registers a recording handler on c that completes at once with
// status.
func (tc *tclient) register(t *testing.T, codes []pmix.Status, info []pmix.Info, status pmix.Status, results ...pmix.Info) bus.ID {
	t.Helper()
	id, err := tc.c.RegisterEventHandler(t.Context(), codes, info, tc.rec.handler(status, results...))
	if err != nil {
		t.Fatalf("%s: register: %v", tc.name, err)
	}
	return id
}

// delivery is one handler invocation a recorder saw.
type delivery struct {
	Handler string
	Code    pmix.Status
	Source  pmix.Proc
	Info    []pmix.Info
	Results []pmix.Info
}

type recorder struct {
	mu  sync.Mutex
	got []delivery
}

func newRecorder() *recorder { return &recorder{} }

func (r *recorder) handler(status pmix.Status, results ...pmix.Info) bus.Handler {
	return func(c *bus.Call, done bus.Done) {
		r.mu.Lock()
		r.got = append(r.got, delivery{Handler: c.Name, Code: c.Code, Source: c.Source, Info: c.Info, Results: slices.Clone(c.Results)})
		r.mu.Unlock()
		done(status, results)
	}
}

func (r *recorder) all() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func (r *recorder) of(code pmix.Status) []delivery {
	var out []delivery
	for _, d := range r.all() {
		if d.Code == code {
			out = append(out, d)
		}
	}
	return out
}

// waitCount waits until the recorder has seen n deliveries of code.
func (r *recorder) waitCount(t *testing.T, code pmix.Status, n int) {
	t.Helper()
	clustertest.WaitFor(t, waitTime, func() error {
		if got := len(r.of(code)); got < n {
			return fmt.Errorf("%d of %d deliveries of %v", got, n, code)
		}
		return nil
	})
}
