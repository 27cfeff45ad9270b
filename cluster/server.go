package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Server is one embedded NATS server with JetStream. Its methods are safe for
// concurrent use.
type Server struct {
	life sync.Mutex // serializes starts, so one instance runs at a time

	mu       sync.Mutex
	cfg      Config // ports pinned to the ones first bound, so Restart reuses them
	ns       *server.Server
	lock     *storeLock // the store directory, held while ns runs
	authNC   *nats.Conn // the Auth.Authorizer's connection, closed with ns
	stopping bool
	stopped  chan struct{} // closed once ns has shut down completely
}

// StartServer starts a server configured by cfg and waits until it is ready:
// its listeners are open and its JetStream answers an account-info request
// made in its domain from a client connection. A server with Routes is
// ready only once its cluster has a JetStream quorum, so start the members
// of a cluster concurrently, or use StartCluster.
//
// It returns an error wrapping ErrInvalidConfig for a bad cfg, ErrStoreInUse
// if another running server holds cfg.StoreDir (checked before the store is
// read), ErrNotReady if the server did not become ready before ctx ended or
// cfg.ReadyTimeout passed (the server is then shut down), or the error
// nats-server gave.
func StartServer(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg.withDefaults()}
	if err := s.start(ctx, true); err != nil {
		return nil, err
	}
	return s, nil
}

