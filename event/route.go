package event

import (
	"fmt"
	"strconv"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// Place is where an agent runs: its cluster and node.
type Place struct {
	Cluster cluster.ID
	Node    string
}

// Sender is the local client that notified an event, as its agent
// authenticated it. A host RM's events have no Sender (nil).
type Sender struct {
	Proc    pmix.Proc
	Session string
}

// Jobs is what routing needs of an agent's job table: where the ranks of
// the jobs it knows run.
type Jobs interface {
	// Nodes returns the nodes that host rank of nspace, every node of the
	// job for pmix.RankWildcard; known is false for a job the agent does
	// not know. A known job without that rank gives no nodes.
	Nodes(nspace string, rank pmix.Rank) (nodes []string, known bool)
}

// Spans is what routing needs of a job table that holds jobs running on
// several clusters (an MPMD job across clusters: one nspace, its ranks on
// the agents of each). Such a job's nodes of other clusters are named
// "cluster:node" by Jobs.Nodes.
type Spans interface {
	// OtherClusters returns the clusters but the agent's that nspace runs
	// on, nil for a job of one cluster: its NAMESPACE events are
	// published on each cluster's nspace scope too.
	OtherClusters(nspace string) []cluster.ID
}

// Scopes resolves the data range of m, sent from the agent at `at` by
// `from` (nil: the host RM), to the scopes it is published on. Job and
// environment events follow the same rules (RFC0018: delivery is governed
// by the range the generator gave); an environment event's scopes are the
// environment twins (subjects.Scope.Environment), which only agents whose
// clients registered for environment events of the code subscribe to
// (RFC0002).
//
//   - RM: the cluster's host RM.
//   - LOCAL: the sender's node; for the host RM, the node named by
//     pmix.KeyHostname, or its own.
//   - NAMESPACE: the sender's nspace; for the host RM, pmix.KeyNspace or the
//     one nspace of the affected procs; "cluster:nspace" names another
//     cluster's. A job that runs on several clusters (jobs implements
//     Spans) has the scope of its nspace on each.
//   - SESSION: the sender's session; for the host RM, pmix.KeySessionID.
//   - CUSTOM: pmix.KeyEventCustomRange's procs, copied to m.Targets; one
//     scope per agent hosting a target of a job that jobs knows, and the
//     nspace scope of any other target (another cluster's, say), whose
//     agents pick the targets.
//   - GLOBAL: every cluster.
//
// jobs may be nil (a tool with no job table). Errors: pmix.ErrBadParam for
// PROC_LOCAL, an invalid range, a missing target (see MissingTarget), a
// target name over subjects.MaxNameLen, or a CUSTOM target rank its job
// does not have.
func Scopes(at Place, m *Message, from *Sender, jobs Jobs) ([]subjects.Scope, error) {
	out, err := jobScopes(at, m, from, jobs)
	if err != nil || !m.Environment {
		return out, err
	}
	for i := range out {
		out[i] = out[i].Environment()
	}
	return out, nil
}

func jobScopes(at Place, m *Message, from *Sender, jobs Jobs) ([]subjects.Scope, error) {
	if keys := MissingTarget(m, from); keys != nil {
		return nil, pmix.Errorf(pmix.ErrBadParam, "a %v event needs %s", m.Range, orList(keys))
	}
	c := string(at.Cluster)
	switch m.Range {
	case pmix.RangeRM:
		return []subjects.Scope{subjects.RM(c)}, nil
	case pmix.RangeGlobal:
		return []subjects.Scope{subjects.GlobalFrom(c)}, nil
	case pmix.RangeLocal:
		node := at.Node
		if from == nil {
			if s := str(m.Info, pmix.KeyHostname); s != "" {
				node = s
			}
		}
		if err := subjects.CheckName("hostname", node); err != nil {
			return nil, err
		}
		return []subjects.Scope{subjects.Node(c, node)}, nil
	case pmix.RangeNamespace:
		if from != nil {
			return spanning(jobs, from.Proc.Nspace, subjects.Namespace(c, from.Proc.Nspace)), nil
		}
		ns := targetNspace(m.Info)
		sc, err := nspaceScope(at.Cluster, ns)
		if err != nil {
			return nil, err
		}
		if _, _, q := cluster.Split(ns); q {
			return []subjects.Scope{sc}, nil
		}
		return spanning(jobs, ns, sc), nil
	case pmix.RangeSession:
		if from != nil {
			return []subjects.Scope{subjects.Session(c, from.Session)}, nil
		}
		session := sessionOf(m.Info)
		if err := subjects.CheckName("session", session); err != nil {
			return nil, err
		}
		return []subjects.Scope{subjects.Session(c, session)}, nil
	case pmix.RangeCustom:
		return customScopes(at, m, jobs)
	case pmix.RangeProcLocal:
		return nil, pmix.Errorf(pmix.ErrBadParam, "PMIX_RANGE_PROC_LOCAL events never leave their process")
	}
	return nil, pmix.Errorf(pmix.ErrBadParam, "invalid range %v", m.Range)
}

// spanning is sc, the scope of this cluster's job nspace, and the same
// scope on every other cluster the job runs on.
func spanning(jobs Jobs, nspace string, sc subjects.Scope) []subjects.Scope {
	out := []subjects.Scope{sc}
	if sp, ok := jobs.(Spans); ok {
		for _, c := range sp.OtherClusters(nspace) {
			out = append(out, subjects.Namespace(string(c), nspace))
		}
	}
	return out
}

// MissingTarget reports what the range of m, notified by from (nil: the
// host RM), needs that m's info lacks: the attribute keys any one of which
// would do, or nil. A client's NAMESPACE, SESSION and LOCAL events take
// their target from the client itself; the host RM must name it.
func MissingTarget(m *Message, from *Sender) []string {
	switch m.Range {
	case pmix.RangeNamespace:
		if from == nil && targetNspace(m.Info) == "" {
			return []string{pmix.KeyNspace, pmix.KeyEventAffectedProc, pmix.KeyEventAffectedProcs}
		}
	case pmix.RangeSession:
		if (from == nil && sessionOf(m.Info) == "") || (from != nil && from.Session == "") {
			return []string{pmix.KeySessionID}
		}
	case pmix.RangeCustom:
		if v, ok := pmix.LookupValue(m.Info, pmix.KeyEventCustomRange); !nonEmptyProcs(v, ok) {
			return []string{pmix.KeyEventCustomRange}
		}
	}
	return nil
}

func nonEmptyProcs(v pmix.Value, ok bool) bool {
	if !ok {
		return false
	}
	ps, ok := v.Procs()
	return ok && len(ps) > 0
}

func orList(keys []string) string {
	s := keys[0]
	for i, k := range keys[1:] {
		if i == len(keys)-2 {
			s += " or " + k
		} else {
			s += ", " + k
		}
	}
	return s
}

func str(info []pmix.Info, key string) string {
	if v, ok := pmix.LookupValue(info, key); ok {
		if s, ok := v.Str(); ok {
			return s
		}
	}
	return ""
}

func sessionOf(info []pmix.Info) string {
	v, ok := pmix.LookupValue(info, pmix.KeySessionID)
	if !ok {
		return ""
	}
	if s, ok := v.Str(); ok {
		return s
	}
	if n, ok := v.Int(); ok {
		return strconv.FormatInt(n, 10)
	}
	return ""
}

// nspaceScope is the namespace scope of a possibly cluster-qualified nspace.
// It returns pmix.ErrBadParam for an nspace too long to be a subject token.
func nspaceScope(self cluster.ID, ns string) (subjects.Scope, error) {
	id, local, q := cluster.Split(ns)
	if !q {
		id, local = self, ns
	}
	if err := subjects.CheckName("nspace", local); err != nil {
		return subjects.Scope{}, err
	}
	return subjects.Namespace(string(id), local), nil
}

// targetNspace is the nspace a host RM's NAMESPACE event names: KeyNspace,
// or the one nspace of its affected procs.
func targetNspace(info []pmix.Info) string {
	if s := str(info, pmix.KeyNspace); s != "" {
		return s
	}
	var procs []pmix.Proc
	if v, ok := pmix.LookupValue(info, pmix.KeyEventAffectedProcs); ok {
		procs, _ = v.Procs()
	} else if v, ok := pmix.LookupValue(info, pmix.KeyEventAffectedProc); ok {
		procs, _ = v.Procs()
	}
	ns := ""
	for _, p := range procs {
		if ns != "" && p.Nspace != ns {
			return ""
		}
		ns = p.Nspace
	}
	return ns
}

func customScopes(at Place, m *Message, jobs Jobs) ([]subjects.Scope, error) {
	v, _ := pmix.LookupValue(m.Info, pmix.KeyEventCustomRange)
	targets, _ := v.Procs()
	m.Targets = targets
	c := string(at.Cluster)
	seen := map[string]bool{}
	var out []subjects.Scope
	add := func(sc subjects.Scope) {
		if !seen[sc.Prefix()] {
			seen[sc.Prefix()] = true
			out = append(out, sc)
		}
	}
	for i, t := range targets {
		lt := LocalProc(at.Cluster, t)
		var nodes []string
		known := false
		if _, _, q := cluster.Split(lt.Nspace); !q && jobs != nil {
			nodes, known = jobs.Nodes(lt.Nspace, lt.Rank)
		}
		if sp, ok := jobs.(Spans); ok && known && len(sp.OtherClusters(lt.Nspace)) > 0 {
			// A job across clusters is named alike on each of them:
			// unqualified, the target is its proc wherever it arrives.
			targets[i] = lt
		}
		if !known {
			sc, err := nspaceScope(at.Cluster, t.Nspace)
			if err != nil {
				return nil, fmt.Errorf("custom range target: %w", err)
			}
			add(sc)
			continue
		}
		if len(nodes) == 0 {
			return nil, pmix.Errorf(pmix.ErrBadParam, "custom range target %v: job %s has no such rank", t, lt.Nspace)
		}
		for _, n := range nodes {
			if id, node, remote := cluster.Split(n); remote {
				add(subjects.Agent(string(id), node)) // a job across clusters
				continue
			}
			add(subjects.Agent(c, n))
		}
	}
	return out, nil
}

// LocalProc strips cluster self's qualifier from a proc's nspace; procs of
// other clusters keep theirs.
func LocalProc(self cluster.ID, p pmix.Proc) pmix.Proc {
	if id, ns, q := cluster.Split(p.Nspace); q && id == self {
		p.Nspace = ns
	}
	return p
}

// ClientScopes are the scopes through which events reach a client of job
// nspace (in session, "" for none) on the agent at `at`: its node, its
// nspace, its session, its agent (CUSTOM) and the global scope. Events on
// their environment twins reach it the same way.
func ClientScopes(at Place, nspace, session string) []subjects.Scope {
	c := string(at.Cluster)
	s := []subjects.Scope{
		subjects.Node(c, at.Node),
		subjects.Namespace(c, nspace),
		subjects.Agent(c, at.Node),
		subjects.Global(),
	}
	if session != "" {
		s = append(s, subjects.Session(c, session))
	}
	return s
}

// For reports whether the local client proc (of session) of the agent at
// `at` is among those an event m that arrived on scope sc is for: every
// client for a node, agent or global scope; that nspace's or session's
// clients for theirs; and for CUSTOM only the listed targets. The same
// holds for job and environment events.
func For(at Place, sc subjects.Scope, m *Message, proc pmix.Proc, session string) bool {
	switch sc.Kind() {
	case subjects.KindNamespace:
		if sc.Target().Nspace != proc.Nspace {
			return false
		}
	case subjects.KindSession:
		if sc.Target().Session != session {
			return false
		}
	case subjects.KindNode, subjects.KindAgent:
		// A node's scope is its agent's alone: an agent that takes every
		// cached event of its cluster (the events stream's copies) gets
		// the other nodes' too.
		if sc.Target().Node != at.Node {
			return false
		}
	case subjects.KindRM:
		return false // the host RM's, never a client's
	}
	if m.Range == pmix.RangeCustom {
		for _, t := range m.Targets {
			if LocalProc(at.Cluster, t).Matches(proc) {
				return true
			}
		}
		return false
	}
	return true
}

// BusEvent is m as the chain of a client in cluster self sees it: a source
// proc of another cluster is named cluster:nspace (RFC0003).
func (m *Message) BusEvent(self cluster.ID) bus.Event {
	src := m.Source
	if src.Cluster != string(self) && !src.Proc.IsZero() {
		src.Proc.Nspace = cluster.Qualify(cluster.ID(src.Cluster), src.Proc.Nspace)
	}
	return bus.Event{Code: m.Code, Source: src, Range: m.Range, Environment: m.Environment, Info: m.Info}
}
