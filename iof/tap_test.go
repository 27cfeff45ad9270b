package iof

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
)

// A tap sees every record of its job that the stream gets — the same
// bytes, sequences and ends — in order per channel, and none of another
// job; after stop, nothing more.
func TestTapSeesWhatIsStored(t *testing.T) {
	svc, nc := openService(t, ServiceConfig{Memory: true, Idle: time.Hour})
	var mu sync.Mutex
	var tapped []Record
	stop := svc.Tap("job", func(r Record) {
		mu.Lock()
		tapped = append(tapped, r)
		mu.Unlock()
	})
	other := svc.Tap("other", func(r Record) { t.Errorf("a record of %s on another job's tap", r.Nspace) })
	defer other()
	src, err := svc.Source(pmix.Proc{Nspace: "job", Rank: 1}, SourceOptions{Incarnation: "i1"})
	if err != nil {
		t.Fatal(err)
	}
	c := follow(t, nc, "job")
	for i := range 200 { // quiet lines (each numbered by Write) and bursts
		_, _ = fmt.Fprintf(src.Stdout(), "line %d\n", i)
		if i%50 == 0 { // the channel goes idle: Write numbers the next line itself
			line := fmt.Sprintf("line %d\n", i)
			clustertest.WaitFor(t, waitTime, func() error {
				for _, p := range c.snapshot() {
					if strings.HasSuffix(string(p.Data), line) {
						return nil
					}
				}
				return fmt.Errorf("%q not stored", line)
			})
		}
	}
	_, _ = src.Stderr().Write([]byte("oops\n"))
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	stored := c.completes(t, 2)
	stop()
	mu.Lock()
	defer mu.Unlock()
	key := func(r Record) string { return fmt.Sprintf("%v %d %q %v", r.Channel, r.Seq, r.Data, r.Complete) }
	var want, got []string
	for _, p := range stored {
		want = append(want, key(p.Record))
	}
	last := map[Channel]uint64{}
	for _, r := range tapped {
		got = append(got, key(r))
		if r.Seq != last[r.Channel]+1 {
			t.Errorf("%v: record %d after %d on the tap", r.Channel, r.Seq, last[r.Channel])
		}
		last[r.Channel] = r.Seq
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("tapped %d records, stored %d:\n%v\n%v", len(got), len(want), got, want)
	}
	n := len(tapped)
	src2, err := svc.Source(pmix.Proc{Nspace: "job", Rank: 2}, SourceOptions{Incarnation: "i1"})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = src2.Stdout().Write([]byte("after stop\n"))
	if err := src2.Close(); err != nil {
		t.Fatal(err)
	}
	if len(tapped) != n {
		t.Errorf("%d records on a stopped tap", len(tapped)-n)
	}
}
