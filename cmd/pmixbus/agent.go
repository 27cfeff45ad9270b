package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/dvm"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/launch/liveness"
	"github.com/pmixbus/pmixbus/metrics"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

func init() {
	register(&command{
		name:    "agent",
		summary: "run the pmixbus agent of one node",
		run:     runAgent,
	})
}

const agentDescription = `
Run the agent of one node until SIGINT or SIGTERM: local processes attach to
it over a socket, it runs their event-handler chains and routes their events
over NATS. With no --nats URL it starts an embedded NATS server with
JetStream (domain = the cluster) on a free port, or on --port; with
--leaf-remote that server joins other clusters through a hub's leaf port
(see "pmixbus server -h").

The agent keeps a key in its cluster's PMIXBUS_AGENTS bucket (its node,
--slots, version, where it listens, the jobs it hosts), refreshed every
--liveness-interval; when an agent stops refreshing, its key expires
--liveness-ttl after the last refresh and the other agents of the cluster
raise PMIX_EVENT_NODE_DOWN and PMIX_ERR_PROC_TERM_WO_SYNC for the procs it
hosted. A clean stop (SIGINT, SIGTERM) deletes the key and raises nothing.
"pmixbus status" lists the agents (docs/liveness.md).

GLOBAL publish/lookup data (PMIx_Publish at PMIX_RANGE_GLOBAL) lives in the
one JetStream domain that every cluster reaches. At start the agent asks the
server at the top of the topology for its domain: the hub its cluster links
to, whatever that is named, or its own server when it links to none.
Failing that, it uses a JetStream domain named "hub" if one answers, and
otherwise does not start. --global-domain names the domain instead, used as
it is.

NATS is secured with pmixbus's keys (docs/security.md): the agent signs in
with the agent key of --keys. Its embedded server, like "pmixbus server",
accepts only the keys' roles, and creates the keys that are missing. With
--nats, an agent without an agent key in --keys connects without one, which
a secured server refuses, and one with a key connects without it to a
server that has no authentication (saying so in its log). --leaf-tls-* put
the embedded server's leaf link on TLS (see "pmixbus server -h").

Each flag may also come from the environment variable named after it; a flag
on the command line wins.

The agent runs Go's garbage collector with GOGC=400 unless GOGC is set in
its environment: its heap peaks at about five times what it holds live
(docs/PERFORMANCE.md, "The collector's target"); set GOMEMLIMIT to cap it.
A node with memory to spare may set GOGC higher: at GOGC=1600 the fan-out
benchmark delivered a fifth more events per second on 13 % less CPU, with
a heap of up to seventeen times the live one.

When ready it prints, on stdout:

    pmixbus agent <node> of cluster <cluster> ready
    listen: <where clients attach>
    NATS URL: <url>
    NATS URLs: <url>,<url>   (--nats-host 0.0.0.0: one per interface address)

A host RM registers jobs and clients with the agent before launching them.
For manual testing, --job and --client do that at startup:

    --job nspace:session:rank=node,rank=node,...
        registers a job (repeatable): the node of every rank, ranges allowed
        ("0-3=n1,4=n2"); the session may be empty ("job1::0=n1") or left out
        ("job1:0=n1"). Give every agent hosting the job the same map.
    --client nspace.rank
        registers a client of a --job on this node (repeatable) and prints the
        environment to launch it with, as shell "export" lines after a
        "# client nspace.rank" comment, before the ready lines.

For example:

    pmixbus agent --cluster A --node n1 --listen tcp:127.0.0.1:0 \
        --job sim:s1:0-1=n1,2=n2 --client sim.0 --client sim.1`

