package agent

import (
	"errors"
	"fmt"
	"github.com/pmixbus/pmixbus/iof"
	"log/slog"
	"math"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/launch/liveness"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
	"github.com/pmixbus/pmixbus/publishlookup"
	"github.com/pmixbus/pmixbus/security"
	"github.com/pmixbus/pmixbus/subjects"
)

// Config configures an Agent. Start from DefaultConfig.
type Config struct {
	// Cluster is the PMIx cluster the agent belongs to; it names the
	// cluster's JetStream domain too.
	Cluster cluster.ID
	// Node is the node the agent serves. One agent per node.
	Node string

	// NATS connection, in order of precedence: Conn (owned by the caller,
	// not closed by the agent), URL (dialled by the agent), or, when both
	// are empty, an embedded server the agent starts with its store in
	// StoreDir and stops at Shutdown.
	Conn     *nats.Conn
	URL      string
	StoreDir string
	// Embedded, if set, adjusts the embedded server's configuration before
	// it starts: its client port (a free one by default), leaf remotes to a
	// hub, their TLS, logger (none by default), … It starts from
	// cluster.DefaultConfig(Cluster, StoreDir), with Auth from Keys;
	// Validate checks the result.
	Embedded func(*cluster.Config)
	// Keys, if set, secure NATS (docs/security.md): the agent signs in
	// with its agent key (security.RoleAgent) — on URL or the embedded
	// server, not on Conn, which is the caller's — and the embedded
	// server accepts only the keys' roles, with their permissions
	// (Keys.ServerAuth), which needs every role's key. Nil: no key, and
	// an embedded server that accepts anyone.
	Keys *security.Keys

	// Listen is where local clients attach: "unix:/path/to.sock" (the
	// default, under the system temp dir) or "tcp:127.0.0.1:port" (port 0
	// picks one). TCP listens on loopback only.
	Listen string

	// MaxFrame bounds the size of a frame a client may send.
	MaxFrame int
	// HandlerTimeout is the registry default for handlers that set no
	// PMIX_EVENT_ACTION_TIMEOUT: a handler that has not completed by then
	// is passed over. Zero waits forever.
	HandlerTimeout time.Duration
	// Syslog writes a client's PMIX_LOG_SYSLOG messages (PMIx_Log); nil:
	// this node's syslog (iof.LocalSyslog).
	Syslog iof.SyslogFunc
	// HelloTimeout bounds how long a new connection may take to
	// authenticate.
	HelloTimeout time.Duration
	// ClientQueueLimit and ClientStallTimeout decide when a client that
	// does not read what it is sent is cut off (told why, once), so that
	// no client's reading speed delays the others: with more than
	// ClientQueueLimit bytes of frames queued for it, once its socket has
	// taken nothing for ClientStallTimeout, or at once past four times the
	// limit (which bounds the memory one client may hold). A client that
	// reads, however slowly, is let fall behind up to that.
	ClientQueueLimit   int
	ClientStallTimeout time.Duration
	// ChainWindow bounds the chains a client has in flight (256 in
	// DefaultConfig): its events beyond them wait, in order, and start as
	// its earlier chains end, so that a burst does not keep a chain per
	// event and client live at once. What waits counts against
	// ClientQueueLimit, as frames do; a client that has waiting events
	// past the limit and none of whose handlers completed for
	// ClientStallTimeout is cut off.
	ChainWindow int
	// WriteTimeout bounds one write to a client's socket; a client that
	// takes longer to read is cut off.
	WriteTimeout time.Duration
	// MaxPendingHello bounds the connections that have not yet said hello
	// (1024 in DefaultConfig). Until then a peer is unauthenticated, and
	// each such connection costs a goroutine and at most a hello's frame
	// (proto.MaxHelloFrame); connections beyond the bound get an error
	// frame and are closed at once, with a warning in the log.
	MaxPendingHello int

	// Event cache (JetStream, replacing RFC0002's ring buffer); one per
	// cluster, shared by its agents: the last agent to start sets the
	// limits. CacheSize is the count limit (RFC0002's 512); CacheMaxAge
	// and CacheMaxBytes are optional (zero: none). CacheMemory keeps the
	// cache in memory instead of files, which do survive a NATS restart.
	CacheSize     int
	CacheMaxAge   time.Duration
	CacheMaxBytes int64
	CacheMemory   bool
	// CacheStatsInterval is how often the agent checks the cache for
	// evictions, which it counts and logs. Zero is 5 s.
	CacheStatsInterval time.Duration

	// GlobalDomain is the JetStream domain of the bucket holding GLOBAL
	// published data (PMIx_Publish), the one every cluster reaches. Empty
	// (the default) means: found by Start from the topology — the domain of
	// the server at its top (cluster.TopDomain): the hub the cluster links
	// to, whatever its name, or the cluster's own server when it links to
	// none —, else a domain named cluster.DefaultHubDomain if one answers;
	// Start fails when neither does. A domain given here is used as it is,
	// also while it does not answer.
	GlobalDomain string
	// PublishBucket names the publish/lookup bucket, the same in every
	// domain.
	PublishBucket string
	// Replicas is the replica count of every stream and bucket the agent
	// creates or updates in its cluster's domain: the event cache, output,
	// publish/lookup, groups, agents and jobs (docs/operations.md). 0 (the
	// default) is cluster.DefaultReplicas: min(3, the cluster's servers);
	// at most 5, and at most the cluster's servers. Every agent of a
	// cluster should be given the same.
	Replicas int

	// Liveness (package launch/liveness, docs/liveness.md): the agent keeps
	// a key in its cluster's PMIXBUS_AGENTS bucket, refreshed every
	// LivenessInterval and expiring LivenessTTL (whole seconds) after the
	// last refresh; the cluster's agents declare the node down when it
	// expires. Slots (the processes the node may run; the number of CPUs
	// by default) and Version are what the key reports.
	Slots            int
	Version          string
	LivenessInterval time.Duration
	LivenessTTL      time.Duration
	// ClusterGrace is how long another cluster whose processes are
	// connected to this one's may stay unreachable before its nodes that
	// host them are declared down here (liveness.Config.ClusterGrace).
	ClusterGrace time.Duration

	// Launch (package launch): the agent answers its node's control
	// requests, spawns and watches the ranks launchers place on it
	// (`pmixbus run`). KillGrace is how long a process asked to end has
	// before SIGKILL; LauncherGrace how long the ranks of a job whose
	// launcher stopped beating live on. NoLaunch turns the service off (an
	// agent embedded by a host RM that launches its own processes).
	NoLaunch      bool
	KillGrace     time.Duration
	LauncherGrace time.Duration
	// PMIxLibDir is put first on the LD_LIBRARY_PATH of the processes the
	// agent launches: where pmixbus's libpmix.so.2 is (docs/cabi.md).
	PMIxLibDir string
	// JobUser, if set, is who the processes the agent launches run as:
	// the agent runs as root, keeps its keys where only root may read
	// them, and its socket is open to JobUser's group (docs/security.md,
	// "Who can read which key"). Nil: the agent's own user.
	JobUser *launch.JobUser
	// Topology is the node's hwloc topology as XML, given to every client
	// as PMIX_LOCAL_TOPO (pmix.ltopo), as mpirun's daemon gives it, so
	// that Open MPI's ranks load it rather than each discover it. Empty:
	// the agent runs PMIxLibDir's pmixbus-topology once at Start (make
	// builds it where libhwloc-dev is installed), or gives none. The
	// helper's topology is also written to a shared-memory file of the
	// agent's, removed when it stops, which the clients of its uid adopt
	// (PMIX_HWLOC_SHMEM_FILE/ADDR/SIZE; docs/launch.md); a configured one
	// is given as XML only.
	Topology string
	// NoNodeFence turns off the shared-memory barrier of a job whose
	// ranks all run on this node (package nodefence, docs/cabi.md): its
	// fences then all take the agent's path.
	NoNodeFence bool

	// Output (package iof, docs/iof.md): what the launched processes write
	// is kept in the cluster's PMIXBUS_IOF stream for OutputMaxAge
	// (iof.DefaultMaxAge, a day) and at most OutputStreamBytes in all
	// (iof.DefaultStreamBytes); zero means those defaults. The stream is
	// in memory when CacheMemory is set.
	OutputMaxAge      time.Duration
	OutputStreamBytes int64

	// Logger receives the agent's logs. Nil discards them.
	Logger *slog.Logger

	// inboxSize replaces the router's inbox size (tests: an overflow with
	// a few thousand events).
	inboxSize int
}

