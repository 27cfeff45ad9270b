package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// pollInterval is how often readiness checks are retried.
const pollInterval = 50 * time.Millisecond

// poll calls check until it returns nil or ctx ends. Each call gets a context
// bounded by attempt. On failure the error wraps ErrNotReady and the last
// error check returned, prefixed by what.
func poll(ctx context.Context, what string, attempt time.Duration, check func(context.Context) error) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	var last error
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		last = check(actx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s: %w (gave up: %w)", ErrNotReady, what, last, ctx.Err())
		case <-t.C:
		}
	}
}

// connect opens a short-lived client connection used by readiness checks,
// signed in with auth's client key when the servers have Auth.
func connect(url string, auth *Auth) (*nats.Conn, error) {
	return nats.Connect(url, append([]nats.Option{
		nats.Name("pmixbus-cluster-probe"),
		nats.Timeout(2 * time.Second),
		nats.NoReconnect(),
	}, auth.clientOptions()...)...)
}

// waitJetStream waits until the JetStream of domain answers an account-info
// request sent through the server at url.
func waitJetStream(ctx context.Context, url, domain string, auth *Auth) error {
	nc, err := connectWait(ctx, url, auth)
	if err != nil {
		return err
	}
	defer nc.Close()
	return checkJetStream(ctx, nc, domain)
}

// checkJetStream waits until the JetStream of domain answers on nc.
func checkJetStream(ctx context.Context, nc *nats.Conn, domain string) error {
	return poll(ctx, fmt.Sprintf("JetStream domain %q via %s", domain, nc.ConnectedUrlRedacted()), time.Second,
		func(ctx context.Context) error { return CheckJetStream(ctx, nc, domain) })
}

// connectWait connects to url, retrying until ctx ends. A server that
// refuses the credentials is not retried: it will not change its mind.
func connectWait(ctx context.Context, url string, auth *Auth) (*nats.Conn, error) {
	var nc *nats.Conn
	var refused error
	err := poll(ctx, "connect to "+url, 2*time.Second, func(context.Context) error {
		var err error
		nc, err = connect(url, auth)
		if errors.Is(err, nats.ErrAuthorization) {
			refused = err
			return nil
		}
		return err
	})
	if refused != nil {
		return nil, fmt.Errorf("cluster: connect to %s: %w", url, refused)
	}
	return nc, err
}

// checkFlow waits until a request published through from reaches a
// responder subscribed through to, and its reply comes back: proof that
// interest has propagated between the two servers in both directions.
func checkFlow(ctx context.Context, from, to *nats.Conn, subject string) error {
	sub, err := to.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := to.FlushTimeout(2 * time.Second); err != nil {
		return err
	}
	return poll(ctx, fmt.Sprintf("messages from %s to %s", from.ConnectedUrlRedacted(), to.ConnectedUrlRedacted()), 500*time.Millisecond,
		func(ctx context.Context) error {
			_, err := from.RequestWithContext(ctx, subject, []byte("ping"))
			if errors.Is(err, context.DeadlineExceeded) {
				return nats.ErrTimeout
			}
			return err
		})
}
