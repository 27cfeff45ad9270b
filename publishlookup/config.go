package publishlookup

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/jetstream"
)

// DefaultBucket is the name of the publish/lookup bucket in every domain.
const DefaultBucket = "PMIXBUS_PUBLISH"

// DefaultTimeout bounds each cleanup of data whose persistence ended.
const DefaultTimeout = 5 * time.Second

// DefaultMirrorScopes bounds the mirror: the scopes (KV keys) it keeps.
const DefaultMirrorScopes = 1024

// DefaultMirrorIdle is how long the mirror keeps a scope no lookup read.
const DefaultMirrorIdle = time.Minute

// Config configures a Service.
type Config struct {
	// Cluster is the cluster the service serves: the one of every Identity
	// given to it. Required.
	Cluster cluster.ID

	// Local is the bucket in the cluster's own JetStream domain: LOCAL,
	// NAMESPACE and SESSION data, and CUSTOM data whose procs are all in
	// this cluster. Required.
	Local jetstream.KV

	// Global is the bucket every cluster reaches, in the domain of the
	// server at the top of the topology (the hub's; cluster.TopDomain):
	// GLOBAL data, and CUSTOM data naming procs of other clusters. When
	// that is the cluster's own domain (a single cluster) give Local again;
	// a lookup then reads one bucket in one round trip. Required.
	Global jetstream.KV

	// Timeout bounds each cleanup of data whose persistence ended. Zero
	// means DefaultTimeout. (A request is bounded by its PMIX_TIMEOUT, and
	// each of its bucket operations by the bucket's own timeout; a
	// PMIX_WAIT lookup without PMIX_TIMEOUT waits until it is satisfied or
	// its context ends.)
	Timeout time.Duration

	// Retry is the pause before trying an unreachable bucket again, while
	// a lookup with PMIX_WAIT or PMIX_TIMEOUT waits for it. Zero means
	// 250 ms.
	Retry time.Duration

	// MirrorScopes bounds the mirror of recently looked-up scopes (see
	// mirror.go): at most this many KV keys kept, each with its current
	// entry. (Each bucket is followed by one consumer, whatever the
	// number.) Zero means DefaultMirrorScopes.
	MirrorScopes int

	// MirrorIdle is how long the mirror keeps a scope that no lookup
	// read; a bucket none is left of is no longer followed. Zero means
	// DefaultMirrorIdle.
	MirrorIdle time.Duration

	// Logger receives what the service cannot report through a return
	// value (cleanups that failed). Nil discards.
	Logger *slog.Logger
}

// Validate reports every problem with c at once, in an error wrapping
// ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	if err := c.Cluster.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("cluster: %w", err))
	}
	if c.Local == nil {
		errs = append(errs, errors.New("local bucket: nil"))
	}
	if c.Global == nil {
		errs = append(errs, errors.New("global bucket: nil (give the local bucket when there is no hub)"))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %v: negative", c.Timeout))
	}
	if c.MirrorScopes < 0 {
		errs = append(errs, fmt.Errorf("mirror scopes %d: negative", c.MirrorScopes))
	}
	if c.MirrorIdle < 0 {
		errs = append(errs, fmt.Errorf("mirror idle %v: negative", c.MirrorIdle))
	}
	if c.Retry < 0 {
		errs = append(errs, fmt.Errorf("retry %v: negative", c.Retry))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}
