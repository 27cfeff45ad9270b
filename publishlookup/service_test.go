package publishlookup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
)

// env is two clusters, A and B, each with its own bucket, sharing a global
// one, and a Service per cluster. The same tests run in memory (MemKV) and
// on real servers: two clusters linked to a hub.
type env struct {
	svc map[cluster.ID]*Service
}

func environments() map[string]func(t *testing.T) *env {
	return map[string]func(t *testing.T) *env{
		"mem": func(t *testing.T) *env {
			global := jetstream.NewMemKV("global")
			e := &env{svc: map[cluster.ID]*Service{}}
			for _, c := range []cluster.ID{"A", "B"} {
				e.svc[c] = newService(t, c, jetstream.NewMemKV(string(c)), global)
			}
			return e
		},
		"nats": func(t *testing.T) *env {
			mc := clustertest.StartMultiCluster(t, cluster.ClusterSpec{ID: "A", Servers: 1}, cluster.ClusterSpec{ID: "B", Servers: 1})
			e := &env{svc: map[cluster.ID]*Service{}}
			for _, c := range []cluster.ID{"A", "B"} {
				url := mc.Cluster(c).URL()
				local := natsKV(t, url, string(c))
				global := natsKV(t, url, mc.HubDomain())
				e.svc[c] = newService(t, c, local, global)
			}
			return e
		},
	}
}

func natsKV(t *testing.T, url, domain string) *jetstream.NATSKV {
	t.Helper()
	kv, err := jetstream.NewKV(jetstream.KVConfig{Conn: clustertest.Connect(t, url), Domain: domain, Bucket: DefaultBucket})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	return kv
}

func newService(t *testing.T, c cluster.ID, local, global jetstream.KV) *Service {
	t.Helper()
	s, err := New(Config{Cluster: c, Local: local, Global: global, Retry: 20 * time.Millisecond, Logger: clustertest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return s
}

// forEach runs f against every environment.
func forEach(t *testing.T, f func(t *testing.T, e *env)) {
	for name, start := range environments() {
		t.Run(name, func(t *testing.T) { f(t, start(t)) })
	}
}

// who returns the identity of cluster:nspace.rank on node, in session,
// running as this test's user.
func who(c cluster.ID, node, session, nspace string, rank pmix.Rank) Identity {
	return Identity{Cluster: c, Node: node, Session: session, Proc: pmix.Proc{Nspace: nspace, Rank: rank}, UID: os.Getuid(), GID: os.Getgid()}
}

var (
	a0  = who("A", "n1", "s1", "jobA", 0)
	a1  = who("A", "n2", "s1", "jobA", 1)
	a2  = who("A", "n1", "s1", "jobA2", 0) // same node and session as a0, another job
	a3  = who("A", "n3", "s2", "jobA3", 0) // another session
	b0  = who("B", "n1", "s1", "jobB", 0)  // same node and session names as a0, another cluster
	bA0 = who("B", "n1", "s1", "jobA", 0)  // an nspace named like A's, in B
)

func data(kv ...any) []pmix.Info {
	var out []pmix.Info
	for i := 0; i < len(kv); i += 2 {
		var v pmix.Value
		switch x := kv[i+1].(type) {
		case string:
			v = pmix.String(x)
		case pmix.Range:
			v = pmix.RangeValue(x)
		case pmix.Persistence:
			v = pmix.PersistValue(x)
		case int:
			v = pmix.Int32(int32(x))
		case bool:
			v = pmix.Bool(x)
		case pmix.Value:
			v = x
		case []pmix.Proc:
			v = pmix.Procs(x)
		case []pmix.Info:
			v = pmix.Infos(x)
		default:
			panic(fmt.Sprintf("data: %T", x))
		}
		out = append(out, pmix.NewInfo(kv[i].(string), v))
	}
	return out
}

func (e *env) publish(t *testing.T, p Identity, infos ...any) {
	t.Helper()
	if err := e.svc[p.Cluster].Publish(t.Context(), p, data(infos...)); err != nil {
		t.Fatalf("%v publish: %v", p.Proc, err)
	}
}

func (e *env) lookup(t *testing.T, q Identity, keys []string, directives ...any) ([]Datum, error) {
	t.Helper()
	return e.svc[q.Cluster].Lookup(t.Context(), q, keys, data(directives...))
}

// gone waits until a lookup of key by q is PMIX_ERR_NOT_FOUND: q's
// service mirrors the key, and sees a removal made by another service
// when its follow delivers it.
func (e *env) gone(t *testing.T, q Identity, key string) {
	t.Helper()
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if _, err := e.lookup(t, q, []string{key}); !errors.Is(err, pmix.ErrNotFound) {
			return fmt.Errorf("%s by %v: %v, want not found", key, q.Proc, err)
		}
		return nil
	})
}

