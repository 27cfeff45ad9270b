package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/launch/liveness"
	"github.com/pmixbus/pmixbus/nodefence"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
	"github.com/pmixbus/pmixbus/query"
	"github.com/pmixbus/pmixbus/router"
	"github.com/pmixbus/pmixbus/security"
)

// Agent is the per-node daemon: the PMIx server's role. Create it with New,
// then Start it.
type Agent struct {
	cfg    Config
	log    *slog.Logger
	nc     *nats.Conn
	ownNC  bool
	server *cluster.Server // embedded, when no URL or Conn was given
	// replicas of the streams and buckets the agent creates: Config.Replicas,
	// or the cluster's default once connected.
	replicas int
	ln       net.Listener
	topo     topology // the node's topology for the clients (loadTopology); set before any attaches
	addr     string   // what clients dial, "unix:/…" or "tcp:…"

	seq      atomic.Uint64 // event ids
	idPrefix string        // "<nuid>." : unique per agent run

	outcomes *router.Outcomes // reports published (set by Start)
	infos    proto.InfoCache  // the last event info encoded for invocations
	link     *router.Link     // to the other clusters, for GLOBAL events (set by Start)
	stats    agentStats
	cache    *jetstream.EventCache
	// retention keeps job events for local clients (router.Retention)
	retention *router.Retention
	evicted   atomic.Uint64

	pl   *publishLookup // PMIx_Publish/Lookup/Unpublish (publishlookup.go)
	coll *collectives   // PMIx_Fence, Commit, Get (collective.go)
	iofc iofClients     // PMIx_IOF_push, PMIx_IOF_pull (iofclient.go)
	// onConnect: the host's OnConnect functions, copy-on-write as rmFuncs.
	onConnect atomic.Pointer[[]func(ConnectReport)]

	launcher  atomic.Pointer[launch.Daemon]             // the launch service (launch.go)
	spawned   launch.SpawnedJobs                        // job info of jobs its clients spawned (spawn.go)
	output    *iof.Service                              // the output service (output.go); set by Start
	live      atomic.Pointer[liveness.Service]          // the agent's liveness key (liveness.go)
	downFuncs atomic.Pointer[[]func(liveness.NodeDown)] // OnNodeDown's, copy-on-write
	// abortFuncs: the host's OnAbort functions, copy-on-write (lifecycle.go).
	abortFuncs atomic.Pointer[[]func(AbortRequest)]

	hellos  helloGate      // connections yet to say hello (conn.go)
	queries *query.Service // PMIx_Query_info (query.go)

	mu       sync.Mutex
	jobs     map[string]*job            // by nspace
	expected map[pmix.Proc]*clientEntry // registered clients, attached or not
	router   *router.Router
	rmSubs   []*nats.Subscription // job and environment RM events
	rmMu     sync.Mutex           // serializes the rmFuncs calls of both
	// Read on every event and every chain, so kept copy-on-write: writers
	// replace the slice under mu, readers load it without locking.
	rmFuncs  atomic.Pointer[[]func(*event.Message)]
	outFuncs atomic.Pointer[[]func(event.OutcomeReport)]
	attached atomic.Pointer[[]router.Recipient] // the attached clients
	// attachedStale: attached is out of date (guarded by mu when set to
	// false; see attachedChangedLocked).
	attachedStale atomic.Bool
	// composed: every service is in place. The NATS connection's
	// handlers, set before the services are, look at them only then (the
	// router's own tail check covers what a reconnect during start would
	// have asked for).
	composed atomic.Bool
	conns    map[*clientConn]struct{} // every accepted connection, in hello or attached
	closed   bool
	started  bool

	// Goroutines the agent owns: goFunc adds them under goMu until
	// Shutdown sets stopping, so none is added once Shutdown waits.
	goMu     sync.Mutex
	stopping bool
	wg       sync.WaitGroup

	done       chan struct{}
	once       sync.Once
	finishOnce sync.Once
	// shutdownCtx is Shutdown's context once it began: cleanup work
	// (removing a detached client's data) is bounded by it.
	shutdownCtx atomic.Pointer[context.Context]
	// ctx is cancelled when Shutdown begins: work the agent started on its
	// own (JetStream calls) stops then rather than holding Shutdown up.
	ctx    context.Context
	cancel context.CancelFunc
}

