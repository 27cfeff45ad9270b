package jetstream

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
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
	stored := uint64(0)
	publishSynced := func(subj string, ids ...string) {
		t.Helper()
		for _, id := range ids {
			publish(t, nc, subj, id)
		}
		stored += uint64(len(ids))
		waitStored(t, c, stored)
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

// TestRemoteReadSoak (PMIXBUS_SOAK=1) times a catch-up's read of another
// cluster's cache across the leaf links, against the same read made in
// that cluster, interleaved, and logs medians and ranges
// (docs/PERFORMANCE.md).
func TestRemoteReadSoak(t *testing.T) {
	if os.Getenv("PMIXBUS_SOAK") == "" {
		t.Skip("PMIXBUS_SOAK=1 runs it")
	}
	mc := clustertest.StartMultiCluster(t, cluster.ClusterSpec{ID: "A", Servers: 1}, cluster.ClusterSpec{ID: "B", Servers: 1})
	ncA := clustertest.Connect(t, mc.Cluster("A").URL())
	ncB := clustertest.Connect(t, mc.Cluster("B").URL())
	const runs = 7
	for _, n := range []int{512, 10000} {
		c, err := OpenEventCache(t.Context(), ncA, EventCacheConfig{Cluster: "A", Subjects: []string{"pmix.evt.global.A.*"}, JobSubjects: []string{"pmix.jobevt.>"}, MaxMsgs: int64(n)})
		if err != nil {
			t.Fatal(err)
		}
		since := time.Now()
		last, err := c.LastSeq(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			publish(t, ncA, "pmix.evt.global.A.-3000", fmt.Sprint(n, ".", i))
		}
		waitStored(t, c, last+uint64(n))
		var remote, local []time.Duration
		for range runs {
			for _, side := range []struct {
				nc *nats.Conn
				to *[]time.Duration
			}{{ncB, &remote}, {ncA, &local}} {
				got := 0
				start := time.Now()
				_, err := ReadClusterEvents(t.Context(), side.nc, "A", "A", []string{"pmix.evt.global.A.*"}, since, func(b []CachedMsg) error { got += len(b); return nil })
				*side.to = append(*side.to, time.Since(start))
				if err != nil || got != n {
					t.Fatalf("read %d of %d: %v", got, n, err)
				}
			}
		}
		slices.Sort(remote)
		slices.Sort(local)
		t.Logf("%d events: across the link median %v (%v..%v), in the cluster median %v (%v..%v), ratio of medians %.2f",
			n, remote[runs/2], remote[0], remote[runs-1], local[runs/2], local[0], local[runs-1], float64(remote[runs/2])/float64(local[runs/2]))
	}
}
