package publishlookup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
)

// countingKV counts the reads of a bucket: a lookup the mirror answers
// reads none.
type countingKV struct {
	*jetstream.MemKV
	reads atomic.Int32
}

func (c *countingKV) GetMany(ctx context.Context, keys []string) (map[string]jetstream.KVEntry, error) {
	c.reads.Add(1)
	return c.MemKV.GetMany(ctx, keys)
}

// mirrorEnv is two services of cluster A (two agents) on one bucket.
func mirrorEnv(t *testing.T, scopes int) (kv *countingKV, mine, other *Service) {
	kv = &countingKV{MemKV: jetstream.NewMemKV("A")}
	mk := func() *Service {
		s, err := New(Config{Cluster: "A", Local: kv, Global: kv, Retry: 20 * time.Millisecond, MirrorScopes: scopes, Logger: clustertest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		return s
	}
	return kv, mk(), mk()
}

// waitMirrored looks up (with lookup) until s's mirror holds n scopes,
// all known: a scope is known from a read made once the bucket's follow
// is in place.
func waitMirrored(t *testing.T, s *Service, n int, lookup func()) {
	t.Helper()
	clustertest.WaitFor(t, 10*time.Second, func() error {
		lookup()
		if all, known := s.mirror.size(); all != n || known != n {
			return fmt.Errorf("%d scopes mirrored, %d known; want %d", all, known, n)
		}
		return nil
	})
}

func TestMirror(t *testing.T) {
	ctx := t.Context()
	kv, s, other := mirrorEnv(t, 0)
	if err := other.Publish(ctx, a0, data("k", "v1")); err != nil {
		t.Fatal(err)
	}
	lookup := func() ([]Datum, error) { return s.Lookup(ctx, a1, []string{"k"}, nil) }

	// The first lookup reads the bucket; once its scopes are current,
	// lookups read none.
	if d, err := lookup(); err != nil || d[0].Value.String() != pmix.String("v1").String() {
		t.Fatalf("first lookup: %+v %v", d, err)
	}
	waitMirrored(t, s, 5, func() { _, _ = lookup() }) // LOCAL, NAMESPACE, SESSION, CUSTOM, GLOBAL: one bucket
	before := kv.reads.Load()
	if d, err := lookup(); err != nil || d[0].Value.String() != pmix.String("v1").String() {
		t.Fatalf("mirrored lookup: %+v %v", d, err)
	}
	if kv.reads.Load() != before {
		t.Fatal("a mirrored lookup read the bucket")
	}

	// Unpublished through another agent: gone once the follow delivers it.
	if err := other.Unpublish(ctx, a0, []string{"k"}, nil); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if _, err := lookup(); !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("after unpublish: %v", err)
		}
		return nil
	})

	// Access permissions are decided on the mirrored value as on a read.
	if err := other.Publish(ctx, a0, data("k", "private", pmix.KeyAccessUserIDs, "4000000000")); err != nil {
		t.Fatal(err)
	}
	before = kv.reads.Load() // other's reads
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if _, err := lookup(); !errors.Is(err, ErrNoPermissions) {
			return fmt.Errorf("restricted value: %v", err)
		}
		return nil
	})
	if kv.reads.Load() != before {
		t.Fatal("a mirrored lookup read the bucket")
	}

	// A lapse drops the mirror: no stale answer while the bucket cannot be
	// read, and a direct read again once it can.
	kv.SetUnreachable(true)
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if _, known := s.mirror.size(); known != 0 {
			return fmt.Errorf("%d scopes known after the lapse", known)
		}
		return nil
	})
	if _, err := lookup(); pmix.StatusOf(err) != pmix.ErrUnreach {
		t.Fatalf("lookup of a lapsed mirror with the bucket down: %v", err)
	}
	kv.SetUnreachable(false)
	if _, err := lookup(); !errors.Is(err, ErrNoPermissions) {
		t.Fatalf("lookup once the bucket is back: %v", err)
	}
	waitMirrored(t, s, 5, func() { _, _ = lookup() })
}

// TestMirrorFirstRead: a FIRST_READ value served from the mirror is
// consumed by exactly one lookup, through the conditional delete.
func TestMirrorFirstRead(t *testing.T) {
	ctx := t.Context()
	_, s, other := mirrorEnv(t, 0)
	waitMirrored(t, s, 5, func() {
		if _, err := s.Lookup(ctx, a1, []string{"once"}, nil); !errors.Is(err, ErrNotFound) {
			t.Fatalf("before publish: %v", err)
		}
	})
	if err := other.Publish(ctx, a0, data("once", "x", pmix.KeyPersistence, pmix.PersistFirstRead)); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 10*time.Second, func() error {
		_, err := s.Lookup(ctx, a1, []string{"once"}, nil)
		return err
	})
	for _, svc := range []*Service{s, other} {
		clustertest.WaitFor(t, 10*time.Second, func() error {
			if _, err := svc.Lookup(ctx, a2, []string{"once"}, nil); !errors.Is(err, ErrNotFound) {
				return fmt.Errorf("FIRST_READ value read twice: %v", err)
			}
			return nil
		})
	}
}

