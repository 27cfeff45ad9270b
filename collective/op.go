package collective

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// Kind names an operation; it is part of the signature, so a fence and a
// connect of the same participants are different operations.
type Kind string

// Operations of the engine.
const (
	KindFence Kind = "fence"
	// KindConnect is RFC0003's PMIx_Connect: the release assigns the
	// members a new nspace and each a new rank.
	KindConnect Kind = "connect"
	// KindConnectXchg is a connect with PMIX_CONNECT_XCHG_ONLY: no new
	// nspace. A kind of its own, so that participants that disagree on it
	// never complete one operation.
	KindConnectXchg Kind = "connect-xchg"
	// KindDisconnect is RFC0003's PMIx_Disconnect: every member of a
	// connect's new nspace leaves it (Service.Disconnect).
	KindDisconnect Kind = "disconnect"
)

// Prefix begins every collective subject.
const Prefix = "pmix.coll"

// op is an operation as every participant names it: its kind, its id and
// its participants, qualified "cluster:nspace", WILDCARD absorbing the
// explicit ranks of its nspace, sorted by nspace then rank.
type op struct {
	kind  Kind
	id    string
	procs []pmix.Proc
}

// canonical qualifies, de-duplicates and sorts procs. An unqualified
// nspace is one of cluster self.
func canonical(self cluster.ID, procs []pmix.Proc) ([]pmix.Proc, error) {
	return canonicalBy(procs, func(p pmix.Proc) (pmix.Proc, error) { return qualify(self, p) })
}

// canonicalBy is canonical with the nspaces qualified by q.
func canonicalBy(procs []pmix.Proc, q func(pmix.Proc) (pmix.Proc, error)) ([]pmix.Proc, error) {
	if len(procs) == 0 {
		return nil, pmix.Errorf(pmix.ErrBadParam, "no participants")
	}
	out := make([]pmix.Proc, 0, len(procs))
	wild := map[string]bool{}
	for _, p := range procs {
		qp, err := q(p)
		if err != nil {
			return nil, err
		}
		if qp.Rank == pmix.RankWildcard {
			wild[qp.Nspace] = true
		}
		out = append(out, qp)
	}
	out = slices.DeleteFunc(out, func(p pmix.Proc) bool { return p.Rank != pmix.RankWildcard && wild[p.Nspace] })
	slices.SortFunc(out, pmix.CompareProcs)
	return slices.Compact(out), nil
}

// qualify names p's nspace "cluster:nspace", checking the rank and the
// cluster.
func qualify(self cluster.ID, p pmix.Proc) (pmix.Proc, error) {
	if !p.Rank.Valid() && p.Rank != pmix.RankWildcard {
		return pmix.Proc{}, pmix.Errorf(pmix.ErrBadParam, "participant %v: want a rank or WILDCARD", p)
	}
	id, ns, qualified := cluster.Split(p.Nspace)
	if !qualified {
		id = self
	} else if err := id.Validate(); err != nil {
		return pmix.Proc{}, pmix.Errorf(pmix.ErrBadParam, "participant %v: %v", p, err)
	}
	if ns == "" || len(ns) > pmix.MaxNspaceLen {
		return pmix.Proc{}, pmix.Errorf(pmix.ErrBadParam, "participant %v: nspace of %d bytes", p, len(ns))
	}
	return pmix.Proc{Nspace: cluster.Qualify(id, ns), Rank: p.Rank}, nil
}

// signature is the operation's name on NATS: a hash of kind, id and
// participants, 32 hex digits (128 bits).
func (o op) signature() string { return signatureOf(o.appendKey(make([]byte, 0, 64))) }

// signatureOf is the signature of an operation's appendKey.
func signatureOf(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:16])
}

// sigCache remembers the signatures of the operations named lately: each
// local participant names its operation, and hashing it for each was 3.6%
// of a fence of 1024 processes' CPU on 8 agents. It forgets all once the
// names it holds pass sigCacheBytes.
type sigCache struct {
	mu    sync.Mutex
	sigs  map[string]string // by appendKey
	bytes int
}

const sigCacheBytes = 1 << 20

func (c *sigCache) of(o op) string {
	var buf [128]byte
	key := o.appendKey(buf[:0])
	c.mu.Lock()
	sig, ok := c.sigs[string(key)]
	c.mu.Unlock()
	if ok {
		return sig
	}
	sig = signatureOf(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sigs == nil || c.bytes+len(key) > sigCacheBytes {
		c.sigs, c.bytes = map[string]string{}, 0
	}
	c.sigs[string(key)] = sig
	c.bytes += len(key)
	return sig
}

// appendKey appends what signature hashes: each of kind, id and the
// participants' nspaces as its length (8 bytes) and its bytes, each rank
// as 8 bytes.
func (o op) appendKey(b []byte) []byte {
	field := func(s string) {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	field(string(o.kind))
	field(o.id)
	for _, p := range o.procs {
		field(p.Nspace)
		b = binary.BigEndian.AppendUint64(b, uint64(p.Rank))
	}
	return b
}

// leader is the nspace whose lead agent coordinates the operation: the
// first participant's, split into its cluster and nspace.
func (o op) leader() (cluster.ID, string) {
	id, ns, _ := cluster.Split(o.procs[0].Nspace)
	return id, ns
}

// LeadSubject is where the contributions to operations led by nspace of
// cluster go: the agent hosting the nspace's lowest rank subscribes.
func LeadSubject(c cluster.ID, nspace string) string {
	return Prefix + ".lead." + subjects.ClusterToken(string(c)) + "." + subjects.EscapeToken(nspace)
}

// ReleaseSubject is where the one release of an operation goes: every
// participating agent subscribes while it takes part.
func ReleaseSubject(signature string) string { return Prefix + "." + signature + ".rel" }

// lowestRank returns the lowest rank of a job and its node.
func lowestRank(ranks map[pmix.Rank]string) (pmix.Rank, string, bool) {
	if len(ranks) == 0 {
		return 0, "", false
	}
	low := pmix.Rank(math.MaxUint32)
	for r := range ranks {
		low = min(low, r)
	}
	return low, ranks[low], true
}

// TimeoutOf reads PMIX_TIMEOUT: whole seconds of any integer type, 0 for
// none.
//
// Errors: pmix.ErrBadParam for a value that is not a non-negative integer.
func TimeoutOf(infos []pmix.Info) (time.Duration, error) {
	v, ok := pmix.LookupValue(infos, pmix.KeyTimeout)
	if !ok {
		return 0, nil
	}
	n, isInt := v.Int()
	if !isInt || n < 0 || n > math.MaxInt32 {
		return 0, pmix.Errorf(pmix.ErrBadParam, "%s: want seconds as a non-negative integer, got %s", pmix.KeyTimeout, v)
	}
	return time.Duration(n) * time.Second, nil
}
