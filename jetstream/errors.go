package jetstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/pmix"
)

// Errors of the key-value buckets and the event cache. Each is a
// *pmix.Error sentinel with a code of its own, so errors.Is tells it from
// other errors of its status (ErrKVClosed is not publishlookup.ErrClosed),
// while errors.Is with the bare status matches too: errors.Is(err,
// pmix.ErrDuplicateKey) holds for ErrKeyExists, also after the error
// crossed the wire.
var (
	// ErrKeyExists: Create found the key already there (and not deleted).
	ErrKeyExists = pmix.NewCodedError(pmix.ErrDuplicateKey, "jetstream.key_exists", "key exists")

	// ErrRevisionMismatch: a conditional Delete found the key at another
	// revision than the one given, or gone: someone else changed it first.
	ErrRevisionMismatch = pmix.NewCodedError(pmix.ErrResourceBusy, "jetstream.revision_mismatch", "key revision mismatch")

	// ErrUnreachable: no JetStream answered in the bucket's domain — its
	// servers are down, or the leaf link to them is. Retrying later may
	// succeed.
	ErrUnreachable = pmix.NewCodedError(pmix.ErrUnreach, "jetstream.unreachable", "domain unreachable")

	// ErrInvalidKey: a key outside the alphabet of KV keys, empty, or over
	// MaxKeyLen bytes.
	ErrInvalidKey = pmix.NewCodedError(pmix.ErrBadParam, "jetstream.invalid_key", "invalid key")

	// ErrInvalidKVConfig: KVConfig.Validate found a problem.
	ErrInvalidKVConfig = pmix.NewCodedError(pmix.ErrBadParam, "jetstream.invalid_kv_config", "invalid KV config")

	// ErrInvalidCacheConfig: EventCacheConfig.Validate found a problem.
	ErrInvalidCacheConfig = pmix.NewCodedError(pmix.ErrBadParam, "jetstream.invalid_cache_config", "invalid event cache config")

	// ErrWatchEnded: the watch was stopped, or broke with its connection.
	ErrWatchEnded = pmix.NewCodedError(pmix.ErrLostConnection, "jetstream.watch_ended", "watch ended")

	// ErrKVClosed: the bucket handle was closed.
	ErrKVClosed = pmix.NewCodedError(pmix.ErrInvalidOperation, "jetstream.kv_closed", "KV handle closed")
)

// kvError translates an error of nats.go into one of this package's, keeping
// the original reachable with errors.Unwrap. what names the operation and
// the bucket for the message.
func kvError(err error, what string) error {
	var pe *pmix.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe):
		return err
	case errors.Is(err, natsjs.ErrKeyRevisionMismatch): // before ErrKeyExists, which matches it too
		return fmt.Errorf("%s: %w: %w", what, ErrRevisionMismatch, err)
	case errors.Is(err, natsjs.ErrKeyExists):
		return fmt.Errorf("%s: %w: %w", what, ErrKeyExists, err)
	case errors.Is(err, natsjs.ErrInvalidKey):
		return fmt.Errorf("%s: %w: %w", what, ErrInvalidKey, err)
	case unreachable(err):
		return fmt.Errorf("%s: %w: %w", what, ErrUnreachable, err)
	case errors.Is(err, context.Canceled):
		return pmix.Errorf(pmix.ErrTimeout, "%s: %w", what, err)
	}
	return pmix.Errorf(pmix.ErrGeneral, "%s: %w", what, err)
}

// unreachable reports whether err says that nobody answered in the domain:
// no responders (nats.go turns them into ErrJetStreamNotEnabled for API
// requests and ErrNoStreamResponse for publishes), a timeout, or a lost
// connection.
func unreachable(err error) bool {
	for _, target := range []error{
		nats.ErrNoResponders, nats.ErrTimeout, context.DeadlineExceeded,
		nats.ErrConnectionClosed, nats.ErrConnectionDraining, nats.ErrDisconnected,
		natsjs.ErrJetStreamNotEnabled, natsjs.ErrNoStreamResponse, natsjs.ErrNoHeartbeat,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// statusError turns the status of a direct-get reply into an error.
func statusError(status, description, what string) error {
	if status == "503" {
		return fmt.Errorf("%s: %w: %w", what, ErrUnreachable, nats.ErrNoResponders)
	}
	return pmix.Errorf(pmix.ErrGeneral, "%s: direct get answered %s %s", what, status, description)
}

// keyError reports an invalid key.
func keyError(key string) error {
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key too long: %d bytes, at most %d (%s)", ErrInvalidKey, len(key), MaxKeyLen, pmix.Quote(key))
	}
	return fmt.Errorf("%w: %s: want letters, digits, '-', '_', '=', '/' and non-empty '.'-separated tokens", ErrInvalidKey, pmix.Quote(key))
}
