package jetstream

import (
	"errors"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
)

// TestKVFollow: a follow reports KVCurrent, then every put and deletion
// stored after it, in order; what was stored before is not reported.
func TestKVFollow(t *testing.T) {
	for name, open := range kvImpls(t) {
		t.Run(name, func(t *testing.T) {
			kv := open(t)
			ctx := t.Context()
			if _, err := kv.Create(ctx, "before", []byte("0")); err != nil {
				t.Fatal(err)
			}
			changes := make(chan KVChange, 16)
			f, err := kv.Follow(ctx, func(c KVChange) { changes <- c })
			if err != nil {
				t.Fatal(err)
			}
			next := func() KVChange {
				t.Helper()
				select {
				case c := <-changes:
					return c
				case <-time.After(10 * time.Second):
					t.Fatal("no report")
				}
				return KVChange{}
			}
			if c := next(); c.Kind != KVCurrent {
				t.Fatalf("first report %+v, want KVCurrent", c)
			}
			rev, err := kv.Create(ctx, "k", []byte("v"))
			if err != nil {
				t.Fatal(err)
			}
			if c := next(); c.Kind != KVPut || c.Entry.Key != "k" || string(c.Entry.Value) != "v" || c.Entry.Revision != rev {
				t.Fatalf("put reported as %+v", c)
			}
			if err := kv.Delete(ctx, "k", rev); err != nil {
				t.Fatal(err)
			}
			if c := next(); c.Kind != KVDeleted || c.Entry.Key != "k" || c.Entry.Revision <= rev {
				t.Fatalf("deletion reported as %+v", c)
			}
			f.Stop()
			f.Stop() // twice is safe
		})
	}
}

// TestKVFollowLapses: a follow lapses when its connection drops, with a
// last KVLapsed, and reports nothing after.
func TestKVFollowLapses(t *testing.T) {
	s := clustertest.StartServer(t, "A")
	nc := clustertest.Connect(t, s.ClientURL())
	kv, err := NewKV(KVConfig{Conn: nc, Domain: "A", Bucket: "TEST"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	changes := make(chan KVChange, 16)
	if _, err := kv.Follow(t.Context(), func(c KVChange) { changes <- c }); err != nil {
		t.Fatal(err)
	}
	if c := <-changes; c.Kind != KVCurrent {
		t.Fatalf("first report %+v", c)
	}
	nc.Close()
	select {
	case c := <-changes:
		if c.Kind != KVLapsed || !errors.Is(c.Err, ErrUnreachable) && !errors.Is(c.Err, ErrWatchEnded) {
			t.Fatalf("after the connection closed: %+v", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no lapse after the connection closed")
	}
	mem := NewMemKV("mem")
	memChanges := make(chan KVChange, 16)
	if _, err := mem.Follow(t.Context(), func(c KVChange) { memChanges <- c }); err != nil {
		t.Fatal(err)
	}
	<-memChanges
	mem.SetUnreachable(true)
	if c := <-memChanges; c.Kind != KVLapsed || !errors.Is(c.Err, ErrUnreachable) {
		t.Fatalf("after SetUnreachable: %+v", c)
	}
}
