package router

import (
	"fmt"
	"testing"

	"github.com/pmixbus/pmixbus/event"
)

// TestOutcomeQueueProbes: a probe that finds nobody discards the reports
// that ended before it was sent, and only those; one that finds a listener
// lets everything queued out, in order.
func TestOutcomeQueueProbes(t *testing.T) {
	q := &outcomeQueue{ready: make(chan struct{}, 1), probe: make(chan struct{}, 1)}
	add := func(ids ...string) {
		for _, id := range ids {
			q.add(event.OutcomeReport{EventID: id})
		}
	}
	add("a", "b")
	mark := q.mark()
	add("c") // ended after the probe was sent
	if got, _ := q.take(10); len(got) != 0 {
		t.Fatalf("took %v before any listener was found", got)
	}
	if discarded, _ := q.probed(false, mark); discarded != 2 {
		t.Fatalf("discarded %d, want 2", discarded)
	}
	mark = q.mark()
	add("d")
	if _, lost := q.probed(true, mark); lost != 0 {
		t.Fatalf("lost %d", lost)
	}
	select {
	case <-q.ready:
	default:
		t.Fatal("a listener found with reports queued: the publisher not woken")
	}
	add("e")
	got, _ := q.take(10)
	if ids := fmt.Sprint(idsOf(got)); ids != "[c d e]" {
		t.Fatalf("took %s, want [c d e]", ids)
	}
	// Nobody again: what is queued when the probe was sent goes.
	add("f")
	mark = q.mark()
	if discarded, _ := q.probed(false, mark); discarded != 1 {
		t.Fatalf("discarded %d, want 1", discarded)
	}
	if got, _ := q.take(10); len(got) != 0 {
		t.Fatalf("took %v", got)
	}
}

// TestOutcomeQueueBacklogUnheard: while nobody is known to listen, a full
// backlog makes room by forgetting its older half, counted as lost once a
// listener is found.
func TestOutcomeQueueBacklogUnheard(t *testing.T) {
	q := &outcomeQueue{ready: make(chan struct{}, 1), probe: make(chan struct{}, 1)}
	for i := range outcomeBacklog + 1 {
		q.add(event.OutcomeReport{EventID: fmt.Sprint(i)})
	}
	if _, lost := q.probed(true, q.mark()); lost != outcomeBacklog/2 {
		t.Fatalf("lost %d, want %d", lost, outcomeBacklog/2)
	}
	got, _ := q.take(1)
	if len(got) != 1 || got[0].EventID != fmt.Sprint(outcomeBacklog/2) {
		t.Fatalf("oldest kept %v", got)
	}
}

func idsOf(rs []event.OutcomeReport) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.EventID)
	}
	return out
}

// TestOutcomeQueueChunks: reports keep their order across the queue's
// chunks whatever the cuts: discards and takes that end inside a chunk or
// on its boundary, and a queue emptied and filled again from reused
// chunks.
func TestOutcomeQueueChunks(t *testing.T) {
	q := &outcomeQueue{ready: make(chan struct{}, 1), probe: make(chan struct{}, 1)}
	next, want := 0, 0 // the next report to add, the oldest still queued
	add := func(n int) {
		for range n {
			q.add(event.OutcomeReport{EventID: fmt.Sprint(next)})
			next++
		}
	}
	check := func(got []event.OutcomeReport) {
		t.Helper()
		for _, r := range got {
			if r.EventID != fmt.Sprint(want) {
				t.Fatalf("took %s, want %d", r.EventID, want)
			}
			want++
		}
	}
	add(3*outcomeChunk + 5)
	discarded, _ := q.probed(false, q.mark()-uint64(outcomeChunk+2)) // all but the last chunk and 2
	if discarded != 2*outcomeChunk+3 {
		t.Fatalf("discarded %d", discarded)
	}
	want += discarded
	q.probed(true, q.mark())
	for _, k := range []int{1, outcomeChunk - 1, 2} {
		got, _ := q.take(k)
		if len(got) != k {
			t.Fatalf("took %d of %d", len(got), k)
		}
		check(got)
	}
	add(outcomeChunk*(outcomeFreeChunks+2) + 7) // past the free list, then from reused chunks
	for {
		got, _ := q.take(outcomeBatch)
		if len(got) == 0 {
			break
		}
		check(got)
	}
	if want != next || q.n != 0 || len(q.chunks) != 0 || len(q.free) > outcomeFreeChunks {
		t.Fatalf("after draining: took up to %d of %d; %d queued in %d chunks, %d free", want, next, q.n, len(q.chunks), len(q.free))
	}
	add(outcomeChunk + 1)
	got, _ := q.take(outcomeBatch)
	check(got)
	if want != next {
		t.Fatalf("took up to %d of %d", want, next)
	}
}
