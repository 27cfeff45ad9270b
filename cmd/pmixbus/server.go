package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/metrics"
	"github.com/pmixbus/pmixbus/security"
)

// shutdownTimeout bounds a server's shutdown after SIGINT or SIGTERM.
const shutdownTimeout = 30 * time.Second

func init() {
	register(&command{
		name:    "server",
		summary: "run an embedded NATS server with JetStream for one cluster",
		run:     runServer,
	})
}

const serverDescription = `
Run a NATS server with JetStream for one PMIx cluster until SIGINT or SIGTERM.
The cluster name is also the JetStream domain, so clients of other clusters
reach this one's JetStream as that domain.

Clusters join over leaf-node links: a hub accepts them (--leaf-port), the
others connect to it (--leaf-remote). Each keeps its own JetStream when the
links are down. The hub may be one cluster's own server, or a server of its
own under any --cluster name. A server without --leaf-remote is the top of
its topology: agents anywhere in it ask it for its JetStream domain and keep
GLOBAL publish/lookup data there (see "pmixbus agent -h").

The server accepts only pmixbus's keys (docs/security.md): every client and
every leaf link signs in with the NATS nkey of its role - agent, rm (for
"pmixbus notify"), watch (read-only, "pmixbus watch"), leaf (leaf links) -
and may do only what that role allows; a process without a key cannot
connect. The keys live in --keys, one file per role, mode 0600; the first
server to start creates any that are missing. Servers that link to one
another, and the agents and tools that use them, need the same keys: on one
host and user they find them in the default place; elsewhere, copy the
directory (a host that only watches needs watch.nk alone). --leaf-tls-*
put the leaf links on TLS.

When ready it prints its client URL (and leaf and monitoring URLs when
enabled) to stdout, one "<what> URL: <url>" line each, and the keys
directory on a "keys: <dir>" line. Logs go to stderr. The monitoring port,
when on, is not authenticated.

JetStream data is kept in --store; by default in
<temp dir>/pmixbus/<cluster>/<name>, which survives a restart of the server
but not the temp dir's cleaning. Two servers on one host need different
stores.`

