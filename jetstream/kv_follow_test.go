package jetstream

import (
	"errors"
	"testing"
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
			nextChange(t, changes, KVCurrent)
			rev, err := kv.Create(ctx, "k", []byte("v"))
			if err != nil {
				t.Fatal(err)
			}
			if c := nextChange(t, changes, KVPut); c.Entry.Key != "k" || string(c.Entry.Value) != "v" || c.Entry.Revision != rev {
				t.Fatalf("put reported as %+v", c)
			}
			if err := kv.Delete(ctx, "k", rev); err != nil {
				t.Fatal(err)
			}
			if c := nextChange(t, changes, KVDeleted); c.Entry.Key != "k" || c.Entry.Revision <= rev {
				t.Fatalf("deletion reported as %+v", c)
			}
			f.Stop()
			f.Stop() // twice is safe
		})
	}
}

// TestKVFollowLapses: a follow lapses when its connection drops, with a
// last KVLapsed. (MemKV's: TestMemKVUnreachable.)
func TestKVFollowLapses(t *testing.T) {
	kv, nc := openNATSKV(t)
	changes := make(chan KVChange, 16)
	if _, err := kv.Follow(t.Context(), func(c KVChange) { changes <- c }); err != nil {
		t.Fatal(err)
	}
	nextChange(t, changes, KVCurrent)
	nc.Close()
	if c := nextChange(t, changes, KVLapsed); !errors.Is(c.Err, ErrUnreachable) && !errors.Is(c.Err, ErrWatchEnded) {
		t.Fatalf("after the connection closed: %+v", c)
	}
}
