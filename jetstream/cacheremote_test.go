package jetstream

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Another cluster's cache is read by time, in its domain: the messages on
// the filters stored since then, in order; what its limits discarded of
// that time is reported.
func TestReadClusterEvents(t *testing.T) {
	c, nc := openTestCache(t, 6)
	read := func(since time.Time, filters ...string) ([]string, bool) {
		t.Helper()
		var ids []string
		evicted, err := ReadClusterEvents(t.Context(), nc, "A", "A", filters, since, func(b []CachedMsg) error {
			for _, m := range b {
				ids = append(ids, m.ID)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return ids, evicted
	}
	publishSynced := func(subj string, ids ...string) {
		t.Helper()
		for _, id := range ids {
			publish(t, nc, subj, id)
		}
		if err := c.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}

	publishSynced("ev.x", "old1", "old2")
	since := time.Now()
	if ids, _ := read(since, "ev.x"); len(ids) != 0 {
		t.Fatalf("read %v from an empty window", ids)
	}
	publishSynced("ev.x", "new1")
	publishSynced("ev.y", "other")
	publishSynced("ev.x", "new2")
	if ids, evicted := read(since, "ev.x"); fmt.Sprint(ids) != "[new1 new2]" || evicted {
		t.Fatalf("read %v (evicted %v), want [new1 new2] and nothing evicted", ids, evicted)
	}
	if ids, _ := read(since, "ev.x", "ev.*"); fmt.Sprint(ids) != "[new1 other new2]" {
		t.Fatalf("read %v through overlapping filters, want each once, in order", ids)
	}

	publishSynced("ev.x", "new3", "new4", "new5", "new6") // old1, old2, new1 evicted
	if ids, evicted := read(since, "ev.x"); fmt.Sprint(ids) != "[new2 new3 new4 new5 new6]" || !evicted {
		t.Fatalf("read %v (evicted %v), want new2… and evicted", ids, evicted)
	}

	_, err := ReadClusterEvents(t.Context(), nc, "B", "A", []string{"ev.x"}, since, func([]CachedMsg) error { return nil })
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("reading a cluster with no cache: %v, want ErrUnreachable", err)
	}
}
