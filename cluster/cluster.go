package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ClusterConfig configures the NATS cluster of one PMIx cluster
// (StartCluster): Servers servers joined by routes, all in JetStream domain
// ID.
type ClusterConfig struct {
	// ID is the PMIx cluster id, also the JetStream domain and NATS cluster
	// name. Required.
	ID ID

	// Servers is the number of servers, at least 1. A single server runs
	// standalone, without routes, and is named after the cluster; with more,
	// server i is named "<ID>-<i>".
	Servers int

	// BaseDir holds one JetStream store directory per server, named after the
	// server. Required.
	BaseDir string

	// Host is the interface all listeners bind to. Empty means "127.0.0.1".
	Host string

	// LeafRemotes are hub leaf-node URLs every server of the cluster links
	// to, so that the cluster keeps its link while any one server is up.
	LeafRemotes []string

	// LeafReconnectInterval: see Config.
	LeafReconnectInterval time.Duration

	// Auth and LeafTLS: see Config. Every server gets them; StartCluster
	// gives the cluster's routes a password of their own.
	Auth    *Auth
	LeafTLS *LeafTLS

	// Logger receives every server's log, with a "server" attribute. Nil
	// means no logging.
	Logger *slog.Logger

	// ReadyTimeout bounds the wait for the cluster to become ready, in
	// addition to the context given to StartCluster. Zero means
	// DefaultReadyTimeout.
	ReadyTimeout time.Duration
}

// DefaultClusterConfig returns the configuration of cluster id with servers
// servers on free ports of 127.0.0.1, storing under baseDir, without leaf
// links or logging.
func DefaultClusterConfig(id ID, servers int, baseDir string) ClusterConfig {
	return ClusterConfig{ID: id, Servers: servers, BaseDir: baseDir, ReadyTimeout: DefaultReadyTimeout}
}

// Validate reports every problem with c at once, in an error wrapping
// ErrInvalidConfig (and ErrInvalidID for a bad id).
func (c ClusterConfig) Validate() error {
	var p problems
	if err := c.ID.Validate(); err != nil {
		p.add(fmt.Errorf("ID: %w", err))
	}
	if c.Servers < 1 {
		p.addf("Servers: %d; a cluster needs at least one server", c.Servers)
	}
	if strings.TrimSpace(c.BaseDir) == "" {
		p.addf("BaseDir: empty; JetStream needs a directory")
	}
	for _, r := range c.LeafRemotes {
		if _, err := parseURL(r, "nats-leaf", "nats", "tls", "ws", "wss"); err != nil {
			p.add(fmt.Errorf("LeafRemotes: %w", err))
		}
	}
	if c.LeafReconnectInterval < 0 {
		p.addf("LeafReconnectInterval: negative (%v)", c.LeafReconnectInterval)
	}
	if c.ReadyTimeout < 0 {
		p.addf("ReadyTimeout: negative (%v)", c.ReadyTimeout)
	}
	if c.Auth != nil {
		c.Auth.validate(&p)
	}
	if c.LeafTLS != nil {
		c.LeafTLS.validate(&p, false)
	}
	return p.err()
}

// Cluster is the running NATS cluster of one PMIx cluster. Its methods are
// safe for concurrent use.
type Cluster struct {
	id      ID
	servers []*Server
}

// StartCluster starts the servers of cfg and waits until the cluster is
// ready: every server's listeners are open and the cluster's JetStream
// answers in its domain through every server.
//
// It returns an error wrapping ErrInvalidConfig for a bad cfg, ErrNotReady if
// the cluster did not become ready in time, or the error nats-server gave;
// servers already started are then shut down.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()
	if cfg.Servers > 1 {
		auth, err := cfg.Auth.withRoutePassword()
		if err != nil {
			return nil, err
		}
		cfg.Auth = auth
	}

	var (
		c   *Cluster
		err error
	)
	// The route ports are reserved before the servers start (see freePorts);
	// another process can take one in between, so a listen failure is
	// retried with fresh ports.
	for attempt := 0; ; attempt++ {
		c, err = startMembers(ctx, cfg)
		if err == nil || !errors.Is(err, errListen) || attempt == 2 || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if err := c.WaitReady(ctx); err != nil {
		_ = c.Shutdown(context.Background())
		return nil, err
	}
	return c, nil
}