// agentEnv names the environment variables of the agent's flags.
var agentEnv = envBindings{
	"cluster":           "PMIXBUS_CLUSTER",
	"node":              "PMIXBUS_NODE",
	"nats":              "PMIXBUS_NATS",
	"replicas":          "PMIXBUS_REPLICAS",
	"port":              "PMIXBUS_PORT",
	"store":             "PMIXBUS_STORE",
	"listen":            "PMIXBUS_LISTEN",
	"handler-timeout":   "PMIXBUS_HANDLER_TIMEOUT",
	"log-level":         "PMIXBUS_LOG_LEVEL",
	"event-cache-size":  "PMIXBUS_EVENT_CACHE_SIZE",
	"cache-max-age":     "PMIXBUS_CACHE_MAX_AGE",
	"cache-max-bytes":   "PMIXBUS_CACHE_MAX_BYTES",
	"cache-memory":      "PMIXBUS_CACHE_MEMORY",
	"global-domain":     "PMIXBUS_GLOBAL_DOMAIN",
	"metrics-addr":      "PMIXBUS_METRICS_ADDR",
	"slots":             "PMIXBUS_SLOTS",
	"liveness-interval": "PMIXBUS_LIVENESS_INTERVAL",
	"liveness-ttl":      "PMIXBUS_LIVENESS_TTL",
	"kill-grace":        "PMIXBUS_KILL_GRACE",
	"cluster-grace":     "PMIXBUS_CLUSTER_GRACE",
	"pmix-lib":          "PMIXBUS_PMIX_LIB",
	"job-user":          "PMIXBUS_JOB_USER",
	"launcher-grace":    "PMIXBUS_LAUNCHER_GRACE",
	"iof-max-age":       "PMIXBUS_IOF_MAX_AGE",
	"iof-stream-bytes":  "PMIXBUS_IOF_STREAM_BYTES",
	"keys":              security.EnvKeysDir,
	"nats-host":         "PMIXBUS_NATS_HOST",
}