func runServer(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("server", "[flags]", serverDescription)
	var (
		clusterName = fs.String("cluster", "local", "cluster `name`; also the JetStream domain (letters, digits, '-', '_')")
		name        = fs.String("name", "", "server `name` (default: the cluster name)")
		host        = fs.String("host", "127.0.0.1", "`address` to listen on; 0.0.0.0 for all interfaces")
		port        = fs.Int("port", 4222, "client `port`; -1 for a free one")
		store       = fs.String("store", "", "JetStream storage `dir` (default <state dir>/store/<cluster>/<name>, the state dir being $XDG_STATE_HOME/pmixbus, ~/.local/state/pmixbus, or /var/lib/pmixbus for root)")
		leafPort    = fs.Int("leaf-port", 0, "accept leaf-node connections on `port`, acting as a hub; 0 off, -1 a free one")
		monitorPort = fs.Int("monitor-port", 0, "HTTP monitoring `port`; 0 off, -1 a free one")
		routePort   = fs.Int("route-port", 0, "accept routes from the other servers of this cluster on `port` (a routed cluster: docs/operations.md); 0 off, -1 a free one")
		logLevel    = fs.String("log-level", "info", "log `level`: off, error, warn, info, debug or trace")
		metricsAddr = fs.String("metrics-addr", "", metricsFlagHelp)
		keys        = fs.String("keys", "", keysDirHelp)
		leafTLS     = addLeafTLSFlags(fs)
		leafRemotes stringList
		routes      stringList
	)
	fs.Var(&routes, "route", "a route to another server of this cluster at `URL` (nats-route://host:port), with --route-port; repeatable. The servers of a cluster authenticate their routes with a password derived from the keys, so give them the same keys directory")
	fs.Var(&leafRemotes, "leaf-remote", "connect as a leaf node to the hub at `URL` (nats-leaf://host:port); repeatable")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if code, done := noArgs(fs, stderr); done {
		return code
	}
	id, err := cluster.ParseID(*clusterName)
	if err != nil {
		return usageError(fs, stderr, "--cluster: %v", err)
	}
	level, ok := parseLogLevel(*logLevel)
	if !ok {
		return usageError(fs, stderr, "--log-level: unknown level %q; want off, error, warn, info, debug or trace", *logLevel)
	}

	cfg := cluster.DefaultConfig(id, *store)
	cfg.Name = *name
	cfg.Host = *host
	cfg.Port = *port
	cfg.LeafPort = *leafPort
	cfg.LeafRemotes = leafRemotes
	cfg.MonitorPort = *monitorPort
	cfg.RoutePort, cfg.Routes = *routePort, routes
	cfg.LeafTLS = leafTLS.config()
	if cfg.StoreDir == "" {
		serverName := cfg.Name
		if serverName == "" {
			serverName = string(id)
		}
		state, err := defaultStateDir()
		if err != nil {
			return usageError(fs, stderr, "%v", err)
		}
		cfg.StoreDir = filepath.Join(state, "store", string(id), serverName)
	}
	dir, err := keysDir(*keys)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	// Validated without Auth first: a bad command line creates no keys.
	if err := cfg.Validate(); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	var log *slog.Logger
	if level != nil {
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: *level}))
		cfg.Logger = log
	}
	k, err := security.EnsureKeys(dir)
	if err != nil {
		fmt.Fprintf(stderr, "pmixbus server: %v\n", err)
		return exitFail
	}
	if cfg.Auth, err = k.ServerAuth(); err != nil {
		fmt.Fprintf(stderr, "pmixbus server: %v\n", err)
		return exitFail
	}

	s, err := cluster.StartServer(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "pmixbus server: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "pmixbus server %s ready: cluster %s, JetStream domain %q, store %s\n",
		s.Name(), s.Cluster(), s.Domain(), s.StoreDir())
	fmt.Fprintf(stdout, "client URL: %s\n", s.ClientURL())
	if u := s.RouteURL(); u != "" {
		fmt.Fprintf(stdout, "route URL: %s\n", u)
	}
	if u := s.LeafURL(); u != "" {
		fmt.Fprintf(stdout, "leaf URL: %s\n", u)
	}
	if u := s.MonitorURL(); u != "" {
		fmt.Fprintf(stdout, "monitor URL: %s\n", u)
	}
	fmt.Fprintf(stdout, "keys: %s\n", dir)
	if remove, err := registerLocal(localEndpoint{Kind: "server", Cluster: string(s.Cluster()), Name: s.Name(), URL: s.ClientURL()}); err != nil {
		fmt.Fprintf(stderr, "pmixbus server: registering the local NATS URL: %v (the tools will need --nats)\n", err)
	} else {
		defer remove()
	}
	stopMetrics, err := serveMetrics(*metricsAddr, stdout, metrics.Server(s))
	if err != nil {
		fmt.Fprintf(stderr, "pmixbus server: --metrics-addr: %v\n", err)
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		_ = s.Shutdown(sctx)
		return exitFail
	}
	defer stopMetrics()

	<-ctx.Done()
	if log != nil {
		log.Info("pmixbus server: shutting down", "cause", context.Cause(ctx))
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		fmt.Fprintf(stderr, "pmixbus server: shutdown: %v\n", err)
		return exitFail
	}
	return exitOK
}

// parseLogLevel maps a --log-level value to a slog level; nil means off.
func parseLogLevel(s string) (*slog.Level, bool) {
	var l slog.Level
	switch strings.ToLower(s) {
	case "off", "none":
		return nil, true
	case "error":
		l = slog.LevelError
	case "warn", "warning":
		l = slog.LevelWarn
	case "info":
		l = slog.LevelInfo
	case "debug":
		l = slog.LevelDebug
	case "trace":
		l = cluster.LevelTrace
	default:
		return nil, false
	}
	return &l, true
}
