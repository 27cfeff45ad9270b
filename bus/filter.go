package bus

import "github.com/pmixbus/pmixbus/pmix"

// filter is what a registration accepts besides its codes.
type filter struct {
	jobLevel, enviroLevel bool
	rng                   pmix.Range  // RangeUndef: no source filter
	procs                 []pmix.Proc // accepted sources for RangeCustom
	affected              []pmix.Proc // empty: no affected-procs filter
}

// wantsLevel applies PMIX_EVENT_JOB_LEVEL / PMIX_EVENT_ENVIRO_LEVEL to a job
// event (env false) or an environment event (env true). Given neither, a
// registration takes job events, and environment events only for codes it
// names: RFC0002 makes ENVIRO_LEVEL default to false, but then a
// registration for PMIX_EVENT_NODE_DOWN, an environment event, would never
// see it.
func wantsLevel(cat Category, jobLevel, enviroLevel, env bool) bool {
	switch {
	case jobLevel && enviroLevel:
		return true
	case jobLevel:
		return !env
	case enviroLevel:
		return env
	}
	return !env || cat != CategoryDefault
}

// eventView is what the filters need of an event, read once per chain.
type eventView struct {
	ev          *Event
	nonDefault  bool
	hasAffected bool // the event lists affected procs
}

func newEventView(ev *Event) eventView {
	v := eventView{ev: ev}
	for _, in := range ev.Info {
		switch in.Key {
		case pmix.KeyEventNonDefault:
			v.nonDefault = v.nonDefault || flagSet(in)
		case pmix.KeyEventAffectedProc, pmix.KeyEventAffectedProcs:
			v.hasAffected = true
		}
	}
	return v
}

// affects reports whether one of the event's affected procs matches one of
// procs. It scans the event's info rather than collecting the procs once per
// chain: few registrations filter on affected procs, and a chain should not
// allocate for them when none does.
func (v *eventView) affects(procs []pmix.Proc) bool {
	if !v.hasAffected {
		return false
	}
	for _, in := range v.ev.Info {
		if in.Key != pmix.KeyEventAffectedProc && in.Key != pmix.KeyEventAffectedProcs {
			continue
		}
		if ps, ok := in.Value.Procs(); ok && intersects(procs, ps) {
			return true
		}
	}
	return false
}

// passes reports whether a registration of category cat with filter f, in a
// registry owned by self, accepts the event. The code is checked elsewhere.
func (v *eventView) passes(cat Category, f *filter, self *Origin) bool {
	if cat == CategoryDefault && v.nonDefault {
		return false
	}
	if !wantsLevel(cat, f.jobLevel, f.enviroLevel, v.ev.Environment) {
		return false
	}
	if f.rng != pmix.RangeUndef && !sourceInRange(f.rng, f.procs, &v.ev.Source, self) {
		return false
	}
	if len(f.affected) > 0 && !v.affects(f.affected) {
		return false
	}
	return true
}

// sourceInRange is RFC0018's receiver-level filter: does an event from src
// fall within range rng as seen from self?
func sourceInRange(rng pmix.Range, procs []pmix.Proc, src, self *Origin) bool {
	switch rng {
	case pmix.RangeProcLocal:
		// Only events this process generated. A registry of the host RM
		// (zero Self.Proc, whatever its rank field) must also tell its own
		// events from other RMs'.
		if self.Proc.IsZero() {
			return src.Proc.IsZero() && src.Cluster == self.Cluster && src.Node == self.Node
		}
		return src.Proc == self.Proc
	case pmix.RangeLocal:
		return src.Cluster == self.Cluster && src.Node == self.Node
	case pmix.RangeNamespace:
		return src.Cluster == self.Cluster && src.Proc.Nspace != "" && src.Proc.Nspace == self.Proc.Nspace
	case pmix.RangeSession:
		return src.Cluster == self.Cluster && src.Session != "" && src.Session == self.Session
	case pmix.RangeGlobal:
		return true
	case pmix.RangeRM:
		return src.Proc.IsZero()
	case pmix.RangeCustom:
		if src.Proc.IsZero() {
			return false
		}
		for _, p := range procs {
			if p.Matches(src.Proc) {
				return true
			}
		}
		return false
	}
	return false
}

func intersects(a, b []pmix.Proc) bool {
	for _, p := range a {
		for _, q := range b {
			if p.Matches(q) {
				return true
			}
		}
	}
	return false
}