func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	agent.ApplyGCPercent()
	fs := newFlagSet("agent", "[flags]", agentDescription)
	var (
		clusterName    = fs.String("cluster", "local", "cluster `name`; also the JetStream domain (PMIXBUS_CLUSTER)")
		node           = fs.String("node", hostname(), "`node` this agent serves (PMIXBUS_NODE)")
		natsURL        = fs.String("nats", "", "NATS `URL` to connect to; empty starts an embedded server (PMIXBUS_NATS)")
		port           = fs.Int("port", -1, "client `port` of the embedded NATS server; -1 for a free one (PMIXBUS_PORT)")
		store          = fs.String("store", "", "JetStream storage `dir` of the embedded server (default <state dir>/store/<cluster>/<node>, the state dir being $XDG_STATE_HOME/pmixbus, ~/.local/state/pmixbus, or /var/lib/pmixbus for root) (PMIXBUS_STORE)")
		listen         = fs.String("listen", "", "where clients attach: unix:`path` or tcp:127.0.0.1:port, port 0 for a free one (default unix:$XDG_RUNTIME_DIR/pmixbus/pmixbus-<cluster>-<node>.sock, or <temp dir>/pmixbus-<uid>/… without it; that directory is made 0700 and refused if another user owns it) (PMIXBUS_LISTEN)")
		handlerTimeout = fs.Duration("handler-timeout", bus.DefaultHandlerTimeout, "how long a handler may take before its chain moves on, for handlers that set no PMIX_EVENT_ACTION_TIMEOUT; 0 waits forever (PMIXBUS_HANDLER_TIMEOUT)")
		logLevel       = fs.String("log-level", "info", "log `level`: off, error, warn, info, debug or trace (PMIXBUS_LOG_LEVEL)")
		cacheSize      = fs.Int("event-cache-size", jetstream.DefaultEventCacheSize, "events the cluster's JetStream event cache keeps, oldest discarded first; shared by the cluster's agents (PMIXBUS_EVENT_CACHE_SIZE)")
		cacheMaxAge    = fs.Duration("cache-max-age", 0, "discard cached events older than this; 0 keeps them until the count limit (PMIXBUS_CACHE_MAX_AGE)")
		cacheMaxBytes  = fs.Int64("cache-max-bytes", 0, "byte limit of the event cache; 0 is none (PMIXBUS_CACHE_MAX_BYTES)")
		globalDomain   = fs.String("global-domain", "", "JetStream `domain` of the publish/lookup data every cluster shares (GLOBAL range); default: the domain of the server at the top of the topology, see above (PMIXBUS_GLOBAL_DOMAIN)")
		metricsAddr    = fs.String("metrics-addr", "", metricsFlagHelp+" (PMIXBUS_METRICS_ADDR)")
		cacheMemory    = fs.Bool("cache-memory", false, "keep the event cache in memory rather than in files, which survive a NATS restart (PMIXBUS_CACHE_MEMORY)")
		keys           = fs.String("keys", "", keysDirHelp+" ("+security.EnvKeysDir+")")
		leafTLS        = addLeafTLSFlags(fs)
		slots          = fs.Int("slots", runtime.NumCPU(), "processes this node may run, as its liveness key reports them; default the number of CPUs (PMIXBUS_SLOTS)")
		liveInterval   = fs.Duration("liveness-interval", liveness.DefaultInterval, "how often the agent refreshes its liveness key (PMIXBUS_LIVENESS_INTERVAL)")
		clusterGrace   = fs.Duration("cluster-grace", liveness.DefaultClusterGrace, "how long a cluster connected to this one's processes may be unreachable before its nodes hosting them are declared down (PMIXBUS_CLUSTER_GRACE)")
		killGrace      = fs.Duration("kill-grace", 2*time.Second, "how long a launched process asked to end (SIGTERM) has before SIGKILL (PMIXBUS_KILL_GRACE)")
		launcherGrace  = fs.Duration("launcher-grace", launch.DefaultLauncherGrace, "how long a job's processes outlive their launcher once its key expired (PMIXBUS_LAUNCHER_GRACE)")
		jobUser        = fs.String("job-user", "", "run launched processes as this `user` (name or uid): the agent runs as root and keeps its keys where only root reads them, so the jobs cannot (docs/security.md) (PMIXBUS_JOB_USER)")
		pmixLib        = fs.String("pmix-lib", defaultPMIxLib(), "`dir` of pmixbus's libpmix.so.2, put first on launched processes' LD_LIBRARY_PATH (PMIXBUS_PMIX_LIB; default: lib/ beside the pmixbus binary, if it holds one)")
		iofMaxAge      = fs.Duration("iof-max-age", iof.DefaultMaxAge, "how long the cluster's output stream keeps a job's output for pmixbus attach (PMIXBUS_IOF_MAX_AGE)")
		iofStreamBytes = fs.Int64("iof-stream-bytes", iof.DefaultStreamBytes, "byte limit of the cluster's whole output stream, the oldest output of any job dropped first (PMIXBUS_IOF_STREAM_BYTES)")
		replicas       = fs.Int("replicas", 0, "copies `n` of every stream and bucket the agent creates in its cluster (event cache, output, publish/lookup, groups, agents, jobs), 1 to 5; 0: min(3, the cluster's servers as they advertise themselves) — give every agent of a cluster the same (PMIXBUS_REPLICAS)")
		noLaunch       = fs.Bool("no-launch", false, "do not launch processes for pmixbus run (a host RM launches its own)")
		natsHost       = fs.String("nats-host", "127.0.0.1", "`address` the embedded NATS server listens on; 0.0.0.0 for every interface, whose URLs the agent then prints (NATS URLs:) for agents of other hosts (PMIXBUS_NATS_HOST)")
		stopOnEOF      = fs.Bool("stop-on-eof", false, "stop, as on SIGTERM, when standard input ends: what a launcher that started the agent (pmixbus run --hostfile, through ssh or srun) holds open")
		liveTTL        = fs.Duration("liveness-ttl", liveness.DefaultTTL, "how long after its last refresh the key expires and the cluster declares the node down; whole seconds, more than --liveness-interval (PMIXBUS_LIVENESS_TTL)")
		jobs, clients  stringList
		leafRemotes    stringList
	)
	fs.Var(&leafRemotes, "leaf-remote", "the embedded server joins the hub at `URL` (nats-leaf://host:port) as a leaf node (repeatable)")
	fs.Var(&jobs, "job", "register a job: `nspace:session:rank=node,...` (repeatable; see above)")
	fs.Var(&clients, "client", "register a client `nspace.rank` of a --job on this node and print its environment (repeatable)")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if code, done := noArgs(fs, stderr); done {
		return code
	}
	if err := agentEnv.apply(fs); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	id, err := cluster.ParseID(*clusterName)
	if err != nil {
		return usageError(fs, stderr, "--cluster: %v", err)
	}
	level, ok := parseLogLevel(*logLevel)
	if !ok {
		return usageError(fs, stderr, "--log-level: unknown level %q; want off, error, warn, info, debug or trace", *logLevel)
	}
	if *natsURL != "" && (given(fs, "port") || given(fs, "store") || given(fs, "nats-host") || len(leafRemotes) > 0 || leafTLS.given()) {
		return usageError(fs, stderr, "--port, --store, --nats-host, --leaf-remote and --leaf-tls-* are for the embedded NATS server; with --nats there is none")
	}
	dir, err := keysDir(*keys)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	var specs []agent.Job
	for _, j := range jobs {
		job, err := parseJob(j)
		if err != nil {
			return usageError(fs, stderr, "--job: %v", err)
		}
		specs = append(specs, job)
	}
	var procs []pmix.Proc
	for _, c := range clients {
		p, err := clientOf(c, specs, *node)
		if err != nil {
			return usageError(fs, stderr, "--client: %v", err)
		}
		procs = append(procs, p)
	}

	cfg := agent.DefaultConfig(id, *node)
	if *listen != "" {
		cfg.Listen = *listen
	}
	cfg.HandlerTimeout = *handlerTimeout
	cfg.CacheSize = *cacheSize
	cfg.CacheMaxAge = *cacheMaxAge
	cfg.CacheMaxBytes = *cacheMaxBytes
	cfg.CacheMemory = *cacheMemory
	cfg.URL = *natsURL
	cfg.GlobalDomain = *globalDomain
	cfg.Slots = *slots
	cfg.Replicas = *replicas
	cfg.Version = pmixbusVersion()
	cfg.LivenessInterval, cfg.LivenessTTL = *liveInterval, *liveTTL
	cfg.ClusterGrace = *clusterGrace
	cfg.OutputMaxAge, cfg.OutputStreamBytes = *iofMaxAge, *iofStreamBytes
	cfg.KillGrace, cfg.LauncherGrace, cfg.NoLaunch, cfg.PMIxLibDir = *killGrace, *launcherGrace, *noLaunch, *pmixLib
	if *jobUser != "" {
		u, err := launch.LookupJobUser(*jobUser)
		if err != nil {
			return usageError(fs, stderr, "--job-user: %v", pmix.MessageOf(err))
		}
		if os.Geteuid() != 0 {
			return usageError(fs, stderr, "--job-user %s: the agent must run as root to start processes as another user", *jobUser)
		}
		cfg.JobUser = u
	}
	var log *slog.Logger
	if level != nil {
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: *level}))
		cfg.Logger = log
	}
	if cfg.URL == "" {
		// The agent starts the embedded server itself, and stops it.
		cfg.StoreDir = *store
		if cfg.StoreDir == "" {
			state, err := defaultStateDir()
			if err != nil {
				return usageError(fs, stderr, "%v", err)
			}
			cfg.StoreDir = filepath.Join(state, "store", string(id), *node)
		}
		cfg.Embedded = func(c *cluster.Config) {
			c.Host = *natsHost
			c.Port = *port
			c.LeafRemotes = leafRemotes
			c.LeafTLS = leafTLS.config()
			c.Logger = log
		}
	}
	// Validated without keys first: a bad command line creates none.
	if err := cfg.Validate(); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if cfg.Keys, err = agentKeys(cfg.URL == "", dir, log); err != nil {
		fmt.Fprintf(stderr, "pmixbus agent: %v\n", err)
		return exitFail
	}
	if *stopOnEOF {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
	}
	return serveAgent(ctx, cfg, specs, procs, *metricsAddr, true, stdout, stderr)
}

