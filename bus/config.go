package bus

import (
	"log/slog"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
)

// DefaultHandlerTimeout is DefaultConfig's DefaultTimeout: how long a handler
// may take to complete before the chain passes it over, when its
// registration gives no PMIX_EVENT_ACTION_TIMEOUT. Handlers are meant to
// answer promptly (a long action returns PMIX_EVENT_ACTION_DEFERRED), so this
// only bounds how long a lost or hung handler stalls a chain. It is the
// default of every registry pmixbus runs: an agent's registries of its
// clients (agent.DefaultConfig) and a client's own (PROC_LOCAL and internal
// events).
const DefaultHandlerTimeout = 30 * time.Second

// Config configures a Registry.
type Config struct {
	// Self is the process that owns the registry, as source-range filters
	// see it: a client's own proc with its cluster, node and session; for a
	// registry of the host RM, a zero Proc with the RM's cluster and node.
	// It is also the source of the abort event the registry raises.
	Self Origin

	// DefaultTimeout is how long a handler whose registration has no
	// PMIX_EVENT_ACTION_TIMEOUT may take to complete. Zero means no limit.
	DefaultTimeout time.Duration

	// Logger receives the registry's diagnostics (timed-out handlers at
	// Warn, late or extra completions at Debug). Nil means no logging.
	Logger *slog.Logger

	// Clock provides time and timers for handler timeouts. Nil means the
	// real clock; tests pass a fake one.
	Clock Clock
}

// DefaultConfig returns a configuration with DefaultHandlerTimeout, no
// logger, the real clock and a zero Self (a registry of the host RM). Set
// Self for a client's registry.
func DefaultConfig() Config {
	return Config{DefaultTimeout: DefaultHandlerTimeout}
}

// Validate reports a configuration that cannot work, as an *pmix.Error with
// pmix.ErrBadParam.
func (c Config) Validate() error {
	if c.DefaultTimeout < 0 {
		return pmix.Errorf(pmix.ErrBadParam, "bus: negative DefaultTimeout %v", c.DefaultTimeout)
	}
	if len(c.Self.Proc.Nspace) > pmix.MaxNspaceLen {
		return pmix.Errorf(pmix.ErrBadParam, "bus: Self nspace is %d bytes, more than %d", len(c.Self.Proc.Nspace), pmix.MaxNspaceLen)
	}
	if !c.Self.Proc.IsZero() && !c.Self.Proc.Rank.Valid() {
		return pmix.Errorf(pmix.ErrBadParam, "bus: Self proc %v must have a real rank", c.Self.Proc)
	}
	return nil
}

// Clock is the source of time and timers for handler timeouts.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed, unless
	// the returned Timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started, and reports whether
	// it did.
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
