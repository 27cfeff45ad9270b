package bench

import (
	"context"
	"fmt"
	"time"
)

// poll calls cond every interval until it returns nil, for limit at most,
// and then returns cond's last error; ctx ending stops it too.
func poll(ctx context.Context, interval, limit time.Duration, cond func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", limit, err)
		}
		select {
		case <-time.After(interval):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
