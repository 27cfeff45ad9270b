package collective

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// getLater runs a Get of rank's key as rank 0 on a goroutine and returns
// where its outcome arrives.
func (w *world) getLater(ctx context.Context, rank pmix.Rank, key string, info []pmix.Info) <-chan error {
	got := make(chan error, 1)
	go func() {
		v, err := w.svc(0).Get(ctx, pmix.Proc{Nspace: "job", Rank: 0}, pmix.Proc{Nspace: "job", Rank: rank}, key, info)
		if err == nil && !v.Equal(pmix.Uint32(uint32(rank))) {
			err = errors.New("wrong value " + v.String())
		}
		got <- err
	}()
	return got
}

// result waits for a getLater's outcome, failing the test after a
// minute.
func result(t *testing.T, got <-chan error) error {
	t.Helper()
	select {
	case err := <-got:
		return err
	case <-time.After(time.Minute):
		t.Fatal("the get never returned")
	}
	return nil
}

// TestGetWaitsForCommit: a get of a key not committed yet, with no
// directive, waits until the proc commits it: a proc of the same agent
// and of another agent, one that commits nothing before (no agent answers
// for it yet) and one whose other keys are there already.
func TestGetWaitsForCommit(t *testing.T) {
	w := newWorld(t, []string{"n1", "n1", "n2", "n2"}, nil)
	commit := func(r pmix.Rank, key string) {
		t.Helper()
		if err := w.svc(r).Commit(pmix.Proc{Nspace: "job", Rank: r}, []proto.Put{{Scope: pmix.ScopeGlobal, Key: key, Value: pmix.Uint32(uint32(r))}}); err != nil {
			t.Fatal(err)
		}
	}
	commit(3, "other")
	for _, r := range []pmix.Rank{1, 2, 3} {
		got := w.getLater(t.Context(), r, "k", nil)
		select {
		case err := <-got:
			t.Fatalf("get of rank %d's k before its commit returned %v", r, err)
		default:
		}
		commit(r, "k")
		if err := result(t, got); err != nil {
			t.Errorf("get of rank %d's k, waiting for its commit: %v", r, err)
		}
	}
}

// TestGetEndsWhenPeerEnds: a get waiting for a key ends with
// ErrPeerTerminated (PMIX_ERR_NOT_FOUND) when the proc terminates, on the
// same agent or another, or is lost with its node; and with ctx.
func TestGetEndsWhenPeerEnds(t *testing.T) {
	w := newWorld(t, []string{"n1", "n1", "n2", "n2", "n3"}, nil)
	for _, tc := range []struct {
		name string
		rank pmix.Rank
		end  func() error
	}{
		{"same agent", 1, func() error { return w.svc(1).ProcTerminated(t.Context(), pmix.Proc{Nspace: "job", Rank: 1}, false) }},
		{"another agent", 2, func() error { return w.svc(2).ProcTerminated(t.Context(), pmix.Proc{Nspace: "job", Rank: 2}, true) }},
		{"lost with its node", 4, func() error {
			for _, n := range []string{"n1", "n2"} {
				if err := w.svcs[n].NodeDown(t.Context(), "n3 expired", []pmix.Proc{{Nspace: "job", Rank: 4}}); err != nil {
					return err
				}
			}
			return nil
		}},
	} {
		got := w.getLater(t.Context(), tc.rank, "k", nil)
		if err := tc.end(); err != nil {
			t.Fatal(err)
		}
		if err := result(t, got); !errors.Is(err, ErrPeerTerminated) || !errors.Is(err, pmix.ErrNotFound) {
			t.Errorf("%s: get of a key of a proc that ended: %v, want PMIX_ERR_NOT_FOUND (ErrPeerTerminated)", tc.name, err)
		}
		// And at once afterwards.
		if err := result(t, w.getLater(t.Context(), tc.rank, "k", nil)); !errors.Is(err, ErrPeerTerminated) {
			t.Errorf("%s: get after the proc ended: %v, want ErrPeerTerminated", tc.name, err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	got := w.getLater(ctx, 3, "k", nil)
	cancel()
	if err := result(t, got); !errors.Is(err, context.Canceled) {
		t.Errorf("get whose context ended: %v, want context.Canceled", err)
	}
	got = w.getLater(t.Context(), 3, "k", nil)
	if err := w.svc(0).Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := result(t, got); !errors.Is(err, ErrClosed) {
		t.Errorf("get waiting while the service closes: %v, want ErrClosed", err)
	}
}

// TestGetEndsWithJob: a get waiting for a key of a proc whose job is
// deregistered ends with ErrPeerTerminated, on the proc's agent and on
// another.
func TestGetEndsWithJob(t *testing.T) {
	var table atomic.Pointer[map[pmix.Rank]string]
	ranks := map[pmix.Rank]string{0: "n1", 1: "n1", 2: "n2"}
	table.Store(&ranks)
	w := newWorld(t, []string{"n1", "n1", "n2"}, func(c *Config) {
		c.Jobs = func(ns string) map[pmix.Rank]string {
			if m := table.Load(); ns == "job" && m != nil {
				return *m
			}
			return nil
		}
	})
	same, other := w.getLater(t.Context(), 1, "k", nil), w.getLater(t.Context(), 2, "k", nil)
	table.Store(nil)
	for _, n := range []string{"n1", "n2"} {
		if err := w.svcs[n].JobChanged(t.Context(), "job"); err != nil {
			t.Fatal(err)
		}
	}
	for name, got := range map[string]<-chan error{"same agent": same, "another agent": other} {
		if err := result(t, got); !errors.Is(err, ErrPeerTerminated) {
			t.Errorf("%s: get waiting while the job is deregistered: %v, want ErrPeerTerminated", name, err)
		}
	}
}
