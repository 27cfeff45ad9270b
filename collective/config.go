package collective

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
)

// Jobs is the agent's job table: the rank → node map of a job of the
// agent's cluster, or nil for a job the agent does not know. The service
// calls it on every operation; it must not block.
type Jobs func(nspace string) map[pmix.Rank]string

// Config configures a Service.
type Config struct {
	// Cluster and Node are the agent's. Required.
	Cluster cluster.ID
	Node    string
	// Conn is the agent's NATS connection. Required.
	Conn *nats.Conn
	// Jobs tells which participants are local and how many ranks a
	// WILDCARD participant stands for. Required.
	Jobs Jobs
	// Home returns the cluster that names a job of the agent's table which
	// runs on several clusters (an MPMD job across clusters: one nspace,
	// the first app context's cluster, its rank 0's): its procs are
	// "home:nspace" in every operation, on every cluster, so that the
	// agents of all its clusters name its operations alike. "" (or a nil
	// Home): the agent's own cluster. Called when a job is registered
	// (JobChanged); it must not block.
	Home func(nspace string) cluster.ID
	// JobInfo returns the job-level info the host registered for a job of
	// the agent's cluster: what a connect gives the members of other
	// nspaces (RFC0003). Nil: none.
	JobInfo func(nspace string) []pmix.Info
	// Raise raises an event of the host RM, range CUSTOM (its targets
	// in info's pmix.KeyEventCustomRange), through the agent's event path:
	// RFC0003's connect notifications and PMIX_ERR_PROC_TERM_WO_SYNC. id
	// is the event's id, or "" for the agent to give it one: the events
	// of a node down are raised by every agent that declares it, each
	// with the same id, so that their targets' agents run each once. It
	// is called on a goroutine of the service. Nil: no events.
	Raise func(ctx context.Context, id string, code pmix.Status, info []pmix.Info) error
	// RaiseFrom raises an event as a local process of the agent (its
	// source), range CUSTOM, as if that process had notified it: the
	// PMIx group events a process causes (PMIX_GROUP_INVITED from the
	// leader, _INVITE_ACCEPTED/_DECLINED from the invitee, _LEFT), whose
	// handlers read the source (OpenPMIx's clients notify them). It is
	// called on a goroutine of the service. Nil: Raise.
	RaiseFrom func(ctx context.Context, from pmix.Proc, code pmix.Status, info []pmix.Info) error
	// Memberships keeps the groups connects form where an agent that
	// restarts finds them (Restore). Nil: in memory, lost with the agent.
	Memberships Memberships
	// Logger receives what the service cannot return: operations waiting
	// long with no timeout, contributions that cannot be delivered. Nil
	// discards.
	Logger *slog.Logger

	// AckWait bounds the wait for the coordinator's acknowledgement of a
	// contribution before it is sent again. Zero means 1 s.
	AckWait time.Duration
	// Retry is the pause before a contribution is sent again. Zero means
	// 250 ms.
	Retry time.Duration
	// Grace is how long an agent whose operation timed out waits for the
	// coordinator's failure release before failing its participants on its
	// own. Zero means 2 s.
	Grace time.Duration
	// WarnAfter is how long an operation with no PMIX_TIMEOUT may wait
	// before the service logs who has not arrived (and again each period).
	// Zero means 30 s.
	WarnAfter time.Duration
	// Recheck is how long an agent waits for the release after the
	// coordinator acknowledged its contribution before sending it again.
	// Zero means 10 s.
	Recheck time.Duration
	// Remember is how long a coordinator remembers a finished operation, to
	// refuse latecomers (ErrFinished). Zero means 2 min.
	Remember time.Duration
}

// Validate reports every problem with c at once, in an error wrapping
// ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	if err := c.Cluster.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("cluster: %w", err))
	}
	if c.Node == "" {
		errs = append(errs, errors.New("node: empty"))
	}
	if c.Conn == nil {
		errs = append(errs, errors.New("conn: nil"))
	}
	if c.Jobs == nil {
		errs = append(errs, errors.New("jobs: nil"))
	}
	for name, d := range map[string]time.Duration{"ack wait": c.AckWait, "retry": c.Retry, "grace": c.Grace, "warn after": c.WarnAfter, "remember": c.Remember, "recheck": c.Recheck} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %v: negative", name, d))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.AckWait, time.Second)
	def(&c.Retry, 250*time.Millisecond)
	def(&c.Grace, 2*time.Second)
	def(&c.WarnAfter, 30*time.Second)
	def(&c.Remember, 2*time.Minute)
	def(&c.Recheck, 10*time.Second)
	if c.Memberships == nil {
		c.Memberships = NewMemMemberships()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}
