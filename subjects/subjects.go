package subjects

import (
	"slices"
	"strconv"
	"strings"

	"github.com/pmixbus/pmixbus/pmix"
)

const (
	// Prefix begins every job event subject.
	Prefix = "pmix.evt"
	// EnvPrefix begins every environment event subject. Environment events
	// have a root of their own, so that a registration for job events only
	// (a default handler's wildcard among them) never draws environment
	// events to its agent: RFC0002 delivers those only on request.
	EnvPrefix   = "pmix.env"
	globalToken = "global"
)

// Kind names the place a scope's events go.
type Kind string

// Scope kinds; each is the token after the cluster in the subject.
const (
	KindRM        Kind = "rm"
	KindNode      Kind = "node"
	KindNamespace Kind = "ns"
	KindSession   Kind = "sess"
	KindAgent     Kind = "agent"
	KindGlobal    Kind = "global"
)

// Target names where an event goes: the fields a range needs. Names are
// given raw; this package escapes them.
type Target struct {
	Cluster string // every range but GLOBAL
	Node    string // LOCAL; CUSTOM: the hosting agent's node
	Nspace  string // NAMESPACE
	Session string // SESSION
}

// Scope is a subject prefix without the code token: the set of subjects an
// event of one range and target goes to, for job events or (Environment)
// for environment events. The zero Scope is invalid.
type Scope struct {
	kind   Kind
	env    bool
	prefix string // e.g. "pmix.evt.A.ns.job1"
	target Target
}

// Kind returns the scope's kind.
func (s Scope) Kind() Kind { return s.kind }

// Environment returns the scope of environment events with the same range
// and target: the same subject under EnvPrefix. Environment events obey
// their data range exactly as job events do (RFC0018).
func (s Scope) Environment() Scope {
	if s.env {
		return s
	}
	s.env = true
	s.prefix = EnvPrefix + strings.TrimPrefix(s.prefix, Prefix)
	return s
}

// IsEnvironment reports whether the scope carries environment events.
func (s Scope) IsEnvironment() bool { return s.env }

// Target returns the names the scope was built from.
func (s Scope) Target() Target { return s.target }

// Prefix returns the subject prefix, without the trailing code token.
func (s Scope) Prefix() string { return s.prefix }

// String is the prefix.
func (s Scope) String() string { return s.prefix }

// Subject returns the subject of an event with this code: the subject the
// event cache captures.
func (s Scope) Subject(code pmix.Status) string {
	return s.prefix + "." + CodeToken(code)
}

// TransientSubject returns the subject of an event with this code that must
// not be cached (PMIX_EVENT_DO_NOT_CACHE): Subject followed by the token
// "nc", which the cache streams do not capture.
func (s Scope) TransientSubject(code pmix.Status) string {
	return s.prefix + "." + CodeToken(code) + "." + TransientToken
}

// TransientToken ends the subject of an event that must not be cached.
const TransientToken = "nc"

// Patterns returns the subscription subjects for a registration: for each
// code its subject and its transient subject, or the scope's wildcard when
// codes is empty (a default registration). Duplicate codes give one pair.
func (s Scope) Patterns(codes []pmix.Status) []string {
	if len(codes) == 0 {
		return []string{s.Wildcard()}
	}
	out := make([]string, 0, 2*len(codes))
	seen := make(map[pmix.Status]bool, len(codes))
	for _, c := range codes {
		if !seen[c] {
			seen[c] = true
			out = append(out, s.Subject(c), s.TransientSubject(c))
		}
	}
	return out
}

// TransientPatterns returns the subscription subjects for a registration's
// transient events alone (those the cache does not hold): each code's
// TransientSubject, or every code's when codes is empty.
func (s Scope) TransientPatterns(codes []pmix.Status) []string {
	if len(codes) == 0 {
		return []string{s.prefix + ".*." + TransientToken}
	}
	out := make([]string, 0, len(codes))
	seen := make(map[pmix.Status]bool, len(codes))
	for _, c := range codes {
		if !seen[c] {
			seen[c] = true
			out = append(out, s.TransientSubject(c))
		}
	}
	return out
}

// Wildcard is the subject matching every event in the scope, cached or
// not: the prefix followed by ">".
func (s Scope) Wildcard() string { return s.prefix + ".>" }

