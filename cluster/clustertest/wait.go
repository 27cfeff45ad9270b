package clustertest

import (
	"testing"
	"time"
)

// pollEvery is how often WaitFor retries.
const pollEvery = 20 * time.Millisecond

// WaitFor calls f until it returns nil, and fails t with f's last error if
// timeout passes first. It replaces sleeping in tests: it returns as soon as
// the condition holds.
func WaitFor(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	if err := waitFor(timeout, f); err != nil {
		t.Fatalf("not true after %v: %v", timeout, err)
	}
}

// waitFor is WaitFor without the testing.TB, returning the last error.
func waitFor(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(pollEvery)
	}
}