// expectValue looks key up as q and wants want from publisher from.
func (e *env) expectValue(t *testing.T, q Identity, key, want string, from pmix.Proc, directives ...any) {
	t.Helper()
	got, err := e.lookup(t, q, []string{key}, directives...)
	if err != nil {
		t.Fatalf("%v lookup %s: %v", q.Proc, key, err)
	}
	if s, _ := got[0].Value.Str(); len(got) != 1 || s != want || got[0].Key != key || got[0].Proc != from {
		t.Fatalf("%v lookup %s: %+v, want %q from %v", q.Proc, key, got, want, from)
	}
}

func TestPublishLookup(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		e.publish(t, a0, "port", "tcp://a0:1", "pmix.other.key", "x")
		e.expectValue(t, a1, "port", "tcp://a0:1", a0.Proc)
		e.expectValue(t, a0, "pmix.other.key", "x", a0.Proc)

		// The same key in the same scope is taken, by anyone.
		for _, p := range []Identity{a0, a1, a2} {
			err := e.svc["A"].Publish(t.Context(), p, data("port", "again"))
			if !errors.Is(err, pmix.ErrDuplicateKey) || !errors.Is(err, ErrDuplicate) {
				t.Fatalf("%v duplicate: %v", p.Proc, err)
			}
		}
		// Other scopes are free: another session, another range, another
		// cluster's session of the same name.
		e.publish(t, a3, "port", "tcp://a3:1")
		e.publish(t, a0, "port", "tcp://a0:2", pmix.KeyRange, pmix.RangeNamespace)
		e.publish(t, b0, "port", "tcp://b0:1")
		// The narrowest scope wins.
		e.expectValue(t, a1, "port", "tcp://a0:2", a0.Proc)
		e.expectValue(t, a2, "port", "tcp://a0:1", a0.Proc)
		e.expectValue(t, a3, "port", "tcp://a3:1", a3.Proc)
		e.expectValue(t, b0, "port", "tcp://b0:1", b0.Proc)

		// A failed publish leaves nothing behind.
		err := e.svc["A"].Publish(t.Context(), a1, data("fresh", "1", "port", "taken", pmix.KeyRange, pmix.RangeNamespace))
		if !errors.Is(err, pmix.ErrDuplicateKey) {
			t.Fatalf("partly duplicate publish: %v", err)
		}
		if _, err := e.lookup(t, a1, []string{"fresh"}); !errors.Is(err, pmix.ErrNotFound) {
			t.Fatalf("a failed publish left its first key: %v", err)
		}
	})
}