type job struct {
	nspace  string
	session string
	info    []pmix.Info
	procs   map[pmix.Rank]string // rank → node
	// apps are the job's app contexts (Job.Apps), appStart the first rank
	// of each; nil for a job of one app.
	apps     []App
	appStart []pmix.Rank
	// home and others: for a job that runs on several clusters (nodes
	// "cluster:node" in procs), the cluster that names it (its rank 0's)
	// and the clusters it runs on but this one; "" and nil otherwise.
	home   cluster.ID
	others []cluster.ID
	// onNode holds what was computed of the job's procs on a node, filled
	// as asked (jobinfo.go): a job is not changed once registered (a new
	// registration makes a new job). Guarded by Agent.mu.
	onNode map[string]*nodeRanks
	// fence is the job's node barrier (nodefence.go), made at the first
	// hello of one of its ranks when they all run on this node; fenceMade
	// once that was tried. Guarded by Agent.mu.
	fence     *nodefence.Barrier
	fenceMade bool
}

type clientEntry struct {
	proc       pmix.Proc
	job        *job
	credential string
	uid        int // -1: any
	conn       *clientConn

	// Its life (lifecycle.go), guarded by Agent.mu.
	state        ClientState
	exitWatched  bool        // WithExitWatched: the host reports its end
	lostReported bool        // PMIX_ERR_PROC_TERM_WO_SYNC raised for it
	incarnation  string      // tells its termination events from another registration's
	diag         *iof.Source // its logs, when the launch service did not start it (log.go)
}

// New validates cfg and returns an agent that is not yet running.
func New(cfg Config) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Agent{
		cfg:      cfg,
		log:      log.With("cluster", string(cfg.Cluster), "node", cfg.Node),
		jobs:     make(map[string]*job),
		expected: make(map[pmix.Proc]*clientEntry),
		conns:    make(map[*clientConn]struct{}),
		done:     make(chan struct{}),
		idPrefix: nuid.Next() + ".",
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.retention = router.NewRetention(router.RetentionConfig{Place: a.place(), Log: a.log, Ctx: a.ctx, GoFunc: a.goFunc})
	a.queries = a.newQueries()
	return a, nil
}