// CachedWildcard matches the scope's cached events only: the prefix
// followed by "*". The event cache streams capture these.
func (s Scope) CachedWildcard() string { return s.prefix + ".*" }

// CodeToken formats a status as the code token: its decimal value.
func CodeToken(code pmix.Status) string { return strconv.Itoa(int(code)) }

// RM is the scope of PMIX_RANGE_RM events of a cluster: its host RM.
func RM(cluster string) Scope { return clusterScope(KindRM, cluster, "", Target{Cluster: cluster}) }

// Node is the scope of PMIX_RANGE_LOCAL events on one node.
func Node(cluster, node string) Scope {
	return clusterScope(KindNode, cluster, node, Target{Cluster: cluster, Node: node})
}

// Namespace is the scope of PMIX_RANGE_NAMESPACE events for one nspace.
func Namespace(cluster, nspace string) Scope {
	return clusterScope(KindNamespace, cluster, nspace, Target{Cluster: cluster, Nspace: nspace})
}

// Session is the scope of PMIX_RANGE_SESSION events for one session.
func Session(cluster, session string) Scope {
	return clusterScope(KindSession, cluster, session, Target{Cluster: cluster, Session: session})
}

// Agent is the scope of PMIX_RANGE_CUSTOM events delivered to the agent on
// one node; the target procs travel in a header.
func Agent(cluster, node string) Scope {
	return clusterScope(KindAgent, cluster, node, Target{Cluster: cluster, Node: node})
}

// Global is the scope of PMIX_RANGE_GLOBAL events, which cross clusters,
// of every origin: its subjects are patterns, for subscriptions and
// filters ("pmix.evt.global.*.-231"). An event is published to the scope
// of its origin, GlobalFrom.
func Global() Scope { return Scope{kind: KindGlobal, prefix: Prefix + "." + globalToken + ".*"} }

// GlobalFrom is the scope of the GLOBAL events published in cluster
// origin: "pmix.evt.global.<origin>". The origin in the subject lets a
// stream take one cluster's GLOBAL events alone (GlobalSourceFilter).
func GlobalFrom(origin string) Scope {
	return Scope{kind: KindGlobal, prefix: Prefix + "." + globalToken + "." + ClusterToken(origin), target: Target{Cluster: origin}}
}

// GlobalSourceFilter selects the cached GLOBAL events, job and
// environment events alike, that cluster origin published: what another
// cluster's events stream sources from origin's.
func GlobalSourceFilter(origin string) string {
	return "pmix.*." + globalToken + "." + ClusterToken(origin) + ".*"
}

func clusterScope(kind Kind, cluster, name string, t Target) Scope {
	p := Prefix + "." + ClusterToken(cluster) + "." + string(kind)
	if kind != KindRM {
		p += "." + EscapeToken(name)
	}
	return Scope{kind: kind, prefix: p, target: t}
}

// ForRange returns the scope a job event of range r goes to. It returns
// ErrBadParam for PROC_LOCAL (never published), for an invalid range, and
// when t lacks a name the range needs. CUSTOM events go to one scope per
// hosting agent: call it once per target node with t.Node set.
func ForRange(r pmix.Range, t Target) (Scope, error) {
	need := func(what, v string) error {
		if v == "" {
			return pmix.Errorf(pmix.ErrBadParam, "%v needs a %s", r, what)
		}
		return nil
	}
	if err := need("cluster", t.Cluster); err != nil {
		return Scope{}, err
	}
	switch r {
	case pmix.RangeRM:
		return RM(t.Cluster), nil
	case pmix.RangeLocal:
		if err := need("node", t.Node); err != nil {
			return Scope{}, err
		}
		return Node(t.Cluster, t.Node), nil
	case pmix.RangeNamespace:
		if err := need("nspace", t.Nspace); err != nil {
			return Scope{}, err
		}
		return Namespace(t.Cluster, t.Nspace), nil
	case pmix.RangeSession:
		if err := need("session", t.Session); err != nil {
			return Scope{}, err
		}
		return Session(t.Cluster, t.Session), nil
	case pmix.RangeCustom:
		if err := need("target node", t.Node); err != nil {
			return Scope{}, err
		}
		return Agent(t.Cluster, t.Node), nil
	case pmix.RangeGlobal:
		return GlobalFrom(t.Cluster), nil
	case pmix.RangeProcLocal:
		return Scope{}, pmix.Errorf(pmix.ErrBadParam, "PMIX_RANGE_PROC_LOCAL events never leave the process")
	}
	return Scope{}, pmix.Errorf(pmix.ErrBadParam, "invalid range %v", r)
}