// TestRanges: a lookup sees a value only if the publisher is in the
// requester's range and the requester in the publisher's.
func TestRanges(t *testing.T) {
	tests := []struct {
		name      string
		pub       Identity
		pubRange  pmix.Range
		pubCustom []pmix.Proc
		q         Identity
		qRange    pmix.Range // 0: none given
		qCustom   []pmix.Proc
		visible   bool
	}{
		{name: "namespace: same nspace", pub: a0, pubRange: pmix.RangeNamespace, q: a1, visible: true},
		{name: "namespace: other nspace", pub: a0, pubRange: pmix.RangeNamespace, q: a2},
		{name: "namespace: same name in another cluster", pub: a0, pubRange: pmix.RangeNamespace, q: bA0},
		{name: "local: same node", pub: a0, pubRange: pmix.RangeLocal, q: a2, visible: true},
		{name: "local: other node", pub: a0, pubRange: pmix.RangeLocal, q: a1},
		{name: "local: same node name in another cluster", pub: a0, pubRange: pmix.RangeLocal, q: b0},
		{name: "session: same session", pub: a0, pubRange: pmix.RangeSession, q: a2, visible: true},
		{name: "session: other session", pub: a0, pubRange: pmix.RangeSession, q: a3},
		{name: "session: same name in another cluster", pub: a0, pubRange: pmix.RangeSession, q: b0},
		{name: "global: another cluster", pub: a0, pubRange: pmix.RangeGlobal, q: b0, visible: true},
		{name: "global: requester's range global", pub: a0, pubRange: pmix.RangeGlobal, q: b0, qRange: pmix.RangeGlobal, visible: true},
		{name: "global: publisher outside the requester's namespace", pub: a0, pubRange: pmix.RangeGlobal, q: a2, qRange: pmix.RangeNamespace},
		{name: "global: publisher inside the requester's namespace", pub: a0, pubRange: pmix.RangeGlobal, q: a1, qRange: pmix.RangeNamespace, visible: true},
		{name: "global: publisher outside the requester's session", pub: a0, pubRange: pmix.RangeGlobal, q: b0, qRange: pmix.RangeSession},
		{name: "global: publisher on the requester's node", pub: a0, pubRange: pmix.RangeGlobal, q: a2, qRange: pmix.RangeLocal, visible: true},
		{name: "session: requester asks for its namespace only", pub: a0, pubRange: pmix.RangeSession, q: a2, qRange: pmix.RangeNamespace},
		{name: "custom: listed", pub: a0, pubRange: pmix.RangeCustom, pubCustom: []pmix.Proc{a2.Proc}, q: a2, visible: true},
		{name: "custom: listed by wildcard", pub: a0, pubRange: pmix.RangeCustom, pubCustom: []pmix.Proc{{Nspace: "jobA2", Rank: pmix.RankWildcard}}, q: a2, visible: true},
		{name: "custom: not listed", pub: a0, pubRange: pmix.RangeCustom, pubCustom: []pmix.Proc{a2.Proc}, q: a1},
		{name: "custom: listed in another cluster", pub: a0, pubRange: pmix.RangeCustom, pubCustom: []pmix.Proc{{Nspace: "B:jobB", Rank: 0}}, q: b0, visible: true},
		{name: "custom: unqualified means the publisher's cluster", pub: a0, pubRange: pmix.RangeCustom, pubCustom: []pmix.Proc{{Nspace: "jobA", Rank: 0}}, q: bA0},
		{name: "requester's custom list names the publisher", pub: a0, pubRange: pmix.RangeGlobal, q: b0, qRange: pmix.RangeCustom, qCustom: []pmix.Proc{{Nspace: "A:jobA", Rank: pmix.RankWildcard}}, visible: true},
		{name: "requester's custom list does not", pub: a0, pubRange: pmix.RangeGlobal, q: b0, qRange: pmix.RangeCustom, qCustom: []pmix.Proc{{Nspace: "A:jobA2", Rank: 0}}},
	}
	forEach(t, func(t *testing.T, e *env) {
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				key := fmt.Sprintf("k%d", i)
				infos := []any{key, "v", pmix.KeyRange, tt.pubRange}
				if tt.pubCustom != nil {
					infos = append(infos, KeyCustomRange, tt.pubCustom)
				}
				e.publish(t, tt.pub, infos...)
				var dirs []any
				if tt.qRange != 0 {
					dirs = append(dirs, pmix.KeyRange, tt.qRange)
				}
				if tt.qCustom != nil {
					dirs = append(dirs, KeyCustomRange, tt.qCustom)
				}
				got, err := e.lookup(t, tt.q, []string{key}, dirs...)
				if !tt.visible {
					if !errors.Is(err, pmix.ErrNotFound) {
						t.Fatalf("want PMIX_ERR_NOT_FOUND, got %+v %v", got, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				want := tt.pub.Proc
				if tt.pub.Cluster != tt.q.Cluster {
					want.Nspace = string(tt.pub.Cluster) + ":" + want.Nspace
				}
				if got[0].Proc != want || got[0].Range != tt.pubRange {
					t.Fatalf("got %+v, want from %v", got[0], want)
				}
			})
		}
	})
}

