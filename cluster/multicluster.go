package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// DefaultHubDomain is the JetStream domain (and server name) of the hub of a
// MultiCluster unless its config names another.
const DefaultHubDomain = "hub"

// ClusterSpec names one cluster of a MultiCluster and its size.
type ClusterSpec struct {
	ID      ID
	Servers int
}

// MultiClusterConfig configures clusters joined by leaf-node links to one
// hub server (StartMultiCluster).
type MultiClusterConfig struct {
	// Clusters lists the clusters, each with its own JetStream domain named
	// after it. At least one; ids must be distinct.
	Clusters []ClusterSpec

	// BaseDir holds one directory per cluster and one for the hub. Required.
	BaseDir string

	// HubDomain is the hub's JetStream domain and server name; it must
	// differ from every cluster id. Empty means DefaultHubDomain.
	HubDomain string

	// Host is the interface all listeners bind to. Empty means "127.0.0.1".
	Host string

	// LeafReconnectInterval: see Config. It decides how soon links return
	// after the hub restarts.
	LeafReconnectInterval time.Duration

	// Auth, if set, secures every server of the topology: each accepts
	// only its keys, and the clusters' leaf links sign in to the hub with
	// Auth.LeafSeed (see Auth).
	Auth *Auth

	// LeafTLS, if set, puts the leaf links on TLS: the hub listens with
	// its certificate and every cluster's links verify it (see LeafTLS).
	LeafTLS *LeafTLS

	// Logger receives every server's log, with "cluster" and "server"
	// attributes. Nil means no logging.
	Logger *slog.Logger

	// ReadyTimeout bounds the wait for the topology to become ready, in
	// addition to the context given to StartMultiCluster. Zero means
	// DefaultReadyTimeout.
	ReadyTimeout time.Duration
}

// DefaultMultiClusterConfig returns the configuration of clusters joined
// through a hub in domain DefaultHubDomain, on free ports of 127.0.0.1,
// storing under baseDir, without logging.
func DefaultMultiClusterConfig(baseDir string, clusters ...ClusterSpec) MultiClusterConfig {
	return MultiClusterConfig{
		Clusters:     append([]ClusterSpec(nil), clusters...),
		BaseDir:      baseDir,
		HubDomain:    DefaultHubDomain,
		ReadyTimeout: DefaultReadyTimeout,
	}
}

// Validate reports every problem with c at once, in an error wrapping
// ErrInvalidConfig (and ErrInvalidID for a bad id).
func (c MultiClusterConfig) Validate() error {
	var p problems
	if len(c.Clusters) == 0 {
		p.addf("Clusters: none")
	}
	hub := ID(c.HubDomain)
	if hub == "" {
		hub = DefaultHubDomain
	}
	if err := hub.Validate(); err != nil {
		p.add(fmt.Errorf("HubDomain: %w", err))
	}
	seen := map[ID]bool{}
	for i, cs := range c.Clusters {
		if err := cs.ID.Validate(); err != nil {
			p.add(fmt.Errorf("Clusters[%d].ID: %w", i, err))
		}
		if seen[cs.ID] {
			p.addf("Clusters[%d].ID: %q appears twice; each cluster needs its own JetStream domain", i, cs.ID)
		}
		seen[cs.ID] = true
		if cs.ID == hub {
			p.addf("Clusters[%d].ID: %q is also the hub's domain", i, cs.ID)
		}
		if cs.Servers < 1 {
			p.addf("Clusters[%d].Servers: %d; a cluster needs at least one server", i, cs.Servers)
		}
	}
	if strings.TrimSpace(c.BaseDir) == "" {
		p.addf("BaseDir: empty; JetStream needs a directory")
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
		c.LeafTLS.validate(&p, true)
	}
	return p.err()
}

// MultiCluster is a set of clusters, each its own JetStream domain, joined by
// leaf-node links to a hub server. Every server of every cluster links to the
// hub. Its methods are safe for concurrent use.
type MultiCluster struct {
	hub      *Server
	clusters []*Cluster
	byID     map[ID]*Cluster

	mu     sync.Mutex
	closed bool
}

