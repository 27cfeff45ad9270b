package e2e

import (
	"context"
	"sync"
	"testing"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/pmix"
)

// Connected is what one client's Connect returned.
type Connected struct {
	Nspace string
	Rank   pmix.Rank
	Err    error
}

// ConnectAll calls Connect from each named client at once, each with the
// procs procsOf gives it, and returns what each got.
func ConnectAll(t *testing.T, w *agenttest.World, names []string, procsOf func(string) []pmix.Proc, info ...pmix.Info) map[string]Connected {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), WaitTime)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[string]Connected{}
	for _, n := range names {
		wg.Go(func() {
			ns, r, err := w.Client(n).Connect(ctx, procsOf(n), info)
			mu.Lock()
			out[n] = Connected{Nspace: ns, Rank: r, Err: err}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}