// start starts a new nats-server instance from s.cfg. Members of a routed
// cluster start with waitJS false: their JetStream needs a quorum of peers
// that may not be running yet.
func (s *Server) start(ctx context.Context, waitJS bool) error {
	s.life.Lock()
	defer s.life.Unlock()

	s.mu.Lock()
	if s.ns != nil && !s.stopping {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrRunning, s.cfg.Name)
	}
	cfg := s.cfg
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()

	opts, err := options(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.StoreDir, 0o755); err != nil {
		return fmt.Errorf("cluster: server %s: %w", cfg.Name, err)
	}
	lock, err := lockStore(cfg.StoreDir)
	if err != nil {
		return err
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		lock.release()
		return fmt.Errorf("cluster: server %s: %w", cfg.Name, err)
	}
	if len(cfg.LeafRemotes) == 0 {
		if err := mapTop(ns); err != nil {
			ns.Shutdown()
			return err
		}
	}
	logged := attachLogger(ns, cfg.Logger)
	ns.Start()

	// Start enables JetStream, then opens the client listener before it
	// returns. When either fails (a bad store, a clustered server without
	// routes, a taken port) it returns early and only logs why: waiting
	// would only time out.
	if ns.Addr() == nil || !ns.JetStreamEnabled() {
		ns.Shutdown()
		ns.WaitForShutdown()
		lock.release()
		why := logged.String()
		if why == "" {
			return fmt.Errorf("%w: server %s: %w, and logged no error", ErrNotReady, cfg.Name, errStart)
		}
		return fmt.Errorf("%w: server %s did not start: %s", ErrNotReady, cfg.Name, why)
	}

	// Only the route listener may lag, by milliseconds. ReadyForConnections
	// waits out its whole timeout when a listener failed, so the timeout is
	// kept short for a taken route port to show quickly.
	wait := min(time.Until(deadline(ctx)), listenTimeout)
	if !ns.ReadyForConnections(wait) {
		ns.Shutdown()
		ns.WaitForShutdown()
		lock.release()
		return fmt.Errorf("%w: server %s: %w after %v", ErrNotReady, cfg.Name, errListen, wait.Round(time.Millisecond))
	}
	authNC, err := startAuthorizer(ns, cfg.Auth)
	if err != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
		lock.release()
		return fmt.Errorf("cluster: server %s: %w", cfg.Name, err)
	}
	s.mu.Lock()
	s.ns = ns
	s.lock = lock
	s.authNC = authNC
	s.stopping = false
	s.stopped = make(chan struct{})
	s.pinPorts()
	url := s.clientURL()
	s.mu.Unlock()

	if waitJS {
		if err := waitJetStream(ctx, url, cfg.Cluster.Domain(), cfg.Auth); err != nil {
			_ = s.Shutdown(context.Background())
			return fmt.Errorf("server %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// listenTimeout bounds the wait for listeners once nats-server's Start
// returned.
const listenTimeout = 5 * time.Second

// errListen marks a server that did not open its listeners, typically
// because a port was taken.
var errListen = errors.New("listeners not open")

// errStart marks a server whose JetStream or client listener did not start.
var errStart = errors.New("JetStream or client listener did not start")

// deadline returns ctx's deadline; contexts reaching start always have one.
func deadline(ctx context.Context) time.Time {
	dl, _ := ctx.Deadline()
	return dl
}

// options translates c into nats-server options.
func options(c Config) (*server.Options, error) {
	opts := &server.Options{
		ServerName:      c.Name,
		Host:            c.Host,
		Port:            c.Port,
		NoSigs:          true,
		NoLog:           c.Logger == nil,
		JetStream:       true,
		JetStreamDomain: c.Cluster.Domain(),
		StoreDir:        c.StoreDir,
		HTTPHost:        c.Host,
		HTTPPort:        c.MonitorPort,
	}
	if c.RoutePort != 0 {
		opts.Cluster.Name = string(c.Cluster)
		opts.Cluster.Host = c.Host
		opts.Cluster.Port = c.RoutePort
		for _, r := range c.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, fmt.Errorf("%w: route %q: %w", ErrInvalidConfig, r, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	if c.LeafPort != 0 {
		opts.LeafNode.Host = c.Host
		opts.LeafNode.Port = c.LeafPort
	}
	opts.LeafNode.ReconnectInterval = c.LeafReconnectInterval
	for _, r := range c.LeafRemotes {
		u, err := url.Parse(r)
		if err != nil {
			return nil, fmt.Errorf("%w: leaf remote %q: %w", ErrInvalidConfig, r, err)
		}
		// No LocalAccount: the link binds the global account on both ends,
		// which is where every user and JetStream live.
		remote := &server.RemoteLeafOpts{URLs: []*url.URL{u}}
		if c.LeafTLS != nil {
			if remote.TLSConfig, err = c.LeafTLS.remoteConfig(); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
			}
			remote.TLS = true
		}
		opts.LeafNode.Remotes = append(opts.LeafNode.Remotes, remote)
	}
	if c.LeafPort != 0 && c.LeafTLS != nil {
		tc, err := c.LeafTLS.listenerConfig()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		opts.LeafNode.TLSConfig = tc
	}
	if c.Auth != nil {
		c.Auth.apply(opts)
	}
	return opts, nil
}

// pinPorts records the ports the running instance bound, so that a restart
// listens where peers, leaf links and clients expect it. Called with s.mu
// held.
func (s *Server) pinPorts() {
	if a, ok := s.ns.Addr().(*net.TCPAddr); ok {
		s.cfg.Port = a.Port
	}
	if a := s.ns.ClusterAddr(); a != nil {
		s.cfg.RoutePort = a.Port
	}
	if a := s.ns.MonitorAddr(); a != nil {
		s.cfg.MonitorPort = a.Port
	}
	if s.cfg.LeafPort != 0 {
		if v, err := s.ns.Varz(nil); err == nil && v.LeafNode.Port != 0 {
			s.cfg.LeafPort = v.LeafNode.Port
		}
	}
}

// Shutdown stops the server and waits until it has released its ports, store
// and goroutines. It is safe to call more than once and concurrently; every
// call waits for the same shutdown.
//
// It returns ctx.Err() if ctx ends first; the shutdown then completes in the
// background.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.ns == nil {
		s.mu.Unlock()
		return nil
	}
	ns, lock, stopped, authNC := s.ns, s.lock, s.stopped, s.authNC
	if !s.stopping {
		s.stopping = true
		go func() {
			if authNC != nil {
				authNC.Close()
			}
			ns.Shutdown()
			ns.WaitForShutdown()
			lock.release()
			close(stopped)
		}()
	}
	s.mu.Unlock()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startAuthorizer starts auth's Authorizer, if any, on an in-process
// connection to ns, which accepts connections already: the callouts of
// the connections that come next find it serving.
func startAuthorizer(ns *server.Server, auth *Auth) (*nats.Conn, error) {
	if auth == nil || auth.Authorizer == nil {
		return nil, nil
	}
	nc, err := nats.Connect("", nats.InProcessServer(ns), nats.Name("pmixbus-authorizer"),
		nats.MaxReconnects(-1), auth.Client)
	if err != nil {
		return nil, fmt.Errorf("the authorization service's connection: %w", err)
	}
	if err := auth.Authorizer(nc); err != nil {
		nc.Close()
		return nil, fmt.Errorf("the authorization service: %w", err)
	}
	return nc, nil
}

// Restart starts a server that was shut down again, on the same ports and
// store directory, and waits until its JetStream answers. The directory is
// free for another server while this one is down.
//
// It returns ErrRunning if the server was not shut down, ctx.Err() if ctx
// ends while the previous instance is still stopping, and otherwise what
// StartServer returns.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	if s.ns != nil && !s.stopping {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrRunning, s.cfg.Name)
	}
	var stopped chan struct{}
	if s.ns != nil {
		stopped = s.stopped
	}
	s.mu.Unlock()
	if stopped != nil {
		select {
		case <-stopped:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.start(ctx, true)
}

// SetLeafLinks takes the server's leaf links down (up false) or brings
// them back (up true), by reloading its configuration with its leaf
// remotes disabled or enabled: the server goes on serving its clients and
// its cluster, cut off from the hub. A fault to test with. A restart
// brings the links back too.
//
// Errors: ErrNotRunning when the server is not running; the error
// nats-server gave for the reload.
func (s *Server) SetLeafLinks(up bool) error {
	s.mu.Lock()
	ns, cfg := s.ns, s.cfg
	running := ns != nil && !s.stopping
	s.mu.Unlock()
	if !running {
		return fmt.Errorf("%w: %s", ErrNotRunning, cfg.Name)
	}
	opts, err := options(cfg)
	if err != nil {
		return err
	}
	for _, r := range opts.LeafNode.Remotes {
		r.Disabled = !up
	}
	if err := ns.ReloadOptions(opts); err != nil {
		return fmt.Errorf("cluster: server %s: leaf links: %w", cfg.Name, err)
	}
	return nil
}

// Running reports whether the server is started and not shut down.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ns != nil && !s.stopping
}

// Name returns the server name.
func (s *Server) Name() string { return s.cfg.Name }

// Cluster returns the id of the cluster the server belongs to.
func (s *Server) Cluster() ID { return s.cfg.Cluster }

// Domain returns the server's JetStream domain, its cluster id.
func (s *Server) Domain() string { return s.cfg.Cluster.Domain() }

// StoreDir returns the server's JetStream storage directory.
func (s *Server) StoreDir() string { return s.cfg.StoreDir }

// ClientURL returns the URL clients connect to (nats://host:port). A
// wildcard listen address is reported as 127.0.0.1.
func (s *Server) ClientURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clientURL()
}

// RouteURL returns the URL other servers of the cluster route to
// (nats-route://host:port), or "" for a server without routes.
func (s *Server) RouteURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.urlFor("nats-route", s.cfg.RoutePort)
}

// LeafURL returns the URL leaf nodes connect to (nats-leaf://host:port), or
// "" for a server that does not accept leaf connections.
func (s *Server) LeafURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.urlFor("nats-leaf", s.cfg.LeafPort)
}

// MonitorURL returns the HTTP monitoring URL (http://host:port), or "" when
// monitoring is off.
func (s *Server) MonitorURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.urlFor("http", s.cfg.MonitorPort)
}

// NATS returns the running nats-server instance, for inspection (NumRoutes,
// NumLeafNodes, Jsz …) in tests and tools; nil before the first start. After
// a Restart it is a different instance.
func (s *Server) NATS() *server.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ns
}

func (s *Server) clientURL() string { return s.urlFor("nats", s.cfg.Port) }

// urlFor formats a URL for a pinned port; called with s.mu held.
func (s *Server) urlFor(scheme string, port int) string {
	if port <= 0 {
		return ""
	}
	host := s.cfg.Host
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port))
}
