package bus

import "math"

// Ordering within a category.
//
// Each category keeps its handlers in a doubly linked list, so that every
// placement (prepend, append, before or after a named handler) is a constant
// number of pointer updates once the target is found through the name
// index. A chain, however, needs the handlers *of one code* in category
// order, without walking the handlers of every other code: so each list
// entry also carries an order label, a uint64 that increases along the list,
// and a chain is built by sorting that code's entries by label.
//
// Labels follow the order-maintenance scheme of Bender, Cole, Demaine,
// Farach-Colton and Zito ("Two simplified algorithms for maintaining order in
// a list", ESA 2002). Inserting at either end steps labelGap away from the
// current end, so the default prepend and plain append never relabel anything.
// Inserting between two neighbours takes the midpoint; when they are
// adjacent integers, the smallest aligned label block around the spot whose
// density is below a threshold is respaced evenly. That costs amortized
// O(log n) relabelled entries per insertion, instead of the O(n) of
// renumbering the whole list.
//
// The FIRST_IN_CATEGORY and LAST_IN_CATEGORY handlers are not in the list:
// they sit in the category's head and tail slots, which is what keeps them
// first and last whatever is inserted later, and keeps "prepend after the
// head" an end insertion.

const labelGap = 1 << 32

type orderList struct {
	front, back *entry
	n           int
}

// insert links e between prev and next, which are adjacent in the list (nil
// for the ends).
func (l *orderList) insert(e, prev, next *entry) {
	lo, hi := l.bounds(prev, next)
	for hi-lo < 2 {
		if prev != nil {
			l.relabel(prev)
		} else {
			l.relabel(next)
		}
		lo, hi = l.bounds(prev, next)
	}
	switch {
	case prev == nil && next != nil:
		e.label = hi - min(labelGap, (hi-lo)/2)
	case next == nil && prev != nil:
		e.label = lo + min(labelGap, (hi-lo)/2)
	default:
		e.label = lo + (hi-lo)/2
	}
	e.prev, e.next = prev, next
	if prev != nil {
		prev.next = e
	} else {
		l.front = e
	}
	if next != nil {
		next.prev = e
	} else {
		l.back = e
	}
	l.n++
}

// bounds returns the labels around a gap; the list ends are the exclusive
// virtual labels 0 and MaxUint64.
func (l *orderList) bounds(prev, next *entry) (lo, hi uint64) {
	lo, hi = 0, math.MaxUint64
	if prev != nil {
		lo = prev.label
	}
	if next != nil {
		hi = next.label
	}
	return lo, hi
}

func (l *orderList) pushFront(e *entry)          { l.insert(e, nil, l.front) }
func (l *orderList) pushBack(e *entry)           { l.insert(e, l.back, nil) }
func (l *orderList) insertBefore(e, mark *entry) { l.insert(e, mark.prev, mark) }
func (l *orderList) insertAfter(e, mark *entry)  { l.insert(e, mark, mark.next) }

func (l *orderList) remove(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.front = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.back = e.prev
	}
	e.prev, e.next = nil, nil
	l.n--
}

// densityBase is 2/T for the overflow threshold T = 1.5: a block of 2^i
// labels is respaced only if it would hold fewer than (4/3)^i entries.
const densityBase = 4.0 / 3.0

// relabel makes room next to x: it finds the smallest aligned block of
// labels around x that is sparse enough and spreads the entries in it evenly,
// which leaves a gap of at least two between any two of them and between
// them and the block's neighbours.
func (l *orderList) relabel(x *entry) {
	limit := 1.0
	for i := uint(1); i <= 64; i++ {
		limit *= densityBase
		var lo, hi uint64
		if i == 64 {
			lo, hi = 0, math.MaxUint64
		} else {
			lo = x.label &^ (1<<i - 1)
			hi = lo + (1<<i - 1)
		}
		first := x
		for first.prev != nil && first.prev.label >= lo {
			first = first.prev
		}
		n := uint64(0)
		for e := first; e != nil && e.label <= hi; e = e.next {
			n++
		}
		step := (hi - lo) / (n + 1)
		if step < 2 || (i < 64 && float64(n+1) >= limit) {
			continue
		}
		label := lo
		for e, k := first, uint64(0); k < n; e, k = e.next, k+1 {
			label += step
			e.label = label
		}
		return
	}
	panic("bus: order labels exhausted") // more than 2^62 handlers in one category
}
