package liveness

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/subjects"
)

// Defaults of the knobs (docs/liveness.md). With them an agent that stops
// beating is declared down at most DefaultTTL after its last beat, and a
// pause of the agent or its link shorter than DefaultTTL minus one
// DefaultInterval goes unnoticed.
const (
	DefaultInterval  = 500 * time.Millisecond
	DefaultTTL       = 2 * time.Second
	DefaultMarkerTTL = 5 * time.Minute
	// DefaultClusterGrace: a connected cluster's leaf link down this long
	// and its nodes hosting connected processes are declared down.
	DefaultClusterGrace = 10 * time.Second
)

// Host is what the service needs of the agent that runs it.
type Host interface {
	// HostedJobs returns the jobs whose job maps place ranks on this
	// node, with those ranks: what the agent's key lists, so that the
	// other agents know which procs went down with it.
	HostedJobs() []HostedJob
	// Raise publishes an event as the cluster's host RM does (no sending
	// client), by its range; m.ID is already set.
	Raise(m *event.Message) error
}

// Config configures a Service. Start from DefaultConfig.
type Config struct {
	// Conn is the agent's NATS connection, owned by the caller. Required.
	Conn *nats.Conn
	// Cluster is the agent's cluster: its keys live in the cluster's
	// JetStream domain. Required.
	Cluster cluster.ID
	// Node is the agent's node, its key in the bucket. Required.
	Node string
	// Listen is where the agent's clients attach, as the key reports it.
	Listen string
	// Host gives the hosted jobs and raises events. Required.
	Host Host

	// Slots is how many processes the node may run (PRRTE's slots). Zero
	// in DefaultConfig means the number of CPUs.
	Slots int
	// Version is the agent's version, as the key reports it.
	Version string

	// Interval is how often the agent refreshes its key; TTL is how long
	// the key lives after each refresh. TTL is whole seconds (the unit of
	// JetStream's per-message TTL), at least 1 s, and more than Interval:
	// a live agent whose refreshes are all late by less than TTL − Interval
	// is never declared down, and a dead one is declared down at most TTL
	// after its last refresh.
	Interval, TTL time.Duration
	// MarkerTTL is how long the marker of an expired key stays in the
	// bucket: watchers that reconnect within it still see the expiry, and
	// `pmixbus status` reports the node as down. At least 1 s.
	MarkerTTL time.Duration
	// ClusterGrace is how long another cluster connected to this one's
	// processes may go unanswering (its leaf link down) before its nodes
	// that host connected processes are declared down here. Leaf links
	// reconnect: a shorter outage raises nothing. Zero means
	// DefaultClusterGrace. Only with a Host that is a ConnectionHost.
	ClusterGrace time.Duration
	// Replicas of the bucket when this agent creates it: 1 to 5, at most
	// the cluster's servers. Zero means 1.
	Replicas int

	// Logger receives what cannot be returned: failed refreshes, nodes
	// declared down, events that could not be raised. Nil discards.
	Logger *slog.Logger
}

// DefaultConfig returns the knobs' defaults, with Slots the number of CPUs
// and Version the pmixbus module's; the caller fills in the rest.
func DefaultConfig() Config {
	return Config{
		Slots:     runtime.NumCPU(),
		Version:   ModuleVersion(),
		Interval:  DefaultInterval,
		TTL:       DefaultTTL,
		MarkerTTL: DefaultMarkerTTL,

		ClusterGrace: DefaultClusterGrace,
	}
}

// ModuleVersion is the version of the pmixbus module in the running
// binary's build info, or "dev".
func ModuleVersion() string {
	const path = "github.com/pmixbus/pmixbus"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	v := bi.Main.Version
	if bi.Main.Path != path {
		v = ""
		for _, d := range bi.Deps {
			if d.Path == path {
				v = d.Version
			}
		}
	}
	if v == "" || v == "(devel)" {
		return "dev"
	}
	return v
}

// ValidateKnobs reports every problem with the knobs alone (Slots,
// Interval, TTL, MarkerTTL, Replicas): what a caller that fills in the
// rest later, an agent's config, can check early.
func (c Config) ValidateKnobs() error {
	if errs := c.knobErrors(); len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}

func (c Config) knobErrors() []error {
	var errs []error
	if c.Slots < 0 {
		errs = append(errs, fmt.Errorf("slots %d: must not be negative", c.Slots))
	}
	if c.TTL < time.Second || c.TTL%time.Second != 0 {
		errs = append(errs, fmt.Errorf("liveness TTL %v: want whole seconds, at least 1s (JetStream's per-key TTL is in seconds)", c.TTL))
	}
	if c.Interval <= 0 || c.Interval >= c.TTL {
		errs = append(errs, fmt.Errorf("liveness interval %v: want more than 0 and less than the TTL %v (a third of it or less tolerates two late refreshes)", c.Interval, c.TTL))
	}
	if c.MarkerTTL < time.Second {
		errs = append(errs, fmt.Errorf("liveness marker TTL %v: want at least 1s", c.MarkerTTL))
	}
	if c.ClusterGrace < 0 {
		errs = append(errs, fmt.Errorf("cluster grace %v: must not be negative", c.ClusterGrace))
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("liveness replicas %d: want 1 to 5 (0 means 1)", c.Replicas))
	}
	return errs
}

// Validate reports every problem with c at once, in an error wrapping
// ErrInvalidConfig.
func (c Config) Validate() error {
	errs := c.knobErrors()
	if c.Conn == nil {
		errs = append(errs, errors.New("conn: nil"))
	}
	if err := c.Cluster.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("cluster: %w", err))
	}
	if c.Node == "" {
		errs = append(errs, errors.New("node: must not be empty"))
	} else if err := subjects.CheckName("node", c.Node); err != nil {
		errs = append(errs, err)
	}
	if c.Host == nil {
		errs = append(errs, errors.New("host: nil"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}
