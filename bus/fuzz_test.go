package bus

import (
	"fmt"
	"slices"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

// model is a deliberately plain reimplementation of the placement rules
// (slices, linear scans) that FuzzRegistry checks the registry against.
type model struct {
	nextID ID
	first  *mreg
	last   *mreg
	cats   [numCategories]struct {
		head, tail *mreg
		list       []*mreg
	}
	byName map[string]*mreg
	byID   map[ID]*mreg
}

type mreg struct {
	id    ID
	name  string
	codes []pmix.Status
	cat   Category
}

func newModel() *model {
	return &model{nextID: 1, byName: map[string]*mreg{}, byID: map[ID]*mreg{}}
}

func (m *model) register(n string, cs []pmix.Status, place Placement, target string, conflict bool) (ID, pmix.Status) {
	g := &mreg{name: n, codes: normalizeCodes(cs)}
	g.cat = categoryOf(g.codes)
	if _, dup := m.byName[n]; dup && n != "" {
		return 0, pmix.ErrEventRegistration
	}
	if conflict {
		return 0, pmix.ErrEventRegistration
	}
	cat := &m.cats[g.cat]
	idx := func(x *mreg) int { return slices.Index(cat.list, x) }
	insert := func(i int) { cat.list = slices.Insert(cat.list, i, g) }
	switch place {
	case PlaceFirst:
		if m.first != nil {
			return 0, pmix.ErrEventRegistration
		}
		m.first = g
	case PlaceLast:
		if m.last != nil {
			return 0, pmix.ErrEventRegistration
		}
		m.last = g
	case PlaceFirstInCategory:
		if cat.head != nil {
			return 0, pmix.ErrEventRegistration
		}
		cat.head = g
	case PlaceLastInCategory:
		if cat.tail != nil {
			return 0, pmix.ErrEventRegistration
		}
		cat.tail = g
	case PlacePrepend:
		insert(0)
	case PlaceAppend:
		insert(len(cat.list))
	case PlaceBefore, PlaceAfter:
		t, ok := m.byName[target]
		if !ok || t.cat != g.cat {
			return 0, pmix.ErrEventRegistration
		}
		isBefore := place == PlaceBefore
		switch {
		case isBefore && (t == m.first || t == cat.head), !isBefore && (t == m.last || t == cat.tail):
			return 0, pmix.ErrEventRegistration
		case t == m.first || t == cat.head:
			insert(0)
		case t == m.last || t == cat.tail:
			insert(len(cat.list))
		case isBefore:
			insert(idx(t))
		default:
			insert(idx(t) + 1)
		}
	}
	g.id = m.nextID
	m.nextID++
	m.byID[g.id] = g
	if n != "" {
		m.byName[n] = g
	}
	return g.id, pmix.Success
}

func (m *model) deregister(id ID) pmix.Status {
	g, ok := m.byID[id]
	if !ok {
		return pmix.ErrNotFound
	}
	delete(m.byID, id)
	delete(m.byName, g.name)
	cat := &m.cats[g.cat]
	switch g {
	case m.first:
		m.first = nil
	case m.last:
		m.last = nil
	case cat.head:
		cat.head = nil
	case cat.tail:
		cat.tail = nil
	default:
		cat.list = slices.DeleteFunc(cat.list, func(x *mreg) bool { return x == g })
	}
	return pmix.Success
}

// order lists every registration in registry order.
func (m *model) order() []*mreg {
	var out []*mreg
	add := func(g *mreg) {
		if g != nil {
			out = append(out, g)
		}
	}
	add(m.first)
	for c := range m.cats {
		add(m.cats[c].head)
		out = append(out, m.cats[c].list...)
		add(m.cats[c].tail)
	}
	add(m.last)
	return out
}

// chain is the expected chain for code.
func (m *model) chain(code pmix.Status) []ID {
	var out []ID
	for _, g := range m.order() {
		if g.cat == CategoryDefault || slices.Contains(g.codes, code) {
			out = append(out, g.id)
		}
	}
	return out
}

var fuzzCodeSets = [][]pmix.Status{nil, {codeA}, {codeB}, {codeA, codeB}, {codeB, codeC}, {codeC, codeC}}

var fuzzPlaceKeys = map[Placement]string{
	PlaceFirst: pmix.KeyEventHdlrFirst, PlaceLast: pmix.KeyEventHdlrLast,
	PlaceFirstInCategory: pmix.KeyEventHdlrFirstInCategory, PlaceLastInCategory: pmix.KeyEventHdlrLastInCategory,
	PlacePrepend: pmix.KeyEventHdlrPrepend, PlaceAppend: pmix.KeyEventHdlrAppend,
}

// FuzzRegistry applies random register/deregister sequences to a registry
// and the model, and after each step checks that they agree and that the
// chains keep their invariants: FIRST runs first, LAST runs last, categories
// run in order, FIRST_/LAST_IN_CATEGORY lead and close their category, no
// handler runs twice, and ids are stable and never reused.
func FuzzRegistry(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 1, 0, 1, 3, 0})
	f.Add([]byte{0, 0, 2, 0, 1, 0, 1, 3, 0, 2, 0, 2, 4, 0, 3, 0, 3, 5, 0, 4})
	f.Add([]byte{0, 1, 3, 0, 0, 0, 1, 7, 0, 1, 0, 1, 8, 0, 2, 0, 1, 8, 3, 3, 3, 1, 0, 1, 7, 1, 4})
	f.Add([]byte{0, 3, 1, 0, 0, 0, 3, 4, 0, 1, 0, 3, 7, 0, 2, 0, 3, 8, 1, 3, 3, 0, 0, 3, 5, 0, 5, 3, 2, 0, 3, 6, 0, 6})
	f.Add([]byte{0, 0, 6, 0, 0, 0, 0, 8, 0, 1, 0, 0, 7, 1, 2, 0, 2, 0, 0, 7, 0, 1, 9, 0, 4, 3, 9, 0, 0, 7, 2, 5})
	f.Add([]byte{0, 4, 2, 0, 0, 0, 2, 2, 0, 1, 0, 5, 3, 0, 2, 1, 1, 0, 0, 9, 3, 1, 3, 0, 0, 5, 3, 0, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newTestRegistry(t, func(c *Config) { c.Logger = nil })
		m := newModel()
		next := func() int {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return int(b)
		}
		var maxID ID
		for steps := 0; len(data) > 0 && steps < 64; steps++ {
			if next()%4 == 3 { // deregister
				ids := slices.Sorted(mapsKeys(m.byID))
				id := ID(next()) + 1000 // unknown, unless there are registrations to pick from
				if k := next(); len(ids) > 0 && k%8 != 7 {
					id = ids[k%len(ids)]
				}
				err := r.Deregister(id)
				if got, want := pmix.StatusOf(err), m.deregister(id); got != want {
					t.Fatalf("step %d: Deregister(%d) = %v, model %v", steps, id, err, want)
				}
			} else { // register
				cs := fuzzCodeSets[next()%len(fuzzCodeSets)]
				place := Placement(next() % 9)
				conflict := place == 8 // two placement attributes at once
				if conflict {
					place = PlacePrepend
				}
				names := slices.Sorted(mapsKeys(m.byName))
				target := "nobody"
				if k := next(); len(names) > 0 && k%8 != 7 {
					target = names[k%len(names)]
				}
				n := ""
				if k := next(); k%6 != 5 {
					n = fmt.Sprintf("h%d", k%6)
				}
				var attrs []pmix.Info
				if n != "" {
					attrs = append(attrs, name(n))
				}
				switch place {
				case PlaceBefore:
					attrs = append(attrs, before(target))
				case PlaceAfter:
					attrs = append(attrs, after(target))
				default:
					attrs = append(attrs, flag(fuzzPlaceKeys[place]))
				}
				if conflict {
					attrs = append(attrs, appendAt)
				}
				id, err := r.Register(cs, attrs, noAction)
				wantID, want := m.register(n, cs, place, target, conflict)
				if got := pmix.StatusOf(err); got != want || id != wantID {
					t.Fatalf("step %d: Register(%v, %s) = %d, %v; model %d, %v", steps, cs, pmix.FormatInfos(attrs), id, err, wantID, want)
				}
				if id != 0 {
					if id <= maxID {
						t.Fatalf("step %d: id %d not above %d", steps, id, maxID)
					}
					maxID = id
				}
			}
			checkAgainstModel(t, r, m, steps)
		}
	})
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func checkAgainstModel(t *testing.T, r *Registry, m *model, step int) {
	t.Helper()
	regs := r.Registrations()
	order := m.order()
	if len(regs) != len(order) {
		t.Fatalf("step %d: %d registrations, model %d", step, len(regs), len(order))
	}
	for i, g := range regs {
		if g.ID != order[i].id || g.Name != order[i].name || g.Category != order[i].cat {
			t.Fatalf("step %d: registration %d is %d %q %v, model %d %q %v", step, i, g.ID, g.Name, g.Category, order[i].id, order[i].name, order[i].cat)
		}
	}
	for _, code := range []pmix.Status{codeA, codeB, codeC, codeC - 1} {
		o := run(t, r, Event{Code: code})
		got := make([]ID, len(o.Ran))
		seen := map[ID]bool{}
		for i, ran := range o.Ran {
			got[i] = ran.ID
			if seen[ran.ID] {
				t.Fatalf("step %d, code %v: handler %d ran twice", step, code, ran.ID)
			}
			seen[ran.ID] = true
		}
		if want := m.chain(code); !slices.Equal(got, want) {
			t.Fatalf("step %d, code %v: chain %v, model %v", step, code, got, want)
		}
		if _, ok := r.Snapshot(Prepare(Event{Code: code})); ok != (len(got) > 0) {
			t.Fatalf("step %d, code %v: Snapshot wants %v for a chain of %d", step, code, ok, len(got))
		}
		// Start and Run, the agent's way, run the same chain.
		if c := r.Start(Prepare(Event{Code: code})); (c != nil) != (len(got) > 0) {
			t.Fatalf("step %d, code %v: Start returned %v for a chain of %d", step, code, c, len(got))
		} else if c != nil {
			ch := make(chan Outcome, 1)
			c.Run(func(o Outcome) { ch <- o })
			o2 := <-ch
			if !slices.EqualFunc(o2.Ran, o.Ran, func(a, b Ran) bool { return a.ID == b.ID }) {
				t.Fatalf("step %d, code %v: Start/Run ran %v, Notify %v", step, code, o2.Ran, o.Ran)
			}
		}
		// The invariants, stated on their own.
		lastCat := Category(-1)
		for i, id := range got {
			g := m.byID[id]
			switch {
			case g == m.first && i != 0:
				t.Fatalf("step %d: FIRST at position %d", step, i)
			case g == m.last && i != len(got)-1:
				t.Fatalf("step %d: LAST at position %d", step, i)
			case g == m.first || g == m.last:
				continue
			}
			if g.cat < lastCat {
				t.Fatalf("step %d: %v handler after a %v one", step, g.cat, lastCat)
			}
			if g.cat != lastCat && m.cats[g.cat].head != nil && m.cats[g.cat].head.matches(code) && m.cats[g.cat].head != g {
				t.Fatalf("step %d: %v category does not start with its FIRST_IN_CATEGORY handler", step, g.cat)
			}
			lastCat = g.cat
		}
		for c := range m.cats {
			if tail := m.cats[c].tail; tail != nil && seen[tail.id] {
				for _, id := range got[slices.Index(got, tail.id)+1:] {
					if g := m.byID[id]; g.cat == Category(c) && g != m.last && g != m.first {
						t.Fatalf("step %d: %v handler %d after its LAST_IN_CATEGORY", step, g.cat, id)
					}
				}
			}
		}
	}
}

func (g *mreg) matches(code pmix.Status) bool {
	return g.cat == CategoryDefault || slices.Contains(g.codes, code)
}
