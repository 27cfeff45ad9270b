package agenttest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/security"
	"github.com/pmixbus/pmixbus/subjects"
)

// ErrClosed: the world has been closed.
var ErrClosed = errors.New("agenttest: world closed")

// closeTimeout bounds the Close of a world that failed to start, and the
// cleanup of Start.
const closeTimeout = 30 * time.Second

// World is a running world: servers, agents, jobs and clients. Create it
// with Start (in a test) or New.
type World struct {
	spec    Spec // Nodes filled in
	keys    *security.Keys
	log     *slog.Logger
	sockDir string
	ownDirs []string // removed by Close
	mc      *cluster.MultiCluster
	lone    *cluster.Cluster

	mu            sync.Mutex
	jobs          []Job
	agents        map[string]*agent.Agent // by node: the one running now
	started       []startedAgent          // every agent started, for Close
	clients       map[string]*client.Client
	attached      []*client.Client // every client attached, for Close
	envs          map[string]map[string]string
	launcherConns []*nats.Conn // SignIn's, closed by Close
	closed        bool

	closeOnce sync.Once
	closeErr  error
}

type startedAgent struct {
	node string
	a    *agent.Agent
}

func newWorld(spec Spec, sockDir string, log *slog.Logger) (*World, error) {
	w := &World{
		spec:    spec.withNodes(),
		keys:    spec.Keys,
		log:     log,
		sockDir: sockDir,
		agents:  map[string]*agent.Agent{},
		clients: map[string]*client.Client{},
		envs:    map[string]map[string]string{},
	}
	if w.keys == nil && !spec.Insecure && !w.external() {
		keys, err := security.GenerateKeys()
		if err != nil {
			return nil, err
		}
		w.keys = keys
	}
	return w, nil
}

// New starts the world spec declares: its servers (with their JetStream
// stores under dir, which stays the caller's; empty means a temporary
// directory of the world's own, removed by Close), its agents, jobs and
// clients. log receives the servers', agents' and
// clients' logs; nil discards them. Close shuts the world down.
//
// Errors: one wrapping ErrInvalidSpec; otherwise the error of the server,
// agent or client that did not start, after what had started was shut
// down.
func New(ctx context.Context, spec Spec, dir string, log *slog.Logger) (_ *World, err error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	w, err := newWorld(spec, "", log)
	if err != nil {
		return nil, err
	}
	if w.sockDir, err = os.MkdirTemp("", "pxw"); err != nil {
		return nil, err
	}
	w.ownDirs = []string{w.sockDir}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
			defer cancel()
			_ = w.Close(cctx)
		}
	}()
	if dir == "" {
		dir = w.sockDir
	}
	if !w.external() {
		if err := w.startServers(ctx, filepath.Join(dir, "nats"), 0); err != nil {
			return nil, err
		}
	}
	if err := w.populate(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// Start is New for a test: servers store in t.TempDir(), logs go to t.Log
// (clustertest.Logger), sockets to SocketDir(t), and a failure fails t. The
// world is closed at cleanup, and when it started its own servers, a
// goroutine it left running fails t (clustertest.CheckGoroutines).
func Start(t testing.TB, spec Spec) *World {
	t.Helper()
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	w, err := newWorld(spec, "", clustertest.Logger(t))
	if err != nil {
		t.Fatalf("agenttest: %v", err)
	}
	if !w.external() {
		clustertest.CheckGoroutines(t) // first: its check runs after every other cleanup
	}
	w.sockDir = SocketDir(t)
	dir := t.TempDir() // before Close's cleanup, so removed after it
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if err := w.Close(ctx); err != nil {
			t.Errorf("agenttest: close: %v", err)
		}
	})
	if !w.external() {
		if err := w.startServers(t.Context(), dir, clustertest.LeafReconnectInterval); err != nil {
			t.Fatalf("agenttest: %v", err)
		}
	}
	if err := w.populate(t.Context()); err != nil {
		t.Fatalf("agenttest: %v", err)
	}
	return w
}