// Start connects to NATS (starting the embedded server if so configured)
// and begins accepting clients. It returns once clients can attach. A Start
// that fails undoes what it started.
//
// Errors: ErrClosed after Shutdown or a second Start; pmix.ErrUnreach when
// NATS cannot be reached; pmix.ErrInit when the event cache, publish/lookup,
// the socket or the liveness key cannot be set up (another agent listening
// on the socket among them, or another agent of the node alive in the
// cluster: liveness.ErrNodeTaken).
func (a *Agent) Start(ctx context.Context) (err error) {
	a.mu.Lock()
	if a.closed || a.started {
		a.mu.Unlock()
		return fmt.Errorf("%w: Start called twice or after Shutdown", ErrClosed)
	}
	a.started = true
	a.mu.Unlock()
	defer func() {
		if err != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = a.Shutdown(sctx)
		}
	}()
	switch {
	case a.cfg.Conn != nil:
		a.nc = a.cfg.Conn
	default:
		url := a.cfg.URL
		if url == "" {
			scfg, err := a.cfg.embeddedServer()
			if err != nil {
				return fmt.Errorf("embedded NATS: %w", err)
			}
			srv, err := cluster.StartServer(ctx, scfg)
			if err != nil {
				return fmt.Errorf("embedded NATS: %w", err)
			}
			a.server = srv
			url = srv.ClientURL()
		}
		opts := []nats.Option{nats.Name("pmixbus-agent " + string(a.cfg.Cluster) + "/" + a.cfg.Node),
			nats.MaxReconnects(-1), nats.ReconnectBufSize(64 << 20)}
		if ttl := a.cfg.livenessKnobs().TTL; ttl > 0 {
			// A link cut off silently (no FIN, no RST) is found stale
			// after three unanswered pings: within the liveness TTL, when
			// the others declare this node down, not nats.go's default
			// of 4 minutes.
			opts = append(opts, nats.PingInterval(max(ttl/3, 100*time.Millisecond)), nats.MaxPingsOutstanding(2))
		}
		nc, err := nats.Connect(url, append(opts, a.cfg.Keys.Option(security.RoleAgent))...)
		if a.cfg.Keys != nil && errors.Is(err, nats.ErrNkeysNotSupported) {
			// nats.go signs in only where the server asks it to. Without
			// the key the agent gives nothing away: nkeys never show the
			// seed, and this server would take any signature.
			a.log.Warn("the NATS server has no authentication: connecting without the agent key; whoever reaches it can bypass the agent (docs/security.md)", "url", url)
			nc, err = nats.Connect(url, opts...)
		}
		if errors.Is(err, nats.ErrAuthorization) {
			return pmix.Errorf(pmix.ErrUnreach, "connecting to NATS at %s: %w: the server refused the agent's key, or it wants one and the agent has none (%v; see docs/security.md)", url, err, a.cfg.Keys)
		}
		if err != nil {
			return pmix.Errorf(pmix.ErrUnreach, "connecting to NATS at %s: %w", url, err)
		}
		a.nc, a.ownNC = nc, true
	}
	a.watchNATS(a.nc)
	if err := a.serveJobAuthority(); err != nil {
		return err
	}
	a.replicas = a.cfg.Replicas
	if a.replicas == 0 {
		a.replicas = cluster.DefaultReplicas(a.nc)
	}
	a.outcomes = router.NewOutcomes(a.nc, string(a.cfg.Cluster), a.cfg.Node, a.log, a.ctx, a.done)
	if err := a.openCache(ctx); err != nil {
		return pmix.Errorf(pmix.ErrInit, "event cache: %w", err)
	}
	a.router = router.New(router.Config{
		Transport: router.NATS(a.nc), Place: a.place(), Host: routerHost{a},
		Retention: a.retention, Outcomes: a.outcomes,
		Log: a.log, Done: a.done, Inbox: a.cfg.inboxSize,
	})
	a.link = router.NewLink(router.LinkConfig{
		Router: a.router, NATS: a.nc, Cluster: a.cfg.Cluster, Cache: a.cache, Log: a.log, Ctx: a.ctx, Done: a.done, GoFunc: a.goFunc,
		OnDown: func() {
			if p := a.pl; p != nil && p.global != p.local {
				p.svc.GlobalLinkDown() // its GLOBAL values may be stale from now on
			}
		},
	})
	if err := a.router.Sequence(a.ctx, a.cache); err != nil {
		return pmix.Errorf(pmix.ErrInit, "event cache: %w", err)
	}
	if err := a.startPublishLookup(ctx); err != nil {
		return pmix.Errorf(pmix.ErrInit, "publish/lookup: %w", err)
	}
	if err := a.startCollective(ctx); err != nil {
		return pmix.Errorf(pmix.ErrInit, "collectives: %w", err)
	}
	a.loadTopology(ctx)
	group := -1
	if u := a.cfg.JobUser; u != nil {
		group = int(u.GID)
	}
	ln, addr, err := listen(a.cfg.Listen, group)
	if err != nil {
		return err
	}
	a.ln, a.addr = ln, addr
	if err := a.startLiveness(ctx); err != nil {
		return pmix.Errorf(pmix.ErrInit, "liveness: %w", err)
	}
	if err := a.startOutput(ctx); err != nil {
		return pmix.Errorf(pmix.ErrInit, "output: %w", err)
	}
	if err := a.startLaunch(ctx); err != nil {
		return pmix.Errorf(pmix.ErrInit, "launch: %w", err)
	}
	a.link.Watch(ctx)
	a.goFunc(a.router.Dispatch)
	a.goFunc(a.outcomes.Publish)
	a.goFunc(a.outcomes.Probe)
	a.goFunc(a.acceptLoop)
	a.composed.Store(true)
	a.log.Info("agent started", "listen", a.addr, "nats", a.nc.ConnectedUrl())
	return nil
}

