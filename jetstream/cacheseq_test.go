package jetstream

import (
	"fmt"
	"testing"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
)

// seqN events are in the cache of seqTestCache.
const seqN = 20

// seqTestCache is a cache of 5 that was given seqN events, the odd ones job
// events (ev.j), each retained in the job-events stream.
func seqTestCache(t *testing.T) *EventCache {
	t.Helper()
	c, nc := openTestCache(t, 5)
	retained := retainAll(t, c, "keep", "job.*")
	for i := 1; i <= seqN; i++ {
		subj := "ev.e"
		if i%2 == 1 {
			subj = "ev.j"
		}
		publish(t, nc, subj, fmt.Sprint(i))
	}
	clustertest.WaitFor(t, waitTime, func() error {
		if r := retained(); r != seqN/2 {
			return fmt.Errorf("%d of %d copies retained", r, seqN/2)
		}
		return nil
	})
	return c
}

// ReadSeqs returns every sequence of a range once, in order: those the
// events stream still holds from it, the job events it evicted from their
// copies (with their events' sequences), and counts the environment
// events it evicted as missing.
func TestReadSeqs(t *testing.T) {
	c := seqTestCache(t)
	for _, tc := range []struct{ from, to, missing uint64 }{{1, seqN, 7}, {3, 17, 6}, {16, 20, 0}, {2, 2, 1}, {21, 30, 0}} {
		var got []CachedMsg
		missing, err := c.ReadSeqs(t.Context(), tc.from, tc.to, nil, func(b []CachedMsg) error {
			got = append(got, b...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for s := tc.from; s <= min(tc.to, seqN); s++ {
			if s%2 == 1 || s > seqN-5 {
				want = append(want, fmt.Sprint(s))
			}
		}
		if len(got) != len(want) || missing != tc.missing {
			t.Fatalf("ReadSeqs(%d, %d): %d events, %d missing; want %d, %d", tc.from, tc.to, len(got), missing, len(want), tc.missing)
		}
		for i, m := range got {
			if m.ID != want[i] || fmt.Sprint(m.EventSeq) != want[i] {
				t.Fatalf("ReadSeqs(%d, %d)[%d] = %s at %d, want %s", tc.from, tc.to, i, m.ID, m.EventSeq, want[i])
			}
		}
	}
}

// ReplayTo returns the events on its filters up to a sequence, in order:
// those the events stream holds, and the job events it evicted from their
// copies, each once; environment events evicted are not read.
func TestReplayTo(t *testing.T) {
	c := seqTestCache(t)
	for _, tc := range []struct {
		filter     string
		jobs       []string
		from, upTo uint64
		want       []uint64
	}{
		{"ev.j", []string{"job.j"}, 1, seqN, []uint64{1, 3, 5, 7, 9, 11, 13, 15, 17, 19}},
		{"ev.j", []string{"job.j"}, 4, 17, []uint64{5, 7, 9, 11, 13, 15, 17}},
		{"ev.j", nil, 1, seqN, []uint64{17, 19}},
		{"ev.e", nil, 1, 19, []uint64{16, 18}},
		{"ev.e", nil, 1, 10, nil},
	} {
		var got []uint64
		err := c.ReplayTo(t.Context(), []string{tc.filter}, tc.jobs, tc.from, tc.upTo, func(b []CachedMsg) error {
			for _, m := range b {
				if m.ID != fmt.Sprint(m.EventSeq) {
					t.Errorf("event %s at %d", m.ID, m.EventSeq)
				}
				got = append(got, m.EventSeq)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Fatalf("ReplayTo(%s, %v, %d, %d) = %v, want %v", tc.filter, tc.jobs, tc.from, tc.upTo, got, tc.want)
		}
	}
}