// agentKeys returns the keys of dir for an agent: every role's, created
// if missing, for one with an embedded server; what there is for one on
// another NATS, nil when that lacks the agent key.
func agentKeys(embedded bool, dir string, log *slog.Logger) (*security.Keys, error) {
	if embedded {
		return security.EnsureKeys(dir)
	}
	keys, err := security.LoadKeys(dir)
	if err != nil {
		return nil, err
	}
	if !keys.Has(security.RoleAgent) {
		if log != nil {
			log.Warn("no agent key: connecting to NATS without one", "keys", dir)
		}
		return nil, nil
	}
	return keys, nil
}

// serveAgent runs the agent until ctx ends, and its embedded NATS server
// if it has one.
//
// With register, the agent registers its NATS server's URL as a local
// one (localurl.go), where `pmixbus run` and `status` find it without
// --nats, until it stops.
func serveAgent(ctx context.Context, cfg agent.Config, jobs []agent.Job, clients []pmix.Proc, metricsAddr string, register bool, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "pmixbus agent: "+format+"\n", a...)
		return exitFail
	}
	a, err := agent.New(cfg)
	if err != nil {
		return fail("%v", err)
	}
	if err := a.Start(ctx); err != nil {
		return fail("%v", err)
	}
	shutdown := func() error {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		return a.Shutdown(sctx)
	}
	collectors := []prometheus.Collector{metrics.Agent(a, string(cfg.Cluster), cfg.Node)}
	if srv := a.Server(); srv != nil {
		collectors = append(collectors, metrics.Server(srv))
	}
	stopMetrics, err := serveMetrics(metricsAddr, stdout, collectors...)
	if err != nil {
		_ = shutdown()
		return fail("--metrics-addr: %v", err)
	}
	defer stopMetrics()
	for _, j := range jobs {
		if err := a.RegisterJob(ctx, j); err != nil {
			_ = shutdown()
			return fail("registering job %s: %v", j.Nspace, err)
		}
	}
	envs := make([]map[string]string, len(clients))
	for i, p := range clients {
		if envs[i], err = a.RegisterClient(ctx, p); err != nil {
			_ = shutdown()
			return fail("registering client %v: %v", p, err)
		}
	}
	if register {
		url := cfg.URL
		if srv := a.Server(); srv != nil {
			url = srv.ClientURL()
		}
		remove, err := registerLocal(localEndpoint{Kind: "agent", Cluster: string(cfg.Cluster), Name: cfg.Node, URL: url})
		if err != nil {
			fmt.Fprintf(stderr, "pmixbus agent: registering the local NATS URL: %v (pmixbus run will need --nats)\n", err)
		} else {
			defer remove()
		}
	}
	// The clients' environments first: who waits for the ready lines has
	// them all.
	for i, p := range clients {
		fmt.Fprintf(stdout, "# client %v\n", p)
		for _, k := range slices.Sorted(maps.Keys(envs[i])) {
			fmt.Fprintf(stdout, "export %s=%s\n", k, dvm.ShellQuote(envs[i][k]))
		}
	}
	fmt.Fprintf(stdout, "pmixbus agent %s of cluster %s ready\n", cfg.Node, cfg.Cluster)
	fmt.Fprintf(stdout, "listen: %s\n", a.Addr())
	fmt.Fprintf(stdout, "NATS URL: %s\n", a.NATS().ConnectedUrl())
	if srv := a.Server(); srv != nil {
		if urls := interfaceURLs(srv.ClientURL(), cfg.Embedded); urls != "" {
			fmt.Fprintf(stdout, "NATS URLs: %s\n", urls)
		}
	}
	<-ctx.Done()
	if err := shutdown(); err != nil {
		return fail("shutdown: %v", err)
	}
	return exitOK
}