// listen opens the clients' socket. A Unix socket file that no process
// listens on is what an agent that died leaves behind, and is replaced;
// one that answers belongs to a running agent, and is left alone. With
// group >= 0 (the job user's), that group may connect too, and enter
// the default socket directory (not list it, nor create in it).
func listen(spec string, group int) (net.Listener, string, error) {
	network, addr, _ := splitListen(spec)
	if network == "unix" && filepath.Dir(addr) == SocketDir() {
		if err := privateDir(SocketDir(), group); err != nil {
			return nil, "", err
		}
	}
	if network == "unix" {
		if c, err := net.DialTimeout("unix", addr, time.Second); err == nil {
			_ = c.Close()
			return nil, "", pmix.Errorf(pmix.ErrInit, "another agent is listening on %s (give this one another --listen, or stop that one)", addr)
		} else if _, serr := os.Stat(addr); serr == nil {
			_ = os.Remove(addr) // stale: refused, nobody listens
		}
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, "", pmix.Errorf(pmix.ErrInit, "listening on %s: %w", spec, err)
	}
	if network == "unix" {
		_ = os.Chmod(addr, 0o700)
		if group >= 0 {
			if err := os.Chown(addr, -1, group); err != nil {
				_ = ln.Close()
				return nil, "", pmix.Errorf(pmix.ErrInit, "giving the socket %s to the job user's group %d: %v", addr, group, err)
			}
			_ = os.Chmod(addr, 0o770)
		}
	}
	return ln, network + ":" + ln.Addr().String(), nil
}

// serveJobAuthority answers, on NATS servers the agent did not start
// (pmixbus keys --nats-conf: their auth_callout), which job a launcher's
// credential is for (security.JobAuthority), when the agent holds the
// keys that takes. pmixbus's own servers answer themselves.
func (a *Agent) serveJobAuthority() error {
	k := a.cfg.Keys
	if a.server != nil || !a.ownNC || !k.Has(security.RoleAgent) || !k.Has(security.RoleLauncher) {
		return nil
	}
	ja, err := k.JobAuthority(nil, a.log)
	if err == nil {
		_, err = ja.Serve(a.nc)
	}
	if err != nil {
		return pmix.Errorf(pmix.ErrInit, "serving launchers' job credentials: %v", err)
	}
	return nil
}

// Addr is what clients dial: "unix:/path" or "tcp:127.0.0.1:port".
func (a *Agent) Addr() string { return a.addr }

// NATS returns the agent's connection, for hosts that want to share it.
func (a *Agent) NATS() *nats.Conn { return a.nc }

// Server returns the embedded NATS server, or nil.
func (a *Agent) Server() *cluster.Server { return a.server }

// goFunc runs f in a goroutine the agent waits for on Shutdown, and
// reports whether it did: once Shutdown has begun it refuses, so that no
// goroutine starts while Shutdown waits. It may be called from goroutines
// the agent does not own (nats.go callbacks).
func (a *Agent) goFunc(f func()) bool {
	a.goMu.Lock()
	if a.stopping {
		a.goMu.Unlock()
		return false
	}
	a.wg.Add(1)
	a.goMu.Unlock()
	go func() {
		defer a.wg.Done()
		f()
	}()
	return true
}

// every calls f every interval until the agent stops, on the calling
// goroutine.
func (a *Agent) every(interval time.Duration, f func()) { a.everyOr(interval, nil, f) }

// everyOr is every, also calling f whenever wake receives.
func (a *Agent) everyOr(interval time.Duration, wake <-chan struct{}, f func()) {
	a.until(interval, wake, func() bool { f(); return false })
}

// until calls f every interval, and whenever wake receives, until f
// reports it is done or the agent shuts down.
func (a *Agent) until(interval time.Duration, wake <-chan struct{}, f func() (done bool)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-a.done:
			return
		case <-t.C:
		case <-wake:
		}
		if f() {
			return
		}
	}
}

// isClosed reports whether Shutdown has begun, without locking.
func (a *Agent) isClosed() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

func (a *Agent) acceptLoop() {
	for {
		c, err := a.ln.Accept()
		if err != nil {
			if !a.isClosed() {
				a.log.Error("accept failed; no more clients can attach", "err", err)
			}
			return
		}
		cc := newClientConn(a, c)
		a.mu.Lock()
		if a.closed {
			a.mu.Unlock()
			_ = c.Close()
			return
		}
		a.conns[cc] = struct{}{}
		a.mu.Unlock()
		if !a.goFunc(cc.serve) {
			cc.close(nil)
		}
	}
}