// ForEvent returns the subject of an event: its range's scope (ForRange),
// under EnvPrefix for an environment event. Errors are ForRange's.
func ForEvent(r pmix.Range, environment bool, t Target, code pmix.Status) (string, error) {
	sc, err := ForRange(r, t)
	if err != nil {
		return "", err
	}
	if environment {
		sc = sc.Environment()
	}
	return sc.Subject(code), nil
}

// Parsed is a subject taken apart by Parse.
type Parsed struct {
	Scope Scope
	Code  pmix.Status
	// Wildcard is true when the code token is "*" or ">" (a subscription
	// pattern).
	Wildcard bool
	// Transient is true for the subject of an event that is not cached.
	Transient bool
}

// Parse takes an event subject (or a subscription pattern with "*" as the
// code) apart. It returns ErrBadParam for anything this package does not
// produce.
func Parse(subject string) (Parsed, error) {
	bad := func(why string) (Parsed, error) {
		return Parsed{}, pmix.Errorf(pmix.ErrBadParam, "subject %q: %s", subject, why)
	}
	if rest, ok := strings.CutPrefix(subject, Prefix+"."); ok {
		return parseScope(subject, rest)
	}
	if rest, ok := strings.CutPrefix(subject, EnvPrefix+"."); ok {
		p, err := parseScope(subject, rest)
		if err != nil {
			return p, err
		}
		p.Scope = p.Scope.Environment()
		return p, nil
	}
	return bad("not under " + Prefix + " or " + EnvPrefix)
}

// parseScope parses rest, the subject after its root.
func parseScope(subject, rest string) (Parsed, error) {
	bad := func(why string) (Parsed, error) {
		return Parsed{}, pmix.Errorf(pmix.ErrBadParam, "subject %q: %s", subject, why)
	}
	var p Parsed
	toks := strings.Split(rest, ".")
	if len(toks) > 1 && toks[len(toks)-1] == TransientToken {
		p.Transient = true
		toks = toks[:len(toks)-1]
	}
	last := toks[len(toks)-1]
	if last == "*" || (last == ">" && !p.Transient) {
		p.Wildcard = true
	} else {
		n, err := strconv.ParseInt(last, 10, 32)
		if err != nil {
			return bad("last token is not a code")
		}
		p.Code = pmix.Status(n)
	}
	toks = toks[:len(toks)-1]
	if toks[0] == globalToken {
		if len(toks) != 2 {
			return bad("want one origin after " + globalToken)
		}
		if toks[1] == "*" {
			p.Scope = Global()
			return p, nil
		}
		origin, err := UnescapeToken(toks[1])
		if err != nil {
			return bad(err.Error())
		}
		p.Scope = GlobalFrom(origin)
		return p, nil
	}
	if len(toks) < 2 {
		return bad("too few tokens")
	}
	cluster, err := UnescapeToken(toks[0])
	if err != nil {
		return bad(err.Error())
	}
	kind := Kind(toks[1])
	switch kind {
	case KindRM:
		if len(toks) != 2 {
			return bad("unexpected tokens after " + string(kind))
		}
		p.Scope = RM(cluster)
		return p, nil
	case KindNode, KindNamespace, KindSession, KindAgent:
		if len(toks) != 3 {
			return bad("want one name after " + string(kind))
		}
		name, err := UnescapeToken(toks[2])
		if err != nil {
			return bad(err.Error())
		}
		p.Scope = map[Kind]func(string, string) Scope{KindNode: Node, KindNamespace: Namespace, KindSession: Session, KindAgent: Agent}[kind](cluster, name)
		return p, nil
	}
	return bad("unknown scope kind " + strconv.Quote(string(kind)))
}

// CopyPrefix begins the subjects of the copies a cluster's events stream
// makes of what it stores: "pmix.copy.", the token of the cluster whose
// events stream made the copy, and the event's subject without its leading
// "pmix." ("pmix.copy.A.evt.A.ns.job1.-201", "pmix.copy.A.env.global.-231").
// Nobody publishes them: the events stream republishes every event it
// stores there (CopyTransform), in storing order, with its stream sequence,
// so the agents of the cluster take their cached events from them
// (docs/cache.md) and the job-events stream captures the job events'. The
// copies stay in the cluster's domain: only its agents subscribe to them.
const CopyPrefix = "pmix.copy"

