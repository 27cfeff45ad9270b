package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
)

// kvImpls returns the implementations every behaviour test runs against:
// the in-memory one and a bucket on a real server.
func kvImpls(t *testing.T) map[string]func(t *testing.T) KV {
	return map[string]func(t *testing.T) KV{
		"mem": func(t *testing.T) KV { return NewMemKV("mem") },
		"nats": func(t *testing.T) KV {
			kv, _ := openNATSKV(t)
			return kv
		},
	}
}

// openNATSKV opens a bucket on a server of its own, and returns it with
// its connection.
func openNATSKV(t *testing.T) (*NATSKV, *nats.Conn) {
	t.Helper()
	s := clustertest.StartServer(t, "A")
	nc := clustertest.Connect(t, s.ClientURL())
	kv, err := NewKV(KVConfig{Conn: nc, Domain: "A", Bucket: "TEST"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	return kv, nc
}

func TestKV(t *testing.T) {
	for name, open := range kvImpls(t) {
		t.Run(name, func(t *testing.T) {
			kv := open(t)
			ctx := t.Context()

			rev, err := kv.Create(ctx, "a.b", []byte("1"))
			if err != nil || rev == 0 {
				t.Fatalf("create: %d %v", rev, err)
			}
			if _, err := kv.Create(ctx, "a.b", []byte("2")); !errors.Is(err, ErrKeyExists) || !errors.Is(err, pmix.ErrDuplicateKey) {
				t.Fatalf("second create: %v", err)
			}
			got, err := kv.GetMany(ctx, []string{"a.b", "missing", "a=2Eb"})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || string(got["a.b"].Value) != "1" || got["a.b"].Revision != rev {
				t.Fatalf("get many: %+v", got)
			}
			if err := kv.Delete(ctx, "a.b", rev+100); !errors.Is(err, ErrRevisionMismatch) {
				t.Fatalf("delete with the wrong revision: %v", err)
			}
			if err := kv.Delete(ctx, "a.b", rev); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if err := kv.Delete(ctx, "a.b", rev); !errors.Is(err, ErrRevisionMismatch) {
				t.Fatalf("second delete: %v", err)
			}
			got, err = kv.GetMany(ctx, []string{"a.b"})
			if err != nil || len(got) != 0 {
				t.Fatalf("deleted key still there: %+v %v", got, err)
			}
			if _, err := kv.Create(ctx, "a.b", []byte("3")); err != nil {
				t.Fatalf("create after delete: %v", err)
			}
			if _, err := kv.GetMany(ctx, []string{"bad key"}); !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("invalid key: %v", err)
			}
			// Refused before it reaches the server, which would drop the
			// connection for a subject over its protocol line.
			long := strings.Repeat("k", MaxKeyLen+1)
			if _, err := kv.Create(ctx, long, nil); !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), "key too long") || len(err.Error()) > 300 {
				t.Fatalf("long key: %v", err)
			}
			if _, err := kv.Create(ctx, strings.Repeat("k", MaxKeyLen), nil); err != nil {
				t.Fatalf("longest key: %v", err)
			}
			if got, err := kv.GetMany(ctx, nil); err != nil || len(got) != 0 {
				t.Fatalf("no keys: %v %v", got, err)
			}
		})
	}
}