// startMembers starts the servers of cfg without waiting for JetStream.
//
// A JetStream cluster needs configured routes on every member, the first
// included, and sizes its meta group from their number. So every member is
// given the routes of all members, itself included (nats-server ignores a
// route to itself), on route ports reserved up front: with "-1" a member's
// route port is only known once it has started, too late for the others'
// configuration.
func startMembers(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	c := &Cluster{id: cfg.ID}
	var routePorts []int
	var routes []string
	if cfg.Servers > 1 {
		host := cfg.Host
		if host == "" {
			host = "127.0.0.1"
		}
		var err error
		if routePorts, err = freePorts(host, cfg.Servers); err != nil {
			return nil, fmt.Errorf("cluster %s: reserve route ports: %w", cfg.ID, err)
		}
		for _, p := range routePorts {
			routes = append(routes, "nats-route://"+net.JoinHostPort(routeHost(host), strconv.Itoa(p)))
		}
	}
	for i := range cfg.Servers {
		sc := Config{
			Cluster:               cfg.ID,
			Name:                  string(cfg.ID),
			Host:                  cfg.Host,
			Port:                  -1,
			LeafRemotes:           cfg.LeafRemotes,
			LeafReconnectInterval: cfg.LeafReconnectInterval,
			Auth:                  cfg.Auth,
			LeafTLS:               cfg.LeafTLS,
			ReadyTimeout:          cfg.ReadyTimeout,
		}
		if cfg.Servers > 1 {
			sc.Name = fmt.Sprintf("%s-%d", cfg.ID, i)
			sc.RoutePort = routePorts[i]
			sc.Routes = routes
		}
		sc.StoreDir = filepath.Join(cfg.BaseDir, sc.Name)
		if cfg.Logger != nil {
			sc.Logger = cfg.Logger.With("server", sc.Name)
		}
		if err := sc.Validate(); err != nil {
			_ = c.Shutdown(context.Background())
			return nil, err
		}
		s := &Server{cfg: sc.withDefaults()}
		if err := s.start(ctx, false); err != nil {
			_ = c.Shutdown(context.Background())
			return nil, fmt.Errorf("cluster %s: %w", cfg.ID, err)
		}
		c.servers = append(c.servers, s)
	}
	return c, nil
}

// freePorts returns n distinct ports that were free on host a moment ago.
func freePorts(host string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		// Held open until all are taken, so the kernel hands out distinct ports.
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// routeHost is the address peers dial to reach a listener bound to host.
func routeHost(host string) string {
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "127.0.0.1"
	}
	return host
}

// WaitReady waits until the cluster's JetStream answers in its domain
// through every running server. It returns an error wrapping ErrNotReady if
// it does not before ctx ends.
func (c *Cluster) WaitReady(ctx context.Context) error {
	for _, s := range c.running() {
		if err := waitJetStream(ctx, s.ClientURL(), c.id.Domain(), s.cfg.Auth); err != nil {
			return fmt.Errorf("cluster %s: server %s: %w", c.id, s.Name(), err)
		}
	}
	return nil
}

// ID returns the cluster id.
func (c *Cluster) ID() ID { return c.id }

// Domain returns the cluster's JetStream domain, its id.
func (c *Cluster) Domain() string { return c.id.Domain() }

// Servers returns the cluster's servers, running or not, in start order.
func (c *Cluster) Servers() []*Server { return append([]*Server(nil), c.servers...) }

// Server returns the i-th server, for fault injection (Shutdown, Restart).
// It panics if i is out of range, like indexing Servers() would.
func (c *Cluster) Server(i int) *Server { return c.servers[i] }

// ClientURLs returns every server's client URL, in start order.
func (c *Cluster) ClientURLs() []string {
	urls := make([]string, len(c.servers))
	for i, s := range c.servers {
		urls[i] = s.ClientURL()
	}
	return urls
}

// URL returns the client URLs joined by commas, the form nats.Connect takes
// to fail over between servers.
func (c *Cluster) URL() string { return strings.Join(c.ClientURLs(), ",") }

// running returns the servers that are up.
func (c *Cluster) running() []*Server {
	var up []*Server
	for _, s := range c.servers {
		if s.Running() {
			up = append(up, s)
		}
	}
	return up
}

// Shutdown shuts every server down, in parallel, and waits for them. It is
// safe to call more than once; later calls wait for the same servers.
//
// It returns ctx.Err() if ctx ends first.
func (c *Cluster) Shutdown(ctx context.Context) error {
	return shutdownAll(ctx, c.servers)
}

// shutdownAll shuts servers down in parallel and waits for all of them or
// for ctx to end.
func shutdownAll(ctx context.Context, servers []*Server) error {
	var wg sync.WaitGroup
	errs := make([]error, len(servers))
	for i, s := range servers {
		wg.Go(func() { errs[i] = s.Shutdown(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