// defaultChainWindow is DefaultConfig's ChainWindow.
const defaultChainWindow = 256

// DefaultConfig returns a Config for the given cluster and node with an
// embedded NATS server, a Unix socket under os.TempDir, 4 MiB frames, the
// registries' default handler timeout (bus.DefaultHandlerTimeout, 30 s),
// GLOBAL published data where the topology says (GlobalDomain empty), and
// liveness.DefaultConfig's slots, version, interval (500 ms) and TTL (2 s).
// Every default of the agent lives here.
func DefaultConfig(id cluster.ID, node string) Config {
	live := liveness.DefaultConfig()
	return Config{
		Cluster:            id,
		Node:               node,
		Listen:             "unix:" + filepath.Join(SocketDir(), "pmixbus-"+subjects.EscapeToken(string(id))+"-"+subjects.EscapeToken(node)+".sock"),
		MaxFrame:           proto.DefaultMaxFrame,
		HandlerTimeout:     bus.DefaultHandlerTimeout,
		HelloTimeout:       10 * time.Second,
		ClientQueueLimit:   8 << 20,
		ClientStallTimeout: 2 * time.Second,
		ChainWindow:        defaultChainWindow,
		WriteTimeout:       10 * time.Second,
		MaxPendingHello:    1024,
		CacheSize:          jetstream.DefaultEventCacheSize,
		PublishBucket:      publishlookup.DefaultBucket,
		Slots:              live.Slots,
		Version:            live.Version,
		LivenessInterval:   live.Interval,
		LivenessTTL:        live.TTL,
	}
}