func TestLookupStatuses(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		e.publish(t, a0, "one", "1", "two", "2")
		if _, err := e.lookup(t, a1, []string{"none"}); !errors.Is(err, pmix.ErrNotFound) || !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing: %v", err)
		}
		got, err := e.lookup(t, a1, []string{"one", "none", "two"})
		if !errors.Is(err, pmix.ErrPartialSuccess) || len(got) != 2 || got[0].Key != "one" || got[1].Key != "two" {
			t.Fatalf("partial: %+v %v", got, err)
		}
		if !strings.Contains(err.Error(), `not found: "none"`) {
			t.Errorf("partial: %q does not name the key not found", err)
		}

		other := who("A", "n1", "s1", "jobA", 5)
		other.UID = a0.UID + 1
		// No access list: only the publisher's user and group.
		if _, err := e.lookup(t, other, []string{"one"}); !errors.Is(err, pmix.ErrNoPermissions) {
			t.Fatalf("another user: %v", err)
		}
		// Lists admit users and groups; a list is a requirement, for the
		// publisher too.
		e.publish(t, a0, "shared", "s", pmix.KeyAccessPermissions, data(pmix.KeyAccessUserIDs, fmt.Sprintf("%d, 7", other.UID)))
		e.expectValue(t, other, "shared", "s", a0.Proc)
		if _, err := e.lookup(t, a1, []string{"shared"}); !errors.Is(err, pmix.ErrNoPermissions) {
			t.Fatalf("user not listed: %v", err)
		}
		e.publish(t, a0, "group", "g", pmix.KeyAccessGroupIDs, fmt.Sprint(other.GID))
		e.expectValue(t, other, "group", "g", a0.Proc)
		// A readable key beside a denied one: partial.
		got, err = e.lookup(t, a1, []string{"shared", "one"})
		if !errors.Is(err, pmix.ErrPartialSuccess) || len(got) != 1 || got[0].Key != "one" {
			t.Fatalf("denied and readable: %+v %v", got, err)
		}
	})
}

func TestBadRequests(t *testing.T) {
	s := newService(t, "A", jetstream.NewMemKV("l"), jetstream.NewMemKV("g"))
	ctx := t.Context()
	for name, infos := range map[string][]pmix.Info{
		"no data":             data(pmix.KeyRange, pmix.RangeGlobal),
		"empty key":           data("", "x"),
		"RM range":            data("k", "v", pmix.KeyRange, pmix.RangeRM),
		"custom without list": data("k", "v", pmix.KeyRange, pmix.RangeCustom),
		"list without custom": data("k", "v", KeyCustomRange, []pmix.Proc{a0.Proc}),
		"bad persistence":     data("k", "v", pmix.KeyPersistence, pmix.Value(pmix.PersistValue(9))),
		"unknown permission":  data("k", "v", pmix.KeyAccessPermissions, data("pmix.other", "x")),
		"bad uid list":        data("k", "v", pmix.KeyAccessUserIDs, "1,x"),
		"key twice":           data("k", "v", "k", "w"),
	} {
		if err := s.Publish(ctx, a0, infos); err == nil {
			t.Errorf("publish %s: accepted", name)
		}
	}
	if _, err := s.Lookup(ctx, a0, nil, nil); !errors.Is(err, pmix.ErrBadParam) {
		t.Errorf("lookup of no keys: %v", err)
	}
	if _, err := s.Lookup(ctx, a0, []string{"k"}, data(pmix.KeyWait, "x")); !errors.Is(err, pmix.ErrBadParam) {
		t.Errorf("lookup with a bad wait: %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(ctx, a0, data("k", "v")); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// TestCreateRace: 100 goroutines publish the same key in the same scope;
// exactly one wins, the others get PMIX_ERR_DUPLICATE_KEY.
func TestCreateRace(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		var wins, dups atomic.Int32
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Go(func() {
				p := who("A", "n1", "s1", "jobA", pmix.Rank(i))
				err := e.svc["A"].Publish(context.Background(), p, data("race", fmt.Sprint(i), pmix.KeyRange, pmix.RangeGlobal))
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, pmix.ErrDuplicateKey):
					dups.Add(1)
				default:
					t.Errorf("publish %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 || dups.Load() != 99 {
			t.Fatalf("%d winners, %d duplicates", wins.Load(), dups.Load())
		}
	})
}

// TestFirstRead: of concurrent lookups of a FIRST_READ value exactly one
// gets it; it is gone afterwards.
func TestFirstRead(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		for round := range 3 {
			key := fmt.Sprintf("once%d", round)
			e.publish(t, a0, key, "v", pmix.KeyPersistence, pmix.PersistFirstRead, pmix.KeyRange, pmix.RangeGlobal)
			var got, missed atomic.Int32
			var wg sync.WaitGroup
			for _, q := range []Identity{a1, a2, a3, b0, a0, a1, b0, a2} {
				wg.Go(func() {
					d, err := e.svc[q.Cluster].Lookup(context.Background(), q, []string{key}, nil)
					switch {
					case err == nil && len(d) == 1:
						got.Add(1)
					case errors.Is(err, pmix.ErrNotFound):
						missed.Add(1)
					default:
						t.Errorf("lookup: %+v %v", d, err)
					}
				})
			}
			wg.Wait()
			if got.Load() != 1 || missed.Load() != 7 {
				t.Fatalf("round %d: %d got it, %d missed", round, got.Load(), missed.Load())
			}
		}
	})
}