// SocketDir returns a temporary directory with a short path, removed at
// cleanup: Unix socket paths are limited to 108 bytes, which t.TempDir can
// exceed.
func SocketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pxw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func (w *World) external() bool { return w.spec.Clusters[0].URL != "" }

func (w *World) clusterSpecs() []cluster.ClusterSpec {
	specs := make([]cluster.ClusterSpec, len(w.spec.Clusters))
	for i, c := range w.spec.Clusters {
		specs[i] = cluster.ClusterSpec{ID: c.ID, Servers: max(c.Servers, 1)}
	}
	return specs
}

// startServers starts the world's clusters, storing under dir; their leaf
// links, if any, retry every leafReconnect (0: nats-server's default).
func (w *World) startServers(ctx context.Context, dir string, leafReconnect time.Duration) error {
	var auth *cluster.Auth
	if w.keys != nil {
		var err error
		if auth, err = w.keys.ServerAuth(); err != nil {
			return err
		}
	}
	if len(w.spec.Clusters) > 1 {
		cfg := cluster.DefaultMultiClusterConfig(dir, w.clusterSpecs()...)
		cfg.Auth = auth
		cfg.LeafTLS = w.spec.LeafTLS
		cfg.LeafReconnectInterval = leafReconnect
		cfg.Logger = w.log
		mc, err := cluster.StartMultiCluster(ctx, cfg)
		if err != nil {
			return fmt.Errorf("starting the clusters: %w", err)
		}
		w.mc = mc
		return nil
	}
	c := w.spec.Clusters[0]
	cfg := cluster.DefaultClusterConfig(c.ID, max(c.Servers, 1), dir)
	cfg.Auth = auth
	cfg.Logger = w.log
	lone, err := cluster.StartCluster(ctx, cfg)
	if err != nil {
		return fmt.Errorf("starting cluster %s: %w", c.ID, err)
	}
	w.lone = lone
	return nil
}

// populate starts the agents, then registers the jobs.
func (w *World) populate(ctx context.Context) error {
	for _, n := range w.Nodes() {
		if _, err := w.StartAgent(ctx, n); err != nil {
			return err
		}
	}
	for _, j := range w.spec.Jobs {
		if err := w.AddJob(ctx, j); err != nil {
			return err
		}
	}
	return nil
}

