package bus

import (
	"strings"

	"github.com/pmixbus/pmixbus/pmix"
)

// filter is what a registration accepts besides its codes.
type filter struct {
	levels   levels
	rng      pmix.Range  // RangeUndef: no source filter
	procs    []pmix.Proc // accepted sources for RangeCustom
	affected []pmix.Proc // empty: no affected-procs filter
}

// levels are PMIX_EVENT_JOB_LEVEL and PMIX_EVENT_ENVIRO_LEVEL as given: an
// explicit false is not the same as an absent attribute.
type levels struct {
	job, env       bool // the values given
	jobSet, envSet bool // whether each was given at all
}

// takes resolves the levels into the kinds of event a registration takes
// (the rule and its reasons are in the package documentation, Filters):
// environment events only if ENVIRO_LEVEL is given true; job events as
// JOB_LEVEL says when it is given, and otherwise unless ENVIRO_LEVEL is
// given true.
func (l levels) takes() (job, env bool) {
	env = l.envSet && l.env
	job = !env
	if l.jobSet {
		job = l.job
	}
	return job, env
}

// takesEvent applies the levels to a job event (environment false) or an
// environment event.
func (l levels) takesEvent(environment bool) bool {
	job, env := l.takes()
	if environment {
		return env
	}
	return job
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
// procs, as seen from cluster (see matchFrom). It scans the event's info
// rather than collecting the procs once per chain: few registrations filter
// on affected procs, and a chain should not allocate for them when none
// does.
func (v *eventView) affects(procs []pmix.Proc, cluster string) bool {
	if !v.hasAffected {
		return false
	}
	for _, in := range v.ev.Info {
		if in.Key != pmix.KeyEventAffectedProc && in.Key != pmix.KeyEventAffectedProcs {
			continue
		}
		if ps, ok := in.Value.Procs(); ok && intersects(procs, ps, cluster) {
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
	if !f.levels.takesEvent(v.ev.Environment) {
		return false
	}
	if f.rng != pmix.RangeUndef && !sourceInRange(f.rng, f.procs, &v.ev.Source, self) {
		return false
	}
	if len(f.affected) > 0 && !v.affects(f.affected, self.Cluster) {
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
			if matchFrom(self.Cluster, p, src.Proc) {
				return true
			}
		}
		return false
	}
	return false
}

func intersects(a, b []pmix.Proc, cluster string) bool {
	for _, p := range a {
		for _, q := range b {
			if matchFrom(cluster, p, q) {
				return true
			}
		}
	}
	return false
}

// clusterSeparator joins a cluster id and an nspace in a multi-cluster name
// (RFC0003: "cluster:nspace"). It is cluster.Separator, which bus may not
// import (DESIGN: bus imports pmix only).
const clusterSeparator = ":"

// matchFrom is pmix.Proc.Matches as seen from cluster: an nspace qualified
// with cluster itself ("A:job" seen from A) names the same job as the bare
// nspace ("job"), which is how an agent names the sources of its own
// cluster. Procs of other clusters stay qualified and match only as
// written.
func matchFrom(cluster string, p, q pmix.Proc) bool {
	return localTo(cluster, p).Matches(localTo(cluster, q))
}

// localTo strips cluster's own qualifier from p's nspace (the first ':' ends
// the cluster id, as in cluster.Split). It does not allocate.
func localTo(cluster string, p pmix.Proc) pmix.Proc {
	if cluster == "" {
		return p
	}
	if ns, ok := strings.CutPrefix(p.Nspace, cluster); ok && strings.HasPrefix(ns, clusterSeparator) {
		p.Nspace = ns[len(clusterSeparator):]
	}
	return p
}