// TestWait: PMIX_WAIT wakes as soon as the keys are published, from another
// cluster too; PMIX_TIMEOUT ends it with PMIX_ERR_TIMEOUT and what was
// found.
func TestWait(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		type result struct {
			d   []Datum
			err error
		}
		start := func(q Identity, keys []string, directives ...any) chan result {
			ch := make(chan result, 1)
			go func() {
				d, err := e.svc[q.Cluster].Lookup(context.Background(), q, keys, data(directives...))
				ch <- result{d, err}
			}()
			return ch
		}
		wait := func(ch chan result) result {
			t.Helper()
			select {
			case r := <-ch:
				return r
			case <-time.After(20 * time.Second):
				t.Fatal("lookup never returned")
			}
			return result{}
		}

		// All of two keys, one already there, one published later from B.
		e.publish(t, a1, "first", "1", pmix.KeyRange, pmix.RangeGlobal)
		ch := start(a0, []string{"first", "second"}, pmix.KeyWait, 0, pmix.KeyTimeout, 20)
		e.publish(t, b0, "second", "2", pmix.KeyRange, pmix.RangeGlobal)
		if r := wait(ch); r.err != nil || len(r.d) != 2 || r.d[1].Proc.Nspace != "B:jobB" {
			t.Fatalf("wait for all: %+v %v", r.d, r.err)
		}

		// One of two: partial success as soon as one is there.
		ch = start(b0, []string{"x1", "x2"}, pmix.KeyWait, 1)
		e.publish(t, a0, "x2", "2", pmix.KeyRange, pmix.RangeGlobal)
		if r := wait(ch); !errors.Is(r.err, pmix.ErrPartialSuccess) || len(r.d) != 1 || r.d[0].Key != "x2" {
			t.Fatalf("wait for one: %+v %v", r.d, r.err)
		}

		// A value out of range does not wake the waiter; one in range does.
		ch = start(a1, []string{"ns"}, pmix.KeyWait, true, pmix.KeyTimeout, 20)
		e.publish(t, a3, "ns", "other job", pmix.KeyRange, pmix.RangeNamespace)
		e.publish(t, a0, "ns", "my job", pmix.KeyRange, pmix.RangeNamespace)
		if r := wait(ch); r.err != nil || len(r.d) != 1 || r.d[0].Proc != a0.Proc {
			t.Fatalf("wait in range: %+v %v", r.d, r.err)
		}

		// Timeout, with what was found; two waiters for a FIRST_READ value,
		// of which one gets it and the other times out (in parallel).
		began := time.Now()
		timeout := start(a0, []string{"first", "never"}, pmix.KeyWait, 0, pmix.KeyTimeout, 1)
		ch1 := start(a1, []string{"token"}, pmix.KeyWait, 0, pmix.KeyTimeout, 1)
		ch2 := start(b0, []string{"token"}, pmix.KeyWait, 0, pmix.KeyTimeout, 1)
		e.publish(t, a2, "token", "t", pmix.KeyRange, pmix.RangeGlobal, pmix.KeyPersistence, pmix.PersistFirstRead)
		r := wait(timeout)
		if !errors.Is(r.err, pmix.ErrTimeout) || len(r.d) != 1 || time.Since(began) < time.Second {
			t.Fatalf("timeout: %+v %v after %v", r.d, r.err, time.Since(began))
		}
		r1, r2 := wait(ch1), wait(ch2)
		if (r1.err == nil) == (r2.err == nil) {
			t.Fatalf("FIRST_READ waiters: %v and %v", r1.err, r2.err)
		}
		for _, r := range []result{r1, r2} {
			if r.err != nil && !errors.Is(r.err, pmix.ErrTimeout) {
				t.Fatalf("the loser: %v", r.err)
			}
		}
	})
}