// StartAgent starts the agent of node, configured as the world's agents
// are, and makes it the node's agent. It registers no job: New and AddJob
// do that. Use it to start an agent again after its Shutdown.
//
// Errors: ErrClosed; the error agent.New or Start gave (an agent of the
// node running still among them).
func (w *World) StartAgent(ctx context.Context, node string) (*agent.Agent, error) {
	id, ok := w.clusterOf(node)
	if !ok {
		return nil, fmt.Errorf("agenttest: no node %q", node)
	}
	if w.isClosed() {
		return nil, ErrClosed
	}
	cfg := agent.DefaultConfig(id, node)
	cfg.URL = w.URL(id)
	cfg.Listen = "unix:" + filepath.Join(w.sockDir, subjects.EscapeToken(node)+".sock")
	cfg.Keys = w.keys
	cfg.Logger = w.log
	if w.spec.Agent != nil {
		w.spec.Agent(&cfg)
	}
	a, err := agent.New(cfg)
	if err == nil {
		err = a.Start(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", node, err)
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		_ = a.Shutdown(ctx)
		return nil, ErrClosed
	}
	w.agents[node] = a
	w.started = append(w.started, startedAgent{node: node, a: a})
	w.mu.Unlock()
	return a, nil
}

// AddJob registers job j with every agent of its cluster and registers its
// clients with the agents of their nodes, attaching them unless
// j.Detached. Its nodes must be nodes of the world.
//
// Errors: one wrapping ErrInvalidSpec; ErrClosed; the error an agent or a
// client gave.
func (w *World) AddJob(ctx context.Context, j Job) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	jobs := append(slices.Clone(w.jobs), j)
	if err := (Spec{Clusters: w.spec.Clusters, Jobs: jobs}).Validate(); err != nil {
		w.mu.Unlock()
		return err
	}
	w.jobs = jobs
	w.mu.Unlock()
	aj := agent.Job{Nspace: j.Nspace, Session: j.Session, Info: j.Info, Procs: j.procs()}
	for _, n := range w.nodesOf(j.Cluster) {
		if err := w.Agent(n).RegisterJob(ctx, aj); err != nil {
			return fmt.Errorf("agent %s: job %s: %w", n, j.Nspace, err)
		}
	}
	for _, p := range j.ranks() {
		var err error
		if j.Detached {
			_, err = w.register(ctx, p)
		} else {
			_, err = w.Attach(ctx, p.Name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Attach registers client name ("A:sim.0") with the agent of its node and
// attaches it in this process; it is then Client(name). Use it to attach a
// client again once its agent was started again.
//
// Errors: ErrClosed; the error RegisterClient gave (pmix.ErrDuplicateKey
// when that agent has registered the client already); the error
// client.Init gave.
func (w *World) Attach(ctx context.Context, name string) (*client.Client, error) {
	p, ok := w.proc(name)
	if !ok {
		return nil, fmt.Errorf("agenttest: no client %q", name)
	}
	env, err := w.register(ctx, p)
	if err != nil {
		return nil, err
	}
	opts := []client.Option{client.WithEnv(env)}
	if w.log != nil {
		opts = append(opts, client.WithLogger(w.log.With("client", name)))
	}
	c, err := client.Init(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("client %s: %w", name, err)
	}
	w.mu.Lock()
	closed := w.closed
	if !closed {
		w.clients[name] = c
		w.attached = append(w.attached, c)
	}
	w.mu.Unlock()
	if closed {
		_ = c.Finalize(ctx)
		return nil, ErrClosed
	}
	return c, nil
}

// register registers p with the agent of its node and keeps its
// environment.
func (w *World) register(ctx context.Context, p Proc) (map[string]string, error) {
	a := w.Agent(p.Node)
	if a == nil {
		return nil, fmt.Errorf("agenttest: client %s: no agent on %s", p.Name, p.Node)
	}
	env, err := a.RegisterClient(ctx, p.Proc)
	if err != nil {
		return nil, fmt.Errorf("client %s: %w", p.Name, err)
	}
	w.mu.Lock()
	w.envs[p.Name] = env
	w.mu.Unlock()
	return env, nil
}

// Close finalizes the clients attached, shuts the agents and the servers
// down, and removes the world's directories. It is safe to call more than
// once; later calls return what the first returned. Processes launched
// with Env are the caller's to stop, before.
//
// Errors: the agents' and servers' shutdown errors (ctx.Err() among them
// when ctx ends first), joined.
func (w *World) Close(ctx context.Context) error {
	w.closeOnce.Do(func() { w.closeErr = w.close(ctx) })
	return w.closeErr
}

func (w *World) close(ctx context.Context) error {
	w.mu.Lock()
	w.closed = true
	clients, agents, launchers := w.attached, w.started, w.launcherConns
	w.mu.Unlock()
	for _, nc := range launchers {
		nc.Close()
	}

	// Clients first, while their agents still answer.
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { _ = c.Finalize(ctx) }) // a client whose agent went is lost, not an error here
	}
	wg.Wait()
	errs := make([]error, len(agents))
	for i, s := range agents {
		wg.Go(func() {
			if err := s.a.Shutdown(ctx); err != nil {
				errs[i] = fmt.Errorf("agent %s: shutdown: %w", s.node, err)
			}
		})
	}
	wg.Wait()
	switch {
	case w.mc != nil:
		errs = append(errs, w.mc.Shutdown(ctx))
	case w.lone != nil:
		errs = append(errs, w.lone.Shutdown(ctx))
	}
	for _, d := range w.ownDirs {
		errs = append(errs, os.RemoveAll(d))
	}
	return errors.Join(errs...)
}

func (w *World) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// Agent returns the agent of node running now, or nil.
func (w *World) Agent(node string) *agent.Agent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.agents[node]
}

// Nodes returns every node, cluster by cluster, in the order agents start.
func (w *World) Nodes() []string {
	var out []string
	for _, c := range w.spec.Clusters {
		out = append(out, c.Nodes...)
	}
	return out
}

// Client returns client name ("A:sim.0") as last attached, or nil.
func (w *World) Client(name string) *client.Client {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.clients[name]
}

// Env returns the environment client name ("A:sim.0") was last registered
// with — what its process is launched with —, or nil.
func (w *World) Env(name string) map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.envs[name]
}