// TestKVCreateRace: of many concurrent creators of one key exactly one
// wins, on a fresh key and on a deleted one.
func TestKVCreateRace(t *testing.T) {
	for name, open := range kvImpls(t) {
		t.Run(name, func(t *testing.T) {
			kv := open(t)
			for round, key := range []string{"race", "race"} {
				var wins atomic.Int32
				var wg sync.WaitGroup
				errs := make(chan error, 50)
				for i := range 50 {
					wg.Go(func() {
						_, err := kv.Create(t.Context(), key, fmt.Appendf(nil, "%d", i))
						switch {
						case err == nil:
							wins.Add(1)
						case !errors.Is(err, ErrKeyExists):
							errs <- err
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Errorf("round %d: %v", round, err)
				}
				if n := wins.Load(); n != 1 {
					t.Fatalf("round %d: %d winners", round, n)
				}
				got, err := kv.GetMany(t.Context(), []string{key})
				if err != nil {
					t.Fatal(err)
				}
				if err := kv.Delete(t.Context(), key, got[key].Revision); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestMemKVUnreachable(t *testing.T) {
	kv := NewMemKV("m")
	changes := make(chan KVChange, 4)
	if _, err := kv.Follow(t.Context(), func(c KVChange) { changes <- c }); err != nil {
		t.Fatal(err)
	}
	nextChange(t, changes, KVCurrent)
	kv.SetUnreachable(true)
	if c := nextChange(t, changes, KVLapsed); !errors.Is(c.Err, ErrUnreachable) {
		t.Fatalf("follow lapsed with %v", c.Err)
	}
	if _, err := kv.GetMany(t.Context(), []string{"k"}); !errors.Is(err, ErrUnreachable) || !errors.Is(err, pmix.ErrUnreach) {
		t.Fatalf("get: %v", err)
	}
	kv.SetUnreachable(false)
	if _, err := kv.Create(t.Context(), "k", nil); err != nil {
		t.Fatal(err)
	}
}

// TestNATSKVAcrossDomains: a bucket in the hub's domain is provisioned and
// used from both clusters; while the hub is down operations fail with
// ErrUnreachable, quickly, and they work again once it is back.
func TestNATSKVAcrossDomains(t *testing.T) {
	mc := clustertest.StartMultiCluster(t, cluster.ClusterSpec{ID: "A", Servers: 1}, cluster.ClusterSpec{ID: "B", Servers: 1})
	open := func(c cluster.ID) *NATSKV {
		nc := clustertest.Connect(t, mc.Cluster(c).URL())
		kv, err := NewKV(KVConfig{Conn: nc, Domain: mc.HubDomain(), Bucket: "GLOBAL", Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kv.Close() })
		return kv
	}
	a, b := open("A"), open("B")
	ctx := t.Context()
	changes := make(chan KVChange, 16)
	f, err := b.Follow(ctx, func(c KVChange) { changes <- c })
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	nextChange(t, changes, KVCurrent)
	rev, err := a.Create(ctx, "g.x", []byte("from A"))
	if err != nil {
		t.Fatal(err)
	}
	if c := nextChange(t, changes, KVPut); c.Entry.Revision != rev || string(c.Entry.Value) != "from A" {
		t.Fatalf("follow in B saw %+v", c)
	}
	got, err := b.GetMany(ctx, []string{"g.x"})
	if err != nil || string(got["g.x"].Value) != "from A" {
		t.Fatalf("get from B: %+v %v", got, err)
	}
	if _, err := b.Create(ctx, "g.x", nil); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("create from B: %v", err)
	}

	if err := mc.ShutdownHub(ctx); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 10*time.Second, func() error {
		start := time.Now()
		_, err := a.GetMany(ctx, []string{"g.x"})
		if !errors.Is(err, ErrUnreachable) {
			return fmt.Errorf("get while the hub is down: %v", err)
		}
		if d := time.Since(start); d > time.Second {
			return fmt.Errorf("get took %v to fail", d)
		}
		return nil
	})
	if _, err := a.Create(ctx, "g.y", nil); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("create while the hub is down: %v", err)
	}
	if err := mc.RestartHub(ctx); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 20*time.Second, func() error {
		got, err := a.GetMany(ctx, []string{"g.x"})
		if err != nil {
			return err
		}
		if string(got["g.x"].Value) != "from A" {
			return fmt.Errorf("after the restart: %+v", got)
		}
		return nil
	})
}

func TestKeyValid(t *testing.T) {
	for key, want := range map[string]bool{
		"a": true, "a.b": true, "g.x=2Ey": true, "a/b-c_d": true,
		"": false, ".a": false, "a.": false, "a..b": false, "a b": false, "a*": false, "a>": false,
	} {
		if got := KeyValid(key); got != want {
			t.Errorf("KeyValid(%q) = %v", key, got)
		}
	}
}

func TestKVConfigValidate(t *testing.T) {
	err := KVConfig{Domain: "a:b", Bucket: "x.y", Replicas: 9, Timeout: -1}.Validate()
	if !errors.Is(err, ErrInvalidKVConfig) {
		t.Fatalf("got %v", err)
	}
	for _, want := range []string{"conn", "domain", "bucket", "replicas", "timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q not named in %v", want, err)
		}
	}
}

func TestPubAckSequence(t *testing.T) {
	for _, tc := range []struct {
		ack  string
		seq  uint64
		isOK bool
	}{
		{`{"stream":"KV_B","domain":"A","seq":42}`, 42, true},
		{`{"stream":"KV_B","seq":7,"duplicate":true}`, 7, true},
		{`{"stream":"KV_error","domain":"error","seq":3}`, 3, true},
		{`{"stream":"KV_B","error":{"code":400,"err_code":10071,"description":"wrong last sequence: 5"}}`, 0, false},
		{`{"error":{"code":503,"description":"no responders"}}`, 0, false},
		{`{"stream":"KV_B","seq":0}`, 0, false},
		{`{"stream":"KV_B","seq":99999999999999999999999}`, 0, false},
		{``, 0, false},
		{`garbage`, 0, false},
	} {
		if seq, ok := pubAckSequence([]byte(tc.ack)); seq != tc.seq || ok != tc.isOK {
			t.Errorf("%s: %d %v, want %d %v", tc.ack, seq, ok, tc.seq, tc.isOK)
		}
	}
}

// nextChange returns the next report of a follow, which must be of kind.
func nextChange(t *testing.T, changes <-chan KVChange, kind KVChangeKind) KVChange {
	t.Helper()
	select {
	case c := <-changes:
		if c.Kind != kind {
			t.Fatalf("report %+v, want kind %d", c, kind)
		}
		return c
	case <-time.After(10 * time.Second):
		t.Fatalf("no report of kind %d", kind)
	}
	return KVChange{}
}

// TestCreateWhileNobodyAnswers: a create that no stream answers (a
// replicated bucket with no leader yet, or electing one) is sent again
// until the stream answers, within the call's time, as nats.go's own
// publishes are; without, a publish right after a cluster of three came
// up failed (bench's TestReplicasSmoke under load: "no response from
// stream").
func TestCreateWhileNobodyAnswers(t *testing.T) {
	kv, nc := openNATSKV(t)
	if _, err := kv.Create(t.Context(), "first", []byte("1")); err != nil {
		t.Fatal(err)
	}
	js, err := natsjs.NewWithDomain(nc, "A")
	if err != nil {
		t.Fatal(err)
	}
	cfg := natsjs.KeyValueConfig{Bucket: "TEST", History: 1}
	if err := js.DeleteKeyValue(t.Context(), "TEST"); err != nil {
		t.Fatal(err)
	}
	// The bucket comes back while the create is asking again.
	back := time.AfterFunc(400*time.Millisecond, func() { _, _ = js.CreateKeyValue(context.Background(), cfg) })
	defer back.Stop()
	if _, err := kv.Create(t.Context(), "second", []byte("2")); err != nil {
		t.Fatalf("create while the bucket came back: %v", err)
	}
}