// forget drops a closed connection from the agent's set.
func (a *Agent) forget(cc *clientConn) {
	a.mu.Lock()
	delete(a.conns, cc)
	a.mu.Unlock()
}

// Shutdown stops accepting clients, closes every connection (attached
// clients see PMIX_ERR_LOST_CONNECTION; one still in its hello is simply
// closed), unsubscribes, closes the NATS connection it owns and stops the
// embedded server. It is safe to call more than once, and concurrently.
//
// Every wait is bounded by ctx: cleanup of the detached clients'
// published data, the publish/lookup watches, and the agent's goroutines.
// If ctx ends first, Shutdown still closes NATS and stops the embedded
// server, without waiting for the goroutines left (they end on their own
// once NATS is closed), and returns ctx.Err().
func (a *Agent) Shutdown(ctx context.Context) error {
	a.once.Do(func() { a.beginShutdown(ctx) })
	waited := make(chan struct{})
	go func() { a.wg.Wait(); close(waited) }()
	var err error
	select {
	case <-waited:
	case <-ctx.Done():
		err = ctx.Err()
		a.log.Warn("shutdown: goroutines still running when its context ended; closing NATS without them", "err", err)
	}
	a.finishOnce.Do(func() { a.closeNATS(ctx) })
	return err
}

// beginShutdown signals everything to stop and closes the connections; it
// does not wait for goroutines.
func (a *Agent) beginShutdown(ctx context.Context) {
	a.shutdownCtx.Store(&ctx)
	// The processes this agent started end first, while their ends can
	// still be raised and reported.
	a.stopLaunch(ctx)
	a.stopOutput()
	a.removeSharedTopology()
	a.goMu.Lock()
	a.stopping = true
	a.goMu.Unlock()
	a.cancel()
	close(a.done)
	// First, while NATS is up: the key goes, so that no agent declares
	// this node down.
	a.stopLiveness(ctx)
	a.mu.Lock()
	a.closed = true
	fences := a.fencesLocked() // nodefence.go
	conns := make([]*clientConn, 0, len(a.conns))
	for cc := range a.conns {
		conns = append(conns, cc)
	}
	for _, sub := range a.rmSubs {
		_ = sub.Unsubscribe()
	}
	a.mu.Unlock()
	// The ranks waiting at a barrier hear the agent is gone, as those
	// waiting for a fence's reply do.
	for _, b := range fences {
		b.Break(pmix.ErrLostConnection)
	}
	a.retention.Stop() // its state stays for the next agent of this node
	if a.ln != nil {
		_ = a.ln.Close() // also removes the socket file
	}
	// Connections close concurrently: each detach may clean up data on
	// NATS, bounded by ctx (see cleanupContext).
	a.wg.Add(len(conns))
	for _, cc := range conns {
		go func() {
			defer a.wg.Done()
			cc.close(nil)
		}()
	}
	a.closePublishLookup(ctx)
	a.closeCollective(ctx)
	for _, b := range fences {
		b.Close()
	}
	if a.router != nil {
		a.router.Close()
	}
}

// cleanupContext bounds work that tidies up after a client or job (its
// published data): ctx, cleanupTimeout, and Shutdown's context once
// Shutdown has begun.
func (a *Agent) cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	if p := a.shutdownCtx.Load(); p != nil {
		stop := context.AfterFunc(*p, cancel)
		return ctx, func() { stop(); cancel() }
	}
	return ctx, cancel
}

func (a *Agent) closeNATS(ctx context.Context) {
	if a.ownNC && a.nc != nil {
		a.nc.Close()
	}
	a.stopServer(ctx)
}

func (a *Agent) stopServer(ctx context.Context) {
	if a.server != nil {
		if err := a.server.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
			a.log.Warn("embedded NATS shutdown", "err", err)
		}
	}
}

// origin is where a local client's events come from.
func (a *Agent) origin(e *clientEntry) bus.Origin {
	return bus.Origin{Cluster: string(a.cfg.Cluster), Node: a.cfg.Node, Session: e.job.session, Proc: e.proc}
}

// nextEventID returns an id unique across agents and their restarts.
func (a *Agent) nextEventID() string {
	return a.idPrefix + strconv.FormatUint(a.seq.Add(1), 10)
}