func TestUnpublish(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		e.publish(t, a0, "k1", "1", "k2", "2")
		e.publish(t, a0, "k1", "ns", pmix.KeyRange, pmix.RangeNamespace)
		e.publish(t, a0, "g", "g", pmix.KeyRange, pmix.RangeGlobal)
		s := e.svc["A"]
		if err := s.Unpublish(ctx, a1, []string{"k1"}, nil); !errors.Is(err, pmix.ErrNoPermissions) {
			t.Fatalf("unpublish by another proc: %v", err)
		}
		if err := s.Unpublish(ctx, a0, []string{"nothing"}, nil); !errors.Is(err, pmix.ErrNotFound) {
			t.Fatalf("unpublish of nothing: %v", err)
		}
		// A range picks one scope.
		if err := s.Unpublish(ctx, a0, []string{"k1"}, data(pmix.KeyRange, pmix.RangeNamespace)); err != nil {
			t.Fatal(err)
		}
		e.expectValue(t, a1, "k1", "1", a0.Proc)
		if err := s.Unpublish(ctx, a0, []string{"k1", "nothing"}, nil); !errors.Is(err, pmix.ErrPartialSuccess) {
			t.Fatalf("partial unpublish: %v", err)
		}
		if _, err := e.lookup(t, a1, []string{"k1"}); !errors.Is(err, pmix.ErrNotFound) {
			t.Fatalf("k1 after unpublish: %v", err)
		}
		// No keys: everything, within the range given.
		if err := s.Unpublish(ctx, a0, nil, data(pmix.KeyRange, pmix.RangeSession)); err != nil {
			t.Fatal(err)
		}
		if _, err := e.lookup(t, a1, []string{"k2"}); !errors.Is(err, pmix.ErrNotFound) {
			t.Fatalf("k2 after unpublish all: %v", err)
		}
		e.expectValue(t, b0, "g", "g", pmix.Proc{Nspace: "A:jobA", Rank: 0})
		if err := s.Unpublish(ctx, a0, nil, nil); err != nil {
			t.Fatal(err)
		}
		e.gone(t, b0, "g") // another agent's mirror: within its delivery time
		// The key is free again.
		e.publish(t, a1, "g", "mine now", pmix.KeyRange, pmix.RangeGlobal)
	})
}