// StartMultiCluster starts the hub, then the clusters in parallel, and waits
// until the topology is ready (see WaitLinked).
//
// It returns an error wrapping ErrInvalidConfig for a bad cfg, ErrNotReady if
// the topology did not become ready in time, or the error nats-server gave;
// whatever was started is then shut down.
func StartMultiCluster(ctx context.Context, cfg MultiClusterConfig) (*MultiCluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.HubDomain == "" {
		cfg.HubDomain = DefaultHubDomain
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()

	hubID := ID(cfg.HubDomain)
	hc := Config{
		Cluster:      hubID,
		StoreDir:     filepath.Join(cfg.BaseDir, cfg.HubDomain),
		Host:         cfg.Host,
		Port:         -1,
		LeafPort:     -1,
		Auth:         cfg.Auth,
		LeafTLS:      cfg.LeafTLS,
		ReadyTimeout: cfg.ReadyTimeout,
	}
	if cfg.Logger != nil {
		hc.Logger = cfg.Logger.With("cluster", cfg.HubDomain, "server", cfg.HubDomain)
	}
	hub, err := StartServer(ctx, hc)
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	m := &MultiCluster{hub: hub, byID: map[ID]*Cluster{}}

	clusters := make([]*Cluster, len(cfg.Clusters))
	errs := make([]error, len(cfg.Clusters))
	var wg sync.WaitGroup
	for i, cs := range cfg.Clusters {
		cc := ClusterConfig{
			ID:                    cs.ID,
			Servers:               cs.Servers,
			BaseDir:               filepath.Join(cfg.BaseDir, string(cs.ID)),
			Host:                  cfg.Host,
			LeafRemotes:           []string{hub.LeafURL()},
			LeafReconnectInterval: cfg.LeafReconnectInterval,
			Auth:                  cfg.Auth,
			LeafTLS:               cfg.LeafTLS,
			ReadyTimeout:          cfg.ReadyTimeout,
		}
		if cfg.Logger != nil {
			cc.Logger = cfg.Logger.With("cluster", string(cs.ID))
		}
		wg.Go(func() { clusters[i], errs[i] = StartCluster(ctx, cc) })
	}
	wg.Wait()
	for i, c := range clusters {
		if c != nil {
			m.clusters = append(m.clusters, c)
			m.byID[c.ID()] = c
		}
		if errs[i] != nil && err == nil {
			err = fmt.Errorf("cluster %s: %w", cfg.Clusters[i].ID, errs[i])
		}
	}
	if err == nil {
		err = m.WaitLinked(ctx)
	}
	if err != nil {
		_ = m.Shutdown(context.Background())
		return nil, err
	}
	return m, nil
}

// WaitLinked waits until every running server of every cluster has its leaf
// link to the hub up, the hub counts them all, every cluster's JetStream
// answers in its domain from a client of the hub, and a request published in
// each cluster reaches a responder in the next one (in the order given at
// start; the hub when there is one cluster) and its reply comes back.
//
// It returns an error wrapping ErrNotReady if that does not happen before
// ctx ends, or ErrClosed after Shutdown.
func (m *MultiCluster) WaitLinked(ctx context.Context) error {
	if m.isClosed() {
		return ErrClosed
	}
	err := poll(ctx, "leaf links", time.Second, func(context.Context) error {
		want := 0
		for _, c := range m.clusters {
			for _, s := range c.running() {
				want++
				if ns := s.NATS(); ns == nil || ns.NumLeafNodes() < 1 {
					return fmt.Errorf("server %s has no leaf link", s.Name())
				}
			}
		}
		ns := m.hub.NATS()
		if !m.hub.Running() || ns == nil {
			return fmt.Errorf("hub not running")
		}
		if got := ns.NumLeafNodes(); got != want {
			return fmt.Errorf("hub has %d leaf links, want %d", got, want)
		}
		return nil
	})
	if err != nil {
		return err
	}

	auth := m.hub.cfg.Auth
	hubNC, err := connectWait(ctx, m.hub.ClientURL(), auth)
	if err != nil {
		return err
	}
	defer hubNC.Close()
	for _, c := range m.clusters {
		if err := checkJetStream(ctx, hubNC, c.Domain()); err != nil {
			return fmt.Errorf("cluster %s from hub: %w", c.ID(), err)
		}
	}

	subject := "_PMIXBUS.probe." + nuid.Next()
	for i, c := range m.clusters {
		from := c.running()
		if len(from) == 0 {
			continue
		}
		toURL := m.hub.ClientURL()
		if len(m.clusters) > 1 {
			next := m.clusters[(i+1)%len(m.clusters)].running()
			if len(next) == 0 {
				continue
			}
			toURL = next[len(next)-1].ClientURL()
		}
		if err := flowBetween(ctx, from[0].ClientURL(), toURL, fmt.Sprintf("%s.%d", subject, i), auth); err != nil {
			return fmt.Errorf("cluster %s: %w", c.ID(), err)
		}
	}
	return nil
}

// flowBetween runs checkFlow over fresh connections to two servers.
func flowBetween(ctx context.Context, fromURL, toURL, subject string, auth *Auth) error {
	var conns []*nats.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	from, err := connectWait(ctx, fromURL, auth)
	if err != nil {
		return err
	}
	conns = append(conns, from)
	to, err := connectWait(ctx, toURL, auth)
	if err != nil {
		return err
	}
	conns = append(conns, to)
	return checkFlow(ctx, from, to, subject)
}

// Hub returns the hub server.
func (m *MultiCluster) Hub() *Server { return m.hub }

// HubURL returns the hub's client URL.
func (m *MultiCluster) HubURL() string { return m.hub.ClientURL() }

// HubDomain returns the hub's JetStream domain.
func (m *MultiCluster) HubDomain() string { return m.hub.Domain() }

// Clusters returns the clusters in the order given at start.
func (m *MultiCluster) Clusters() []*Cluster { return append([]*Cluster(nil), m.clusters...) }

// Cluster returns the cluster with the given id, or nil if there is none.
func (m *MultiCluster) Cluster(id ID) *Cluster { return m.byID[id] }

// ShutdownHub shuts the hub down, cutting every leaf link; each cluster goes
// on alone. See Server.Shutdown for the errors.
func (m *MultiCluster) ShutdownHub(ctx context.Context) error { return m.hub.Shutdown(ctx) }

// RestartHub restarts the hub on its previous ports and waits until the
// clusters' links have returned (WaitLinked).
//
// It returns ErrClosed after Shutdown, ErrRunning if the hub was not shut
// down, and otherwise what Server.Restart and WaitLinked return.
func (m *MultiCluster) RestartHub(ctx context.Context) error {
	if m.isClosed() {
		return ErrClosed
	}
	if err := m.hub.Restart(ctx); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	return m.WaitLinked(ctx)
}

// CutLinks takes the leaf links of cluster id's servers down, leaving the
// hub and the other clusters linked: that cluster goes on alone, and the
// others without it, until RestoreLinks (see Server.SetLeafLinks).
//
// It returns ErrClosed after Shutdown, an error wrapping ErrInvalidID for a
// cluster that is not one of the topology's, and what SetLeafLinks
// returns.
func (m *MultiCluster) CutLinks(id ID) error { return m.setLinks(id, false) }

// RestoreLinks brings cluster id's leaf links back after CutLinks and
// waits until the topology is linked again (WaitLinked).
//
// It returns what CutLinks and WaitLinked return.
func (m *MultiCluster) RestoreLinks(ctx context.Context, id ID) error {
	if err := m.setLinks(id, true); err != nil {
		return err
	}
	return m.WaitLinked(ctx)
}

func (m *MultiCluster) setLinks(id ID, up bool) error {
	if m.isClosed() {
		return ErrClosed
	}
	c := m.byID[id]
	if c == nil {
		return fmt.Errorf("%w: %q is not a cluster of the topology", ErrInvalidID, id)
	}
	for _, s := range c.running() {
		if err := s.SetLeafLinks(up); err != nil {
			return err
		}
	}
	return nil
}

// Shutdown shuts every cluster down in parallel, then the hub, and waits for
// all of them. It is safe to call more than once.
//
// It returns ctx.Err() if ctx ends first.
func (m *MultiCluster) Shutdown(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	var all []*Server
	for _, c := range m.clusters {
		all = append(all, c.servers...)
	}
	if err := shutdownAll(ctx, all); err != nil {
		return err
	}
	return m.hub.Shutdown(ctx)
}

func (m *MultiCluster) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}
