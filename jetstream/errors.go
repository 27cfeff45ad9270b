package jetstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/pmix"
)

// Errors of the key-value buckets. Each is a *pmix.Error, so errors.Is
// matches them by status too: errors.Is(err, pmix.ErrDuplicateKey) holds for
// ErrKeyExists, also after the error crossed the wire.
var (
	// ErrKeyExists: Create found the key already there (and not deleted).
	ErrKeyExists = pmix.NewError(pmix.ErrDuplicateKey, "jetstream: key exists")

	// ErrRevisionMismatch: a conditional Delete found the key at another
	// revision than the one given, or gone: someone else changed it first.
	ErrRevisionMismatch = pmix.NewError(pmix.ErrResourceBusy, "jetstream: key revision mismatch")

	// ErrUnreachable: no JetStream answered in the bucket's domain — its
	// servers are down, or the leaf link to them is. Retrying later may
	// succeed.
	ErrUnreachable = pmix.NewError(pmix.ErrUnreach, "jetstream: domain unreachable")

	// ErrInvalidKey: a key outside the alphabet of KV keys, or empty.
	ErrInvalidKey = pmix.NewError(pmix.ErrBadParam, "jetstream: invalid key")

	// ErrInvalidKVConfig: KVConfig.Validate found a problem.
	ErrInvalidKVConfig = pmix.NewError(pmix.ErrBadParam, "jetstream: invalid KV config")

	// ErrWatchEnded: the watch was stopped, or broke with its connection.
	ErrWatchEnded = pmix.NewError(pmix.ErrLostConnection, "jetstream: watch ended")

	// ErrKVClosed: the bucket handle was closed.
	ErrKVClosed = pmix.NewError(pmix.ErrInvalidOperation, "jetstream: KV handle closed")
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
		return pmix.Errorf(ErrRevisionMismatch.Status, "%s: revision mismatch: %w", what, err)
	case errors.Is(err, natsjs.ErrKeyExists):
		return pmix.Errorf(ErrKeyExists.Status, "%s: key exists: %w", what, err)
	case errors.Is(err, natsjs.ErrInvalidKey):
		return pmix.Errorf(ErrInvalidKey.Status, "%s: %w", what, err)
	case unreachable(err):
		return pmix.Errorf(ErrUnreachable.Status, "%s: unreachable: %w", what, err)
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
		return pmix.Errorf(ErrUnreachable.Status, "%s: unreachable: %w", what, nats.ErrNoResponders)
	}
	return pmix.Errorf(pmix.ErrGeneral, "%s: direct get answered %s %s", what, status, description)
}

// keyError reports an invalid key.
func keyError(key string) error {
	return fmt.Errorf("%w: %q: want letters, digits, '-', '_', '=', '/' and non-empty '.'-separated tokens", ErrInvalidKey, key)
}
