package agent

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