// livenessKnobs are the liveness settings of c.
func (c Config) livenessKnobs() liveness.Config {
	live := liveness.DefaultConfig()
	live.Slots, live.Version = c.Slots, c.Version
	live.Interval, live.TTL = c.LivenessInterval, c.LivenessTTL
	if c.ClusterGrace > 0 {
		live.ClusterGrace = c.ClusterGrace
	}
	return live
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	if err := c.Cluster.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("cluster: %w", err))
	}
	if c.Node == "" {
		errs = append(errs, errors.New("node: must not be empty"))
	} else if err := subjects.CheckName("node", c.Node); err != nil {
		errs = append(errs, errors.New(pmix.MessageOf(err)))
	}
	if _, _, err := splitListen(c.Listen); err != nil {
		errs = append(errs, err)
	}
	if c.MaxFrame < 1024 {
		errs = append(errs, fmt.Errorf("max frame %d: must be at least 1024 bytes", c.MaxFrame))
	}
	if c.OutputMaxAge < 0 || c.OutputStreamBytes < 0 {
		errs = append(errs, fmt.Errorf("output max age %v, stream bytes %d: must not be negative", c.OutputMaxAge, c.OutputStreamBytes))
	}
	if c.KillGrace < 0 || c.LauncherGrace < 0 {
		errs = append(errs, fmt.Errorf("kill grace %v, launcher grace %v: must not be negative", c.KillGrace, c.LauncherGrace))
	}
	if c.HandlerTimeout < 0 {
		errs = append(errs, fmt.Errorf("handler timeout %v: must not be negative", c.HandlerTimeout))
	}
	if c.CacheSize <= 0 {
		errs = append(errs, fmt.Errorf("cache size %d: must be positive", c.CacheSize))
	}
	if c.CacheMaxAge < 0 || c.CacheMaxBytes < 0 || c.CacheStatsInterval < 0 {
		errs = append(errs, errors.New("cache limits: must not be negative"))
	}
	if c.ClientQueueLimit < 64<<10 {
		errs = append(errs, fmt.Errorf("client queue limit %d: must be at least 64 KiB", c.ClientQueueLimit))
	}
	if c.ChainWindow < 1 || c.ChainWindow > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("chain window %d: must be at least 1", c.ChainWindow))
	}
	if c.ClientStallTimeout <= 0 {
		errs = append(errs, fmt.Errorf("client stall timeout %v: must be positive", c.ClientStallTimeout))
	}
	if c.WriteTimeout <= 0 {
		errs = append(errs, fmt.Errorf("write timeout %v: must be positive", c.WriteTimeout))
	}
	if c.HelloTimeout <= 0 {
		errs = append(errs, fmt.Errorf("hello timeout %v: must be positive", c.HelloTimeout))
	}
	if c.MaxPendingHello < 1 {
		errs = append(errs, fmt.Errorf("max pending hello %d: must be at least 1", c.MaxPendingHello))
	}
	if c.GlobalDomain != "" {
		if err := cluster.ID(c.GlobalDomain).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("global domain: %w", err))
		}
	}
	if err := cluster.ID(c.PublishBucket).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("publish bucket: %w", err))
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("replicas %d: want 1 to 5, or 0 for min(3, the cluster's servers)", c.Replicas))
	}
	if c.Keys != nil && c.Conn == nil && !c.Keys.Has(security.RoleAgent) {
		errs = append(errs, fmt.Errorf("keys: %w: %s", security.ErrNoKey, security.RoleAgent))
	}
	if err := c.livenessKnobs().ValidateKnobs(); err != nil {
		errs = append(errs, err)
	}
	if c.Conn == nil && c.URL == "" {
		if c.StoreDir == "" {
			errs = append(errs, errors.New("store dir: needed for the embedded NATS server (or give a NATS URL or connection)"))
		} else if scfg, err := c.embeddedServer(); err != nil {
			errs = append(errs, fmt.Errorf("embedded NATS server: %w", err))
		} else if err := scfg.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("embedded NATS server: %w", err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}

// embeddedServer is the configuration of the embedded NATS server.
func (c Config) embeddedServer() (cluster.Config, error) {
	scfg := cluster.DefaultConfig(c.Cluster, c.StoreDir)
	if c.Keys != nil {
		auth, err := c.Keys.ServerAuth()
		if err != nil {
			return scfg, err
		}
		scfg.Auth = auth
	}
	if c.Embedded != nil {
		c.Embedded(&scfg)
	}
	return scfg, nil
}

func splitListen(s string) (network, addr string, err error) {
	network, addr, err = proto.ParseAddr(s)
	if err != nil {
		return "", "", fmt.Errorf("listen %q: want unix:/path or tcp:127.0.0.1:port", s)
	}
	return network, addr, nil
}
