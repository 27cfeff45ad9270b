package e2e

import (
	"errors"
	"fmt"
	"testing"

	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
)

// Rng is the PMIX_RANGE directive of r.
func Rng(r pmix.Range) pmix.Info { return pmix.NewInfo(pmix.KeyRange, pmix.RangeValue(r)) }

// Str is the info k of the string v.
func Str(k, v string) pmix.Info { return pmix.NewInfo(k, pmix.String(v)) }

// Publish publishes infos and fails t if the publish fails.
func (tc *Client) Publish(t *testing.T, infos ...pmix.Info) {
	t.Helper()
	if err := tc.C.Publish(t.Context(), infos); err != nil {
		t.Fatalf("%s: publish: %v", tc.Name, err)
	}
}

// LookupOne looks key up and wants the value want, published by from.
func (tc *Client) LookupOne(t *testing.T, key, want, from string, directives ...pmix.Info) {
	t.Helper()
	got, err := tc.C.Lookup(t.Context(), []string{key}, directives)
	if err != nil {
		t.Fatalf("%s: lookup %s: %v", tc.Name, key, err)
	}
	if s, _ := got[0].Value.Str(); len(got) != 1 || got[0].Key != key || s != want || got[0].Proc.String() != from {
		t.Fatalf("%s: lookup %s: %+v, want %q from %s", tc.Name, key, got, want, from)
	}
}

// LookupFails looks keys up and wants the status of want.
func (tc *Client) LookupFails(t *testing.T, keys []string, want pmix.Status, directives ...pmix.Info) []client.PData {
	t.Helper()
	got, err := tc.C.Lookup(t.Context(), keys, directives)
	if !errors.Is(err, want) {
		t.Fatalf("%s: lookup %v: %+v %v, want %v", tc.Name, keys, got, err, want)
	}
	return got
}

// LookupGone waits until a lookup of keys by tc is PMIX_ERR_NOT_FOUND:
// tc's agent mirrors what it looked up, and sees a removal made through
// another agent within its follow's delivery time.
func (tc *Client) LookupGone(t *testing.T, keys ...string) {
	t.Helper()
	clustertest.WaitFor(t, WaitTime, func() error {
		if got, err := tc.C.Lookup(t.Context(), keys, nil); !errors.Is(err, pmix.ErrNotFound) {
			return fmt.Errorf("%s: lookup %v: %+v %v, want not found", tc.Name, keys, got, err)
		}
		return nil
	})
}

// LookupResult is what a lookup of LookupAsync returned.
type LookupResult struct {
	Data []client.PData
	Err  error
}

// LookupAsync runs a lookup in the background.
func (tc *Client) LookupAsync(keys []string, directives ...pmix.Info) <-chan LookupResult {
	ch := make(chan LookupResult, 1)
	tc.C.LookupCB(keys, directives, func(d []client.PData, err error) { ch <- LookupResult{d, err} })
	return ch
}

// WaitWaiting waits until n PMIX_WAIT lookups wait with the buckets they
// wait on followed (agent.Agent.LookupsWaiting): a test publishes only once
// the lookup is past its first read, so what wakes it is the follow.
func (w *World) WaitWaiting(t *testing.T, n int) {
	t.Helper()
	clustertest.WaitFor(t, WaitTime, func() error {
		got := 0
		for _, a := range w.Agents {
			got += a.LookupsWaiting()
		}
		if got != n {
			return fmt.Errorf("%d lookups waiting, want %d", got, n)
		}
		return nil
	})
}
