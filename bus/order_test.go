package bus

import (
	"math/rand/v2"
	"testing"
)

// checkList verifies links and strictly increasing labels, and returns the
// entries in order.
func checkList(t *testing.T, l *orderList) []*entry {
	t.Helper()
	var out []*entry
	var prev *entry
	for e := l.front; e != nil; e = e.next {
		if e.prev != prev {
			t.Fatalf("broken back link at %d", len(out))
		}
		if prev != nil && prev.label >= e.label {
			t.Fatalf("labels not increasing at %d: %d then %d", len(out), prev.label, e.label)
		}
		if e.label == 0 || e.label == ^uint64(0) {
			t.Fatalf("label %d at an exclusive bound", e.label)
		}
		out = append(out, e)
		prev = e
	}
	if l.back != prev || len(out) != l.n {
		t.Fatalf("back %p, last %p; n %d, counted %d", l.back, prev, l.n, len(out))
	}
	return out
}

// Inserting again and again at one spot exhausts the gap there and forces
// relabelling; the order must survive it.
func TestOrderListHotSpot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		insert func(l *orderList, e, mark *entry)
	}{
		{"before a fixed entry", func(l *orderList, e, mark *entry) { l.insertBefore(e, mark) }},
		{"after a fixed entry", func(l *orderList, e, _ *entry) { l.insertAfter(e, l.front) }},
		{"before the newest", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l orderList
			a, b := &entry{id: 1}, &entry{id: 2}
			l.pushBack(a)
			l.pushBack(b)
			var want []*entry
			mark := b
			const n = 5000
			for i := range n {
				e := &entry{id: ID(i + 3)}
				if tc.insert != nil {
					tc.insert(&l, e, mark)
				} else {
					l.insertBefore(e, mark)
					mark = e
				}
				want = append(want, e)
			}
			got := checkList(t, &l)
			if len(got) != n+2 {
				t.Fatalf("%d entries", len(got))
			}
			// Relative order of the inserted entries follows the rule.
			inner := got[1 : n+1]
			switch tc.name {
			case "before a fixed entry":
				for i := range inner {
					if inner[i] != want[i] {
						t.Fatalf("position %d: id %d, want %d", i, inner[i].id, want[i].id)
					}
				}
			default:
				for i := range inner {
					if inner[i] != want[n-1-i] {
						t.Fatalf("position %d: id %d, want %d", i, inner[i].id, want[n-1-i].id)
					}
				}
			}
		})
	}
}

// Random insertions and removals against a plain slice.
func TestOrderListRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var l orderList
	var model []*entry
	for i := range 5000 {
		e := &entry{id: ID(i + 1)}
		switch k := rng.IntN(10); {
		case len(model) == 0 || k == 0:
			l.pushFront(e)
			model = append([]*entry{e}, model...)
		case k == 1:
			l.pushBack(e)
			model = append(model, e)
		case k < 5:
			j := rng.IntN(len(model))
			l.insertBefore(e, model[j])
			model = append(model[:j], append([]*entry{e}, model[j:]...)...)
		case k < 8:
			j := rng.IntN(len(model))
			l.insertAfter(e, model[j])
			model = append(model[:j+1], append([]*entry{e}, model[j+1:]...)...)
		default:
			j := rng.IntN(len(model))
			l.remove(model[j])
			model = append(model[:j], model[j+1:]...)
		}
	}
	got := checkList(t, &l)
	if len(got) != len(model) {
		t.Fatalf("%d entries, model %d", len(got), len(model))
	}
	for i := range got {
		if got[i] != model[i] {
			t.Fatalf("position %d differs", i)
		}
	}
}