// TestMirrorWait: PMIX_WAIT lookups are woken by the mirror's follows,
// which stay for the next lookup.
func TestMirrorWait(t *testing.T) {
	ctx := t.Context()
	kv, s, other := mirrorEnv(t, 0)
	done := make(chan error, 1)
	go func() {
		_, err := s.Lookup(ctx, a1, []string{"late"}, data(pmix.KeyWait, 0, pmix.KeyTimeout, 10))
		done <- err
	}()
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if n := s.Waiting(); n != 1 {
			return fmt.Errorf("%d lookups waiting", n)
		}
		return nil
	})
	if err := other.Publish(ctx, a0, data("late", "v")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	before := kv.reads.Load()
	if _, err := s.Lookup(ctx, a1, []string{"late"}, nil); err != nil {
		t.Fatal(err)
	}
	if kv.reads.Load() != before {
		t.Fatal("the lookup after a wait read the bucket")
	}
}

// TestMirrorBound: the mirror follows at most MirrorScopes scopes.
func TestMirrorBound(t *testing.T) {
	ctx := t.Context()
	kv, s, _ := mirrorEnv(t, 7)
	for i := range 10 {
		if _, err := s.Lookup(ctx, a1, []string{fmt.Sprint("k", i)}, nil); !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		if all, _ := s.mirror.size(); all > 7 {
			t.Fatalf("%d scopes mirrored, bound 7", all)
		}
	}
	// The most recent key's scopes are kept: a lookup of it is answered
	// from the mirror once they are known.
	clustertest.WaitFor(t, 10*time.Second, func() error {
		before := kv.reads.Load()
		_, _ = s.Lookup(ctx, a1, []string{"k9"}, nil)
		if all, _ := s.mirror.size(); all != 7 {
			return fmt.Errorf("%d scopes mirrored, want 7", all)
		}
		if kv.reads.Load() != before {
			return errors.New("k9 read from the bucket")
		}
		return nil
	})
}

// TestMirrorPartial: a multi-key lookup answered from the mirror returns
// what it found and names the keys it did not, as a read does.
func TestMirrorPartial(t *testing.T) {
	ctx := t.Context()
	kv, s, other := mirrorEnv(t, 0)
	if err := other.Publish(ctx, a0, data("here", "v")); err != nil {
		t.Fatal(err)
	}
	keys := []string{"here", "absent"}
	lookup := func() ([]Datum, error) { return s.Lookup(ctx, a1, keys, nil) }
	waitMirrored(t, s, 10, func() { _, _ = lookup() })
	before := kv.reads.Load()
	d, err := lookup()
	if !errors.Is(err, ErrPartial) || len(d) != 1 || d[0].Key != "here" || !strings.Contains(err.Error(), `"absent"`) {
		t.Fatalf("partial lookup from the mirror: %+v %v", d, err)
	}
	if kv.reads.Load() != before {
		t.Fatal("a mirrored lookup read the bucket")
	}
}

// knownIn counts the scopes of kv the mirror would answer from.
func knownIn(s *Service, kv jetstream.KV) int {
	m := s.mirror
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, ms := range m.scopes {
		if b := m.buckets[ms.ref.kv]; ms.ref.kv == kv && ms.known && b.current && ms.gen == b.gen {
			n++
		}
	}
	return n
}

// The agent's probe of the link to the GLOBAL bucket's domain drops that
// bucket's scopes from the mirror at once (GlobalLinkDown), before the
// follow's heartbeats could tell: a GLOBAL lookup reads the bucket, UNREACH
// while the link is cut, and nothing stale is served; the local bucket's
// scopes stay mirrored; the GLOBAL ones come back once the bucket can be
// read.
func TestGlobalLinkDownDropsGlobalMirror(t *testing.T) {
	ctx := t.Context()
	local := &countingKV{MemKV: jetstream.NewMemKV("A")}
	global := &countingKV{MemKV: jetstream.NewMemKV("hub")}
	s, err := New(Config{Cluster: "A", Local: local, Global: global, Retry: 20 * time.Millisecond, Logger: clustertest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	if err := s.Publish(ctx, a0, data("g", "v", pmix.KeyRange, pmix.RangeGlobal)); err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(ctx, a0, data("l", "v", pmix.KeyRange, pmix.RangeNamespace)); err != nil {
		t.Fatal(err)
	}
	lookup := func(key string, rng pmix.Range) error {
		_, err := s.Lookup(ctx, a1, []string{key}, data(pmix.KeyRange, rng))
		return err
	}
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if err := errors.Join(lookup("g", pmix.RangeGlobal), lookup("l", pmix.RangeNamespace)); err != nil {
			return err
		}
		if g, l := knownIn(s, global), knownIn(s, local); g == 0 || l == 0 {
			return fmt.Errorf("mirrored: %d global, %d local scopes", g, l)
		}
		return nil
	})
	locals := knownIn(s, local)

	s.GlobalLinkDown()
	if g, l := knownIn(s, global), knownIn(s, local); g != 0 || l != locals {
		t.Fatalf("after the link went down: %d global scopes still served, %d of %d local", g, l, locals)
	}
	global.SetUnreachable(true) // what the cut link does to reads
	if err := lookup("g", pmix.RangeGlobal); pmix.StatusOf(err) != pmix.ErrUnreach {
		t.Fatalf("GLOBAL lookup across the cut link: %v, want UNREACH", err)
	}
	if err := lookup("l", pmix.RangeNamespace); err != nil {
		t.Fatalf("a NAMESPACE lookup with the link cut: %v", err)
	}
	global.SetUnreachable(false)
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if err := lookup("g", pmix.RangeGlobal); err != nil {
			return err
		}
		if g := knownIn(s, global); g == 0 {
			return errors.New("the GLOBAL scopes are not mirrored again")
		}
		return nil
	})
}
