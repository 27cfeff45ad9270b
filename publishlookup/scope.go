package publishlookup

import (
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// A scope is where one published key lives: a bucket and a KV key. The KV
// key names the range and who the range is relative to, then the PMIx key,
// every name escaped with subjects.EscapeToken:
//
//	LOCAL      local bucket   l.<node>.<key>
//	NAMESPACE  local bucket   n.<nspace>.<key>
//	SESSION    local bucket   s.<session>.<key>
//	CUSTOM     local bucket   c.<key>   every listed proc is in the publisher's cluster
//	CUSTOM     global bucket  c.<key>   some listed proc is in another cluster
//	GLOBAL     global bucket  g.<key>
//
// Two publications collide (PMIX_ERR_DUPLICATE_KEY) exactly when they have
// the same scope. The local bucket is the cluster's own, so its nodes,
// nspaces and sessions need no cluster in the key.
type scope struct {
	kv    jetstream.KV
	key   string // the KV key
	rng   pmix.Range
	order int // precedence in a lookup: lower wins
}

// Scope prefixes of the KV keys.
const (
	prefixLocal     = "l."
	prefixNamespace = "n."
	prefixSession   = "s."
	prefixCustom    = "c."
	prefixGlobal    = "g."
)

// publishScope returns where p's publication of key at rng goes. custom is
// the list of a CUSTOM range.
func (s *Service) publishScope(p Identity, rng pmix.Range, custom []pmix.Proc, key string) scope {
	k := subjects.EscapeToken(key)
	switch rng {
	case pmix.RangeLocal:
		return scope{kv: s.cfg.Local, key: prefixLocal + subjects.EscapeToken(p.Node) + "." + k, rng: rng}
	case pmix.RangeNamespace:
		return scope{kv: s.cfg.Local, key: prefixNamespace + subjects.EscapeToken(p.Proc.Nspace) + "." + k, rng: rng}
	case pmix.RangeSession:
		return scope{kv: s.cfg.Local, key: prefixSession + subjects.EscapeToken(p.Session) + "." + k, rng: rng}
	case pmix.RangeCustom:
		if allIn(p.Cluster, custom) {
			return scope{kv: s.cfg.Local, key: prefixCustom + k, rng: rng}
		}
		return scope{kv: s.cfg.Global, key: prefixCustom + k, rng: rng}
	}
	return scope{kv: s.cfg.Global, key: prefixGlobal + k, rng: pmix.RangeGlobal}
}

// lookupScopes returns every scope where a publication that q can see may
// live, narrowest first: the value of the narrowest scope that q may read
// wins a lookup. Scopes that are the same bucket and key appear once.
func (s *Service) lookupScopes(q Identity, key string) []scope {
	all := []scope{
		s.publishScope(q, pmix.RangeLocal, nil, key),
		s.publishScope(q, pmix.RangeNamespace, nil, key),
		s.publishScope(q, pmix.RangeSession, nil, key),
		{kv: s.cfg.Local, key: prefixCustom + subjects.EscapeToken(key), rng: pmix.RangeCustom},
		{kv: s.cfg.Global, key: prefixCustom + subjects.EscapeToken(key), rng: pmix.RangeCustom},
		s.publishScope(q, pmix.RangeGlobal, nil, key),
	}
	out := all[:0]
	for i, sc := range all {
		sc.order = i
		dup := false
		for _, o := range out {
			dup = dup || o.kv == sc.kv && o.key == sc.key
		}
		if !dup {
			out = append(out, sc)
		}
	}
	return out
}

// allIn reports whether every proc is in cluster id: unqualified, or
// qualified with id.
func allIn(id cluster.ID, procs []pmix.Proc) bool {
	for _, p := range procs {
		if _, ok := id.Local(p.Nspace); !ok {
			return false
		}
	}
	return true
}

// inRange reports whether subject is within range rng as seen from anchor
// (PMIx data ranges):
//
//   - LOCAL: on the anchor's node;
//   - NAMESPACE: in the anchor's nspace;
//   - SESSION: in the anchor's session;
//   - CUSTOM: one of the procs listed, which name the anchor's cluster
//     unless qualified "cluster:nspace" (PMIX_RANK_WILDCARD for any rank);
//   - GLOBAL, or no range: anyone, in any cluster.
//
// Nodes, nspaces and sessions belong to a cluster: the same name in another
// cluster is another node, nspace or session.
func inRange(anchor Identity, rng pmix.Range, custom []pmix.Proc, subject Identity) bool {
	same := anchor.Cluster == subject.Cluster
	switch rng {
	case pmix.RangeLocal:
		return same && anchor.Node == subject.Node
	case pmix.RangeNamespace:
		return same && anchor.Proc.Nspace == subject.Proc.Nspace
	case pmix.RangeSession:
		return same && anchor.Session == subject.Session
	case pmix.RangeCustom:
		for _, p := range custom {
			id, ns, qualified := cluster.Split(p.Nspace)
			if !qualified {
				id = anchor.Cluster
			}
			if id == subject.Cluster && (pmix.Proc{Nspace: ns, Rank: p.Rank}).Matches(subject.Proc) {
				return true
			}
		}
		return false
	case pmix.RangeGlobal, pmix.RangeUndef:
		return true
	}
	return false
}

// visible reports whether q, looking up at range rng (with the CUSTOM list
// custom), may see r: the range is checked both ways. The publisher must be
// in q's range, and q in the publisher's.
func visible(r *record, q Identity, rng pmix.Range, custom []pmix.Proc) bool {
	return inRange(q, rng, custom, r.Publisher) && inRange(r.Publisher, r.Range, r.Custom, q)
}