func TestPersistence(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		s := e.svc["A"]
		g := func(p pmix.Persistence) []any {
			return []any{pmix.KeyPersistence, p, pmix.KeyRange, pmix.RangeGlobal}
		}
		e.publish(t, a0, append([]any{"proc", "p"}, g(pmix.PersistProc)...)...)
		e.publish(t, a0, append([]any{"app", "a"}, g(pmix.PersistApp)...)...)
		e.publish(t, a0, append([]any{"session", "s"}, g(pmix.PersistSession)...)...)
		e.publish(t, a0, append([]any{"indef", "i"}, g(pmix.PersistIndef)...)...)
		e.publish(t, a1, "default", "d", pmix.KeyRange, pmix.RangeGlobal) // APP
		present := func(key string, want bool) {
			t.Helper()
			if !want {
				e.gone(t, b0, key) // another agent's mirror: within its delivery time
				return
			}
			_, err := e.lookup(t, b0, []string{key})
			if got := err == nil; got != want {
				t.Fatalf("%s present: %v (%v), want %v", key, got, err, want)
			}
		}
		if err := s.ProcEnded(ctx, a0.Proc); err != nil {
			t.Fatal(err)
		}
		present("proc", false)
		present("app", true)
		if err := s.JobEnded(ctx, "jobA"); err != nil {
			t.Fatal(err)
		}
		present("app", false)
		present("default", false)
		present("session", true)
		if err := s.SessionsEnded(ctx, map[string]bool{"s1": true}); err != nil {
			t.Fatal(err)
		}
		present("session", true)
		if err := s.SessionsEnded(ctx, map[string]bool{}); err != nil {
			t.Fatal(err)
		}
		present("session", false)
		present("indef", true)

		// A key published again by someone else survives the end of the
		// first publisher.
		e.publish(t, a2, append([]any{"reused", "first"}, g(pmix.PersistProc)...)...)
		if err := s.Unpublish(ctx, a2, []string{"reused"}, nil); err != nil {
			t.Fatal(err)
		}
		e.publish(t, b0, append([]any{"reused", "second"}, g(pmix.PersistIndef)...)...)
		if err := s.ProcEnded(ctx, a2.Proc); err != nil {
			t.Fatal(err)
		}
		present("reused", true)
	})
}

// TestGlobalUnreachable: with the global bucket cut off, the cluster's own
// scopes keep working, a GLOBAL lookup fails (PMIX_ERR_UNREACH at once, or
// PMIX_ERR_TIMEOUT with a timeout), and a waiting lookup is served once the
// bucket is back.
func TestGlobalUnreachable(t *testing.T) {
	global := jetstream.NewMemKV("global")
	s := newService(t, "A", jetstream.NewMemKV("A"), global)
	ctx := t.Context()
	if err := s.Publish(ctx, a0, data("g", "1", pmix.KeyRange, pmix.RangeGlobal)); err != nil {
		t.Fatal(err)
	}
	global.SetUnreachable(true)
	if err := s.Publish(ctx, a0, data("local", "1", pmix.KeyRange, pmix.RangeNamespace)); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Lookup(ctx, a1, []string{"local"}, nil); err != nil || len(d) != 1 {
		t.Fatalf("local lookup: %+v %v", d, err)
	}
	if err := s.Publish(ctx, a0, data("g2", "1", pmix.KeyRange, pmix.RangeGlobal)); !errors.Is(err, pmix.ErrUnreach) {
		t.Fatalf("global publish: %v", err)
	}
	if _, err := s.Lookup(ctx, a1, []string{"g"}, nil); !errors.Is(err, pmix.ErrUnreach) {
		t.Fatalf("global lookup: %v", err)
	}
	if _, err := s.Lookup(ctx, a1, []string{"g"}, data(pmix.KeyTimeout, 1)); !errors.Is(err, pmix.ErrTimeout) {
		t.Fatalf("global lookup with a timeout: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Lookup(ctx, a1, []string{"g"}, data(pmix.KeyWait, 0, pmix.KeyTimeout, 20))
		done <- err
	}()
	global.SetUnreachable(false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("waiting lookup after recovery: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("waiting lookup never served")
	}
}

func TestKeyList(t *testing.T) {
	for _, tt := range []struct {
		keys []string
		want string
	}{
		{[]string{"a"}, `"a"`},
		{[]string{"a", "b c"}, `"a", "b c"`},
		{[]string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}, `"1", "2", "3", "4", "5", "6", "7", "8" and 2 more`},
	} {
		if got := keyList(tt.keys); got != tt.want {
			t.Errorf("keyList(%q) = %s, want %s", tt.keys, got, tt.want)
		}
	}
}