// parseJob parses a --job value: nspace[:session]:rank=node,rank=node,...
// where a rank may be a range "lo-hi".
func parseJob(s string) (agent.Job, error) {
	parts := strings.Split(s, ":")
	var j agent.Job
	switch len(parts) {
	case 2:
		j.Nspace = parts[0]
	case 3:
		j.Nspace, j.Session = parts[0], parts[1]
	default:
		return j, fmt.Errorf("%q: want nspace:session:rank=node,... (an nspace of this cluster has no ':')", s)
	}
	if j.Nspace == "" {
		return j, fmt.Errorf("%q: empty nspace", s)
	}
	j.Procs = map[pmix.Rank]string{}
	for _, item := range strings.Split(parts[len(parts)-1], ",") {
		ranks, node, ok := strings.Cut(item, "=")
		if !ok || node == "" {
			return j, fmt.Errorf("%q: %q is not rank=node", s, item)
		}
		lo, hi, err := parseRankRange(ranks)
		if err != nil {
			return j, fmt.Errorf("%q: %v", s, err)
		}
		for r := lo; r <= hi; r++ {
			if prev, dup := j.Procs[pmix.Rank(r)]; dup {
				return j, fmt.Errorf("%q: rank %d is given twice (on %s and %s)", s, r, prev, node)
			}
			j.Procs[pmix.Rank(r)] = node
		}
	}
	return j, nil
}

