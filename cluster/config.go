package cluster

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"
)

// DefaultReadyTimeout bounds how long the Start functions wait for a server
// or topology to become ready when the Config does not say.
const DefaultReadyTimeout = 30 * time.Second

// Config configures one embedded NATS server with JetStream (StartServer).
type Config struct {
	// Cluster is the PMIx cluster the server belongs to. It is also the
	// server's JetStream domain and, when the server has routes, its NATS
	// cluster name. Required.
	Cluster ID

	// Name is the server name, unique among the servers of the cluster.
	// Empty means the cluster id. Same character rules as an ID.
	Name string

	// StoreDir is the JetStream storage directory, created if missing. It
	// must not be shared with another running server. Required.
	StoreDir string

	// Host is the interface all listeners bind to. Empty means "127.0.0.1".
	Host string

	// Port is the client port: -1 picks a free port; 0 is rejected so that
	// "unset" never silently means 4222.
	Port int

	// RoutePort is the port for routes to other servers of the same NATS
	// cluster: 0 means no routes (a standalone server), -1 a free port.
	RoutePort int

	// Routes are the route URLs (nats-route://host:port) of other servers of
	// the same cluster. They need RoutePort.
	Routes []string

	// LeafPort is the port accepting leaf-node connections, which makes the
	// server a hub: 0 means none, -1 a free port.
	LeafPort int

	// LeafRemotes are the leaf-node URLs (nats-leaf://host:port) of hubs to
	// connect to. Each link binds the local global account to the hub's.
	LeafRemotes []string

	// LeafReconnectInterval is how long a leaf link waits between attempts to
	// reach its hub again. Zero means nats-server's default (1s).
	LeafReconnectInterval time.Duration

	// MonitorPort is the HTTP monitoring port: 0 means off, -1 a free port.
	// Monitoring is not authenticated: it shows connections, subscriptions
	// and stream state (no message) to whoever reaches the port.
	MonitorPort int

	// Auth, if set, makes the server accept only its keys, each with its
	// permissions, on the client and leaf ports; its leaf links sign in
	// with Auth.LeafSeed. Nil accepts anyone (see Auth).
	Auth *Auth

	// LeafTLS, if set, secures the leaf listener and the leaf links with
	// TLS (see LeafTLS).
	LeafTLS *LeafTLS

	// Logger receives the server's log. Nil means the server logs nothing.
	// nats-server debug and trace output is enabled only when Logger is
	// enabled for slog.LevelDebug and LevelTrace respectively.
	Logger *slog.Logger

	// ReadyTimeout bounds the wait for the server to become ready, in
	// addition to the context given to StartServer. Zero means
	// DefaultReadyTimeout.
	ReadyTimeout time.Duration
}

// DefaultConfig returns the configuration of a standalone server of cluster
// id, storing JetStream data in storeDir, listening for clients on a free port
// of 127.0.0.1, without routes, leaf nodes, monitoring or logging.
func DefaultConfig(id ID, storeDir string) Config {
	return Config{
		Cluster:      id,
		StoreDir:     storeDir,
		Host:         "127.0.0.1",
		Port:         -1,
		ReadyTimeout: DefaultReadyTimeout,
	}
}

// Validate reports every problem with c at once.
//
// It returns an error wrapping ErrInvalidConfig (and ErrInvalidID when the
// cluster id or server name is at fault), or nil.
func (c Config) Validate() error {
	var p problems
	if err := c.Cluster.Validate(); err != nil {
		p.add(fmt.Errorf("Cluster: %w", err))
	}
	if c.Name != "" {
		if err := ID(c.Name).Validate(); err != nil {
			p.add(fmt.Errorf("Name: %w", err))
		}
	}
	if strings.TrimSpace(c.StoreDir) == "" {
		p.addf("StoreDir: empty; JetStream needs a directory")
	}
	if c.Port == 0 {
		p.addf("Port: 0; use -1 for a free port or give one explicitly")
	} else if !validPort(c.Port) {
		p.addf("Port: %d out of range (-1 or 1..65535)", c.Port)
	}
	for _, f := range []struct {
		name string
		port int
	}{{"RoutePort", c.RoutePort}, {"LeafPort", c.LeafPort}, {"MonitorPort", c.MonitorPort}} {
		if f.port != 0 && !validPort(f.port) {
			p.addf("%s: %d out of range (-1 for a free port, 0 for none, or 1..65535)", f.name, f.port)
		}
	}
	if len(c.Routes) > 0 && c.RoutePort == 0 {
		p.addf("Routes: given without RoutePort; a server with routes must accept them too")
	}
	for _, r := range c.Routes {
		if _, err := parseURL(r, "nats-route", "nats"); err != nil {
			p.add(fmt.Errorf("Routes: %w", err))
		}
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
		if len(c.Routes) > 0 && c.Auth.RoutePassword == "" {
			p.addf("Auth.RoutePassword: empty; routes between servers with Auth need one")
		}
	}
	if c.LeafTLS != nil {
		c.LeafTLS.validate(&p, c.LeafPort != 0)
	}
	return p.err()
}

// withDefaults fills the fields whose zero value means "the default".
func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = string(c.Cluster)
	}
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	c.Routes = append([]string(nil), c.Routes...)
	c.LeafRemotes = append([]string(nil), c.LeafRemotes...)
	return c
}

func validPort(p int) bool { return p == -1 || (p >= 1 && p <= 65535) }

func parseURL(raw string, schemes ...string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", raw, err)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%q: no host:port", raw)
	}
	for _, s := range schemes {
		if u.Scheme == s {
			return u, nil
		}
	}
	return nil, fmt.Errorf("%q: scheme %q, want one of %s", raw, u.Scheme, strings.Join(schemes, ", "))
}

// problems collects the findings of a Validate method into one error that
// wraps ErrInvalidConfig and every finding.
type problems []error

func (p *problems) add(err error) { *p = append(*p, err) }

func (p *problems) addf(format string, a ...any) { p.add(fmt.Errorf(format, a...)) }

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return &configError{problems: p}
}

type configError struct{ problems []error }

func (e *configError) Error() string {
	msgs := make([]string, len(e.problems))
	for i, p := range e.problems {
		msgs[i] = p.Error()
	}
	return ErrInvalidConfig.Error() + ": " + strings.Join(msgs, "; ")
}

func (e *configError) Unwrap() []error {
	return append([]error{ErrInvalidConfig}, e.problems...)
}
