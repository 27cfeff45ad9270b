package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
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
// jobs:
//
//	A: node a1: jobA.0 jobA.1 jobA2.0   node a2: jobA.2 jobA.3     (session s1)
//	B: node b1: jobB.0 jobB.1           node b2: jobB.2            (session s1 too)
type world struct {
	t       *testing.T
	mc      *cluster.MultiCluster
	sockDir string
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

var layout = []struct {
	cluster, nspace, session string
	nodes                    []string // node of each rank
}{
	{"A", "jobA", "s1", []string{"a1", "a1", "a2", "a2"}},
	{"A", "jobA2", "s1", []string{"a1"}},
	{"B", "jobB", "s1", []string{"b1", "b1", "b2"}},
}

func newWorld(t *testing.T) *world {
	t.Helper()
	clustertest.CheckGoroutines(t) // first, so that its check runs after every shutdown
	w := &world{t: t, agents: map[string]*agent.Agent{}, clients: map[string]*tclient{}}
	w.mc = clustertest.StartMultiCluster(t, cluster.ClusterSpec{ID: "A", Servers: 1}, cluster.ClusterSpec{ID: "B", Servers: 1})
	w.sockDir = shortDir(t)
	for _, node := range []string{"a1", "a2", "b1", "b2"} {
		w.startAgent(node)
	}
	for _, j := range layout {
		for _, node := range []string{"a1", "a2", "b1", "b2"} {
			if clusterOf(node) != j.cluster {
				continue
			}
			procs := map[pmix.Rank]string{}
			for r, n := range j.nodes {
				procs[pmix.Rank(r)] = n
			}
			if err := w.agents[node].RegisterJob(agent.Job{Nspace: j.nspace, Session: j.session, Procs: procs}); err != nil {
				t.Fatal(err)
			}
		}
		for r, node := range j.nodes {
			w.attach(j.cluster, pmix.Proc{Nspace: j.nspace, Rank: pmix.Rank(r)}, node)
		}
	}
	return w
}

// shortDir is a temporary directory with a short path: Unix socket paths
// are limited to 108 bytes, which t.TempDir can exceed.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pxb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func clusterOf(node string) string { return strings.ToUpper(node[:1]) }

func (w *world) startAgent(node string) *agent.Agent {
	w.t.Helper()
	cid := cluster.ID(clusterOf(node))
	cfg := agent.DefaultConfig(cid, node)
	cfg.URL = w.mc.Cluster(cid).URL()
	cfg.Listen = "unix:" + filepath.Join(w.sockDir, node+".sock")
	cfg.Logger = clustertest.Logger(w.t)
	cfg.HandlerTimeout = 10 * time.Second
	a := runAgent(w.t, cfg)
	w.agents[node] = a
	return a
}

// runAgent starts an agent, and shuts it down when the test ends.
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

func (w *world) attach(clusterID string, p pmix.Proc, node string) *tclient {
	w.t.Helper()
	env, err := w.agents[node].RegisterClient(p)
	if err != nil {
		w.t.Fatal(err)
	}
	c, err := client.Init(w.t.Context(), client.WithEnv(env))
	if err != nil {
		w.t.Fatalf("client %v: %v", p, err)
	}
	w.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Finalize(ctx)
	})
	tc := &tclient{name: clusterID + ":" + p.String(), cluster: clusterID, node: node, c: c, rec: newRecorder()}
	w.clients[tc.name] = tc
	return tc
}

// soloEnv registers a job of one process, rank 0 on node, with node's
// agent, and returns the launch environment of that process: for clients a
// test attaches its own way.
func (w *world) soloEnv(node, nspace string) map[string]string {
	w.t.Helper()
	a := w.agents[node]
	if err := a.RegisterJob(agent.Job{Nspace: nspace, Session: "s1", Procs: map[pmix.Rank]string{0: node}}); err != nil {
		w.t.Fatal(err)
	}
	env, err := a.RegisterClient(pmix.Proc{Nspace: nspace, Rank: 0})
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

// waitInterest waits until every server of cluster id routes subject
// somewhere: a subscription made in another cluster reaches it over the leaf
// links a moment after the subscriber's own server knows it.
//
// The interest must have come over a leaf link: the cluster's own
// subscribers to the subject (GLOBAL ones, say) do not count.
func (w *world) waitInterest(id, subject string) {
	w.t.Helper()
	clustertest.WaitFor(w.t, waitTime, func() error {
		remote := false
		for _, s := range w.mc.Cluster(cluster.ID(id)).Servers() {
			if !s.NATS().GlobalAccount().SubscriptionInterest(subject) {
				return fmt.Errorf("no interest in %s on %s", subject, s.Name())
			}
			lz, err := s.NATS().Leafz(&server.LeafzOptions{Subscriptions: true})
			if err != nil {
				return err
			}
			for _, l := range lz.Leafs {
				for _, sub := range l.Subs {
					remote = remote || subjects.Match(sub, subject)
				}
			}
		}
		if !remote {
			return fmt.Errorf("no interest in %s over the leaf links of cluster %s", subject, id)
		}
		return nil
	})
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
