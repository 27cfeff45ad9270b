package clustertest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// Violations records the permission violations a server reports to a
// connection: it refuses a publish or a subscription its permissions do
// not allow, and says so asynchronously. Give Option to Connect.
type Violations struct {
	mu   sync.Mutex
	seen []string
}

// Option records the connection's permission violations in v.
func (v *Violations) Option() nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			v.mu.Lock()
			v.seen = append(v.seen, err.Error())
			v.mu.Unlock()
		}
	})
}

// Publish is the violation a refused publish to subject reports.
func Publish(subject string) string { return fmt.Sprintf("Publish to %q", subject) }

// Subscription is the violation a refused subscription to subject
// reports.
func Subscription(subject string) string { return fmt.Sprintf("Subscription to %q", subject) }

// Wait waits until a violation naming what (Publish(…), Subscription(…))
// has been reported, and fails t if none is within timeout. Flush the
// connection first: a server reports a violation before it answers the
// flush's ping, but the report reaches v a moment later.
func (v *Violations) Wait(t testing.TB, timeout time.Duration, what string) {
	t.Helper()
	WaitFor(t, timeout, func() error {
		if v.Has(what) {
			return nil
		}
		return fmt.Errorf("no permission violation for %s; seen: %v", what, v.All())
	})
}

// Fence waits until every violation of what nc sent so far has been
// reported: it publishes where no pmixbus role may (nc must have
// permissions that deny "_FENCE.>") and waits for that violation, which
// comes after the others.
func (v *Violations) Fence(t testing.TB, nc *nats.Conn) {
	t.Helper()
	subject := "_FENCE." + nuid.Next()
	if err := nc.Publish(subject, nil); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	v.Wait(t, 10*time.Second, Publish(subject))
}

// Has reports whether a violation naming what was reported.
func (v *Violations) Has(what string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range v.seen {
		if strings.Contains(s, what) {
			return true
		}
	}
	return false
}

// All returns every violation reported so far.
func (v *Violations) All() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.seen...)
}

// Refused fails t unless the server at url refuses a connection made with
// opts (none: without a key) with an authorization violation.
func Refused(t testing.TB, url string, opts ...nats.Option) {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.NoReconnect()}, opts...)...)
	if nc != nil {
		nc.Close()
	}
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("connecting to %s: %v, want an authorization violation", url, err)
	}
}