func parseRankRange(s string) (lo, hi uint64, err error) {
	a, b, isRange := strings.Cut(s, "-")
	lo, err = strconv.ParseUint(a, 10, 32)
	if err != nil || !pmix.Rank(lo).Valid() {
		return 0, 0, fmt.Errorf("rank %q: want a number or lo-hi", s)
	}
	if !isRange {
		return lo, lo, nil
	}
	hi, err = strconv.ParseUint(b, 10, 32)
	if err != nil || !pmix.Rank(hi).Valid() || hi < lo || hi-lo >= 1<<16 {
		return 0, 0, fmt.Errorf("rank range %q: want lo-hi with lo <= hi, at most 65536 ranks", s)
	}
	return lo, hi, nil
}

// clientOf parses a --client value and checks it is a proc of a --job on
// this node.
func clientOf(s string, jobs []agent.Job, node string) (pmix.Proc, error) {
	p, err := pmix.ParseProc(s)
	if err != nil {
		return p, err
	}
	if !p.Rank.Valid() {
		return p, fmt.Errorf("%q: a client has a real rank", s)
	}
	for _, j := range jobs {
		if j.Nspace != p.Nspace {
			continue
		}
		n, ok := j.Procs[p.Rank]
		switch {
		case !ok:
			return p, fmt.Errorf("%v: job %s has no rank %v", p, j.Nspace, p.Rank)
		case n != node:
			return p, fmt.Errorf("%v runs on node %s per --job, not on this agent's node %s", p, n, node)
		}
		return p, nil
	}
	return p, fmt.Errorf("%v: no --job %s", p, p.Nspace)
}

// defaultPMIxLib is lib/ beside the running binary when it holds
// libpmix.so.2 (as the README builds it), else "".
func defaultPMIxLib() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	dir := filepath.Join(filepath.Dir(exe), "lib")
	if _, err := os.Stat(filepath.Join(dir, "libpmix.so.2")); err != nil {
		return ""
	}
	return dir
}

// interfaceURLs are the URLs of an embedded server listening on every
// interface (--nats-host 0.0.0.0 or ::), one per address of this host
// but the loopback ones, comma-separated as nats.Connect takes them: how
// agents of other hosts reach it. "" for a server on one address.
func interfaceURLs(clientURL string, embedded func(*cluster.Config)) string {
	var c cluster.Config
	embedded(&c)
	if ip := net.ParseIP(c.Host); ip == nil || !ip.IsUnspecified() {
		return ""
	}
	_, port, err := net.SplitHostPort(strings.TrimPrefix(clientURL, "nats://"))
	if err != nil {
		return ""
	}
	addrs, _ := net.InterfaceAddrs()
	var urls []string
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		urls = append(urls, "nats://"+net.JoinHostPort(ipn.IP.String(), port))
	}
	return strings.Join(urls, ",")
}
