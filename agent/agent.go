package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
)

// Agent is the per-node daemon: the PMIx server's role. Create it with New,
// then Start it.
type Agent struct {
	cfg    Config
	log    *slog.Logger
	nc     *nats.Conn
	ownNC  bool
	server *cluster.Server // embedded, when no URL or Conn was given
	// embeddedLeaf: the embedded server links to a hub as a leaf node.
	embeddedLeaf bool
	ln           net.Listener
	addr         string // what clients dial, "unix:/…" or "tcp:…"

	seq      atomic.Uint64 // event ids
	idPrefix string        // "<nuid>." : unique per agent run

	outcomes outcomeQueue // reports waiting to be published
	cache    *jetstream.EventCache
	evicted  atomic.Uint64

	pl *publishLookup // PMIx_Publish/Lookup/Unpublish (publishlookup.go)

	hellos helloGate // connections yet to say hello (conn.go)

	mu       sync.Mutex
	retained map[string]*retention      // by nspace: job events kept for local clients
	jobs     map[string]*job            // by nspace
	expected map[pmix.Proc]*clientEntry // registered clients, attached or not
	router   *router
	rmSub    *nats.Subscription
	// Read on every event and every chain, so kept copy-on-write: writers
	// replace the slice under mu, readers load it without locking.
	rmFuncs  atomic.Pointer[[]func(*Message)]
	outFuncs atomic.Pointer[[]func(OutcomeReport)]
	attached atomic.Pointer[[]*clientConn] // the attached clients
	closed   bool

	wg   sync.WaitGroup
	done chan struct{}
	once sync.Once
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
}

type clientEntry struct {
	proc       pmix.Proc
	job        *job
	credential string
	uid        int // -1: any
	conn       *clientConn
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
		retained: make(map[string]*retention),
		expected: make(map[pmix.Proc]*clientEntry),
		done:     make(chan struct{}),
		idPrefix: nuid.Next() + ".",
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.outcomes.ready = make(chan struct{}, 1)
	a.router = newRouter(a)
	return a, nil
}

// Start connects to NATS (starting the embedded server if so configured)
// and begins accepting clients. It returns once clients can attach.
func (a *Agent) Start(ctx context.Context) error {
	switch {
	case a.cfg.Conn != nil:
		a.nc = a.cfg.Conn
	default:
		url := a.cfg.URL
		if url == "" {
			scfg := cluster.DefaultConfig(a.cfg.Cluster, a.cfg.StoreDir)
			if a.cfg.Embedded != nil {
				a.cfg.Embedded(&scfg)
			}
			a.embeddedLeaf = len(scfg.LeafRemotes) > 0
			srv, err := cluster.StartServer(ctx, scfg)
			if err != nil {
				return fmt.Errorf("embedded NATS: %w", err)
			}
			a.server = srv
			url = srv.ClientURL()
		}
		nc, err := nats.Connect(url, nats.Name("pmixbus-agent "+string(a.cfg.Cluster)+"/"+a.cfg.Node),
			nats.MaxReconnects(-1), nats.ReconnectBufSize(64<<20))
		if err != nil {
			a.stopServer(ctx)
			return pmix.Errorf(pmix.ErrUnreach, "connecting to NATS at %s: %w", url, err)
		}
		a.nc, a.ownNC = nc, true
	}
	if err := a.openCache(ctx); err != nil {
		a.closeNATS(ctx)
		return pmix.Errorf(pmix.ErrInit, "event cache: %w", err)
	}
	if err := a.startPublishLookup(); err != nil {
		a.closeNATS(ctx)
		return pmix.Errorf(pmix.ErrInit, "publish/lookup: %w", err)
	}
	network, addr, _ := splitListen(a.cfg.Listen)
	if network == "unix" {
		_ = os.Remove(addr) // a stale socket from an agent that died
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		a.closeNATS(ctx)
		return pmix.Errorf(pmix.ErrInit, "listening on %s: %w", a.cfg.Listen, err)
	}
	if network == "unix" {
		_ = os.Chmod(addr, 0o700)
	}
	a.ln = ln
	a.addr = network + ":" + ln.Addr().String()
	a.goFunc(a.router.dispatch)
	a.goFunc(a.publishOutcomes)
	a.goFunc(a.acceptLoop)
	a.log.Info("agent started", "listen", a.addr, "nats", a.nc.ConnectedUrl())
	return nil
}

// Addr is what clients dial: "unix:/path" or "tcp:127.0.0.1:port".
func (a *Agent) Addr() string { return a.addr }

// NATS returns the agent's connection, for hosts that want to share it.
func (a *Agent) NATS() *nats.Conn { return a.nc }

// Server returns the embedded NATS server, or nil.
func (a *Agent) Server() *cluster.Server { return a.server }

// goFunc runs f in a goroutine the agent waits for on Shutdown.
func (a *Agent) goFunc(f func()) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		f()
	}()
}

func (a *Agent) acceptLoop() {
	for {
		c, err := a.ln.Accept()
		if err != nil {
			select {
			case <-a.done:
			default:
				a.log.Error("accept failed; no more clients can attach", "err", err)
			}
			return
		}
		cc := newClientConn(a, c)
		a.goFunc(cc.serve)
	}
}

// Shutdown stops accepting clients, drops the attached ones (they see
// PMIX_ERR_LOST_CONNECTION), unsubscribes, closes the NATS connection it
// owns and stops the embedded server. It is safe to call more than once.
// It returns ctx.Err() if the goroutines did not finish in time.
func (a *Agent) Shutdown(ctx context.Context) error {
	a.once.Do(func() {
		a.cancel()
		close(a.done)
		a.mu.Lock()
		a.closed = true
		var conns []*clientConn
		for _, e := range a.expected {
			if e.conn != nil {
				conns = append(conns, e.conn)
			}
		}
		if a.rmSub != nil {
			_ = a.rmSub.Unsubscribe()
		}
		for _, ret := range a.retained {
			if ret.r != nil {
				ret.r.Stop() // the retention stays for the next agent of this node
			}
		}
		a.mu.Unlock()
		if a.ln != nil {
			_ = a.ln.Close()
		}
		for _, c := range conns {
			c.close(nil)
		}
		a.closePublishLookup(ctx)
		a.router.close()
	})
	waited := make(chan struct{})
	go func() { a.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		return ctx.Err()
	}
	a.closeNATS(ctx)
	if a.ln != nil && a.ln.Addr().Network() == "unix" {
		_ = os.Remove(a.ln.Addr().String())
	}
	return nil
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