// Procs returns every rank of every job, job by job in the order they were
// added, rank by rank.
func (w *World) Procs() []Proc {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Proc
	for _, j := range w.jobs {
		out = append(out, j.ranks()...)
	}
	return out
}

func (w *World) proc(name string) (Proc, bool) {
	for _, p := range w.Procs() {
		if p.Name == name {
			return p, true
		}
	}
	return Proc{}, false
}

// URL returns the NATS URL of cluster id (several, comma-separated, for a
// cluster of several servers), or "" for no such cluster.
func (w *World) URL(id cluster.ID) string {
	if c := w.Cluster(id); c != nil {
		return c.URL()
	}
	for _, c := range w.spec.Clusters {
		if c.ID == id {
			return c.URL
		}
	}
	return ""
}

// Cluster returns the servers of cluster id, or nil when there is no such
// cluster or the world did not start its servers.
func (w *World) Cluster(id cluster.ID) *cluster.Cluster {
	switch {
	case w.mc != nil:
		return w.mc.Cluster(id)
	case w.lone != nil && w.lone.ID() == id:
		return w.lone
	}
	return nil
}

// Keys returns the keys the world's agents sign in with and its servers
// accept, or nil for an insecure world (Spec.Insecure, or servers running
// already and no Spec.Keys). Keys().Option(role) signs a connection of
// the test in as role; on nil it adds no key.
func (w *World) Keys() *security.Keys { return w.keys }

// SignIn returns what signs a launcher in to the server at url for one
// job (launch.Config.SignIn): with a job credential vouched for by the
// world's launcher key (security.JobCredential), or with no key in an
// insecure world. Its connections close when the world does.
func (w *World) SignIn(url string, opts ...nats.Option) func(nspace string) (*nats.Conn, error) {
	return func(nspace string) (*nats.Conn, error) {
		opts := append([]nats.Option{nats.Name("launcher " + nspace), nats.MaxReconnects(-1),
			nats.ReconnectWait(50 * time.Millisecond), nats.CustomInboxPrefix(security.LauncherInboxPrefix)}, opts...)
		if w.keys != nil {
			cred, err := w.keys.JobCredential(nspace)
			if err != nil {
				return nil, err
			}
			opts = append(opts, cred.Option())
		}
		nc, err := nats.Connect(url, opts...)
		if err != nil {
			return nil, err
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.closed {
			nc.Close()
			return nil, ErrClosed
		}
		w.launcherConns = append(w.launcherConns, nc)
		return nc, nil
	}
}

// MultiCluster returns the clusters and their hub when the world started
// several clusters, or nil.
func (w *World) MultiCluster() *cluster.MultiCluster { return w.mc }

func (w *World) clusterOf(node string) (cluster.ID, bool) {
	for _, c := range w.spec.Clusters {
		if slices.Contains(c.Nodes, node) {
			return c.ID, true
		}
	}
	return "", false
}

func (w *World) nodesOf(id cluster.ID) []string {
	for _, c := range w.spec.Clusters {
		if c.ID == id {
			return c.Nodes
		}
	}
	return nil
}
