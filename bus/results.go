package bus

import "github.com/pmixbus/pmixbus/pmix"

// The consolidated results array of a chain (RFC0018) and the termination
// decision read from it. Handlers edit their copy of the array; the chain
// takes the copy back as the new array, except that a required
// WANT_TERMINATION entry is not theirs to change, so that the array and the
// decision never disagree (see the package documentation, Chains).

// consolidate makes buf, a handler's edited copy of c.results, the new
// consolidated array: required WANT_TERMINATION entries of c.results are
// put back as they were, and entries whose key the handler cleared are
// dropped. It returns buf compacted.
func (c *chain) consolidate(buf []pmix.Info) []pmix.Info {
	if c.x != nil && c.x.pinned > 0 {
		for i := range c.results {
			if isPinned(&c.results[i]) {
				buf[i] = c.results[i]
			}
		}
	}
	w := 0
	for w < len(buf) && buf[w].Key != "" {
		w++
	}
	for i := w + 1; i < len(buf); i++ { // only when something was removed
		if buf[i].Key != "" {
			buf[w] = buf[i]
			if owners := c.owners(); owners != nil {
				owners[w] = owners[i]
			}
			w++
		}
	}
	clear(buf[w:])
	if owners := c.owners(); owners != nil {
		clear(owners[w:])
		c.x.owners = owners[:w]
	}
	return buf[:w]
}

// appendResult appends in, added by handler e, to the consolidated array
// buf, and records who added it once the array holds a termination entry
// (until then nobody asks, and a chain need not pay for it).
func (c *chain) appendResult(buf []pmix.Info, in pmix.Info, e *entry) []pmix.Info {
	if c.owners() == nil && decisionOf(&in) != Undecided {
		c.rare().owners = make([]*entry, len(buf), cap(buf))
	}
	if owners := c.owners(); owners != nil {
		c.x.owners = append(owners, e)
	}
	if isPinned(&in) {
		c.rare().pinned++ // never removed, so the count only grows
	}
	return append(buf, in)
}

// owners returns who added each consolidated result (chainRare.owners),
// nil while no termination entry was added.
func (c *chain) owners() []*entry {
	if c.x == nil {
		return nil
	}
	return c.x.owners
}

// termination reads the chain's termination decision from its consolidated
// results: each true NO_ or WANT_TERMINATION entry, in array order,
// overrides the decision so far, and a required WANT_TERMINATION is final.
func (c *chain) termination() Termination {
	var t Termination
	for i := range c.results {
		in := &c.results[i]
		d := decisionOf(in)
		if d == Undecided {
			continue
		}
		t = Termination{Decision: d, Required: isPinned(in)}
		if owners := c.owners(); owners != nil && owners[i] != nil {
			t.By, t.ByName = owners[i].id, owners[i].name
		}
		if t.Required {
			break
		}
	}
	return t
}

// decisionOf is the decision a results entry states, if any.
func decisionOf(in *pmix.Info) Decision {
	switch in.Key {
	case pmix.KeyEventWantTermination:
		if flagSet(*in) {
			return WantTermination
		}
	case pmix.KeyEventNoTermination:
		if flagSet(*in) {
			return NoTermination
		}
	}
	return Undecided
}

// isPinned reports a required WANT_TERMINATION entry: RFC0018 lets later
// handlers override a WANT_TERMINATION "unless the PMIX_INFO_REQD directive
// is set", so none may edit or remove it.
func isPinned(in *pmix.Info) bool {
	return in.IsRequired() && in.Key == pmix.KeyEventWantTermination && flagSet(*in)
}