// JobCachePrefix is CopyPrefix: a job event's copy is the one the
// job-events stream keeps.
const JobCachePrefix = CopyPrefix

// CopySubject returns the copy, made by cluster's events stream, of an
// event subject (or pattern).
func CopySubject(cluster, subject string) string {
	return CopyPrefix + "." + ClusterToken(cluster) + "." + strings.TrimPrefix(subject, "pmix.")
}

// JobCacheSubject returns the job-events copy, in cluster's job-events
// stream, of a job event subject (or pattern): its CopySubject.
func JobCacheSubject(cluster, subject string) string { return CopySubject(cluster, subject) }

// CopyPattern matches every copy cluster's events stream makes.
func CopyPattern(cluster string) string { return CopyPrefix + "." + ClusterToken(cluster) + ".>" }

// CopyTransform returns the subject transform by which cluster's events
// stream republishes every event it stores: each subject to its
// CopySubject.
func CopyTransform(cluster string) (from, to string) {
	return "pmix.>", CopyPattern(cluster)
}

// JobCopyTransform is CopyTransform (the job-events stream captures the
// job events' copies among them).
func JobCopyTransform(cluster string) (from, to string) { return CopyTransform(cluster) }

// EventSubject reverses CopySubject; other subjects come back as they
// are.
func EventSubject(subject string) string {
	if rest, ok := strings.CutPrefix(subject, CopyPrefix+"."); ok {
		if _, ev, ok := strings.Cut(rest, "."); ok {
			return "pmix." + ev
		}
	}
	return subject
}

// CacheSubjects returns what a cluster's event cache captures: all, the
// cached subjects of every scope of the cluster (node, nspace, session,
// agent) and the global one, for job events and for environment events,
// for the events stream; jobs, the job-event copies (JobCacheSubject) of
// the job scopes, for the job-events stream. The two never overlap, as
// JetStream requires within a domain. RM-range and transient
// (PMIX_EVENT_DO_NOT_CACHE) events are not captured.
//
// The events stream captures the cluster's own GLOBAL events alone, the
// other clusters' being sourced from their clusters' streams
// (GlobalSourceFilter); the job-events stream captures the copies of
// every origin's.
func CacheSubjects(cluster string) (all, jobs []string) {
	c := ClusterToken(cluster) + "."
	scopes := []string{
		c + string(KindNode) + ".*.*",
		c + string(KindNamespace) + ".*.*",
		c + string(KindSession) + ".*.*",
		c + string(KindAgent) + ".*.*",
	}
	stored := append(slices.Clone(scopes), globalToken+"."+c+"*")
	for _, s := range append(scopes, globalToken+".*.*") {
		jobs = append(jobs, JobCacheSubject(cluster, Prefix+"."+s))
	}
	for _, root := range []string{Prefix, EnvPrefix} {
		for _, s := range stored {
			all = append(all, root+"."+s)
		}
	}
	return all, jobs
}

// CachedPatterns returns the filters that select a registration's cached
// events in scope s: each code's subject, or the cached wildcard.
func (s Scope) CachedPatterns(codes []pmix.Status) []string {
	if len(codes) == 0 {
		return []string{s.CachedWildcard()}
	}
	out := make([]string, 0, len(codes))
	for _, c := range codes {
		out = append(out, s.Subject(c))
	}
	return out
}

// Covers reports whether a client of scope s takes the events published
// to scope published: the same scope, or, for GLOBAL, published in any
// origin (Global's prefix is a pattern over GlobalFrom's).
func (s Scope) Covers(published Scope) bool {
	return s.prefix == published.prefix || Match(s.prefix, published.prefix)
}

// Match reports whether subject matches a subscription pattern, with NATS's
// wildcards: "*" for one token, ">" for one or more at the end.
func Match(pattern, subject string) bool {
	return MatchTokens(strings.Split(pattern, "."), strings.Split(subject, "."))
}

// MatchTokens is Match on subjects already split into tokens.
func MatchTokens(pattern, subject []string) bool {
	for i, p := range pattern {
		if p == ">" {
			return len(subject) > i
		}
		if i >= len(subject) || (p != "*" && p != subject[i]) {
			return false
		}
	}
	return len(pattern) == len(subject)
}
