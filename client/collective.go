package client

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// putStore is what the process put (PMIx_Put): every value by key, and the
// keys put since the last commit.
type putStore struct {
	mu      sync.Mutex
	values  map[string]proto.Put
	pending map[string]bool
}

// Put stores a value under key for others to read once committed, as
// PMIx_Put does: scope PMIX_LOCAL (procs on this node), PMIX_REMOTE (procs
// on other nodes), PMIX_GLOBAL (all), or PMIX_INTERNAL (this process only;
// never committed). A key put again replaces its value. The process reads
// its own values with Get at once; others, after Commit, on this node, or
// after a fence with PMIX_COLLECT_DATA, elsewhere.
//
// Errors: PMIX_ERR_BAD_PARAM for an empty key or an invalid scope.
func (c *Client) Put(scope pmix.Scope, key string, v pmix.Value) error {
	if key == "" || !scope.Valid() {
		return pmix.Errorf(pmix.ErrBadParam, "put of key %s with scope %v: want a key and a scope LOCAL, REMOTE, GLOBAL or INTERNAL", pmix.Quote(key), scope)
	}
	s := &c.kv
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.values == nil {
		s.values, s.pending = map[string]proto.Put{}, map[string]bool{}
	}
	s.values[key] = proto.Put{Scope: scope, Key: key, Value: v}
	if scope != pmix.ScopeInternal {
		s.pending[key] = true
	}
	return nil
}

// Commit sends what was put since the last commit to the agent, as
// PMIx_Commit does.
//
// Errors: PMIX_ERR_BAD_PARAM; ErrLostConnection; PMIX_ERR_TIMEOUT if ctx
// ends first (the values stay pending, and the next Commit sends them).
func (c *Client) Commit(ctx context.Context) error {
	s := &c.kv
	s.mu.Lock()
	var puts []proto.Put
	for k := range s.pending {
		puts = append(puts, s.values[k])
	}
	clear(s.pending)
	s.mu.Unlock()
	if len(puts) == 0 {
		return nil
	}
	slices.SortFunc(puts, func(a, b proto.Put) int { return cmp.Compare(a.Key, b.Key) })
	_, err := c.request(ctx, &proto.Frame{Type: proto.TypeCommit, Puts: puts})
	if err != nil {
		s.mu.Lock()
		for _, p := range puts {
			if _, again := s.values[p.Key]; again {
				s.pending[p.Key] = true
			}
		}
		s.mu.Unlock()
	}
	return err
}

// Fence waits until every proc of procs has called Fence with the same
// procs, as PMIx_Fence does; no procs means every proc of this process's
// nspace. A proc of another cluster is named "cluster:nspace"; RankWildcard
// stands for every rank of its nspace. Directives: PMIX_COLLECT_DATA
// (bool: everything the participants committed comes with the release, so
// that Get of it is answered at once), PMIX_TIMEOUT (seconds; without it,
// ctx's deadline gives one), and pmixbus's KeyCollectiveID (a string every
// participant gives, to tell apart concurrent fences of the same procs).
// A fence of the whole job without directives, when every rank of the job
// runs on this process's node, is decided by the job's node barrier
// (docs/protocol.md): ctx's deadline then makes this process give up
// alone, its arrival standing, and its next Fence waits for that round to
// complete before it counts.
//
// Errors: PMIX_ERR_TIMEOUT, naming the participants that had not arrived,
// at every participant; PMIX_ERR_INVALID_OPERATION for a latecomer to a
// fence that already ended; PMIX_ERR_BAD_PARAM (this process is not among
// procs, or procs are invalid); ErrLostConnection.
func (c *Client) Fence(ctx context.Context, procs []pmix.Proc, info []pmix.Info) error {
	_, err := c.request(ctx, &proto.Frame{Type: proto.TypeFence, Procs: procs, Info: fenceTimeout(ctx, info)})
	return err
}

// fenceTimeout is timeoutFromDeadline for a fence, with the timeout it
// adds marked as the client's own (pmix.KeyDeadline): a fence the
// application gave no timeout may then still take its job's node barrier,
// as the same fence of a C rank does (docs/protocol.md, "Fence and the
// key-value exchange").
func fenceTimeout(ctx context.Context, info []pmix.Info) []pmix.Info {
	out := timeoutFromDeadline(ctx, info)
	if len(out) == len(info) {
		return info
	}
	return append(out, pmix.NewInfo(pmix.KeyDeadline, pmix.Bool(true)))
}

// FenceCB is the callback form of Fence (PMIx_Fence_nb): it returns at
// once and calls cb from another goroutine.
func (c *Client) FenceCB(procs []pmix.Proc, info []pmix.Info, cb func(error)) {
	c.async(func(ctx context.Context) { cb(c.Fence(ctx, procs, info)) })
}

// Get returns the value of key for proc, as PMIx_Get does: this process's
// own values at once; for RankWildcard, the job-level info of proc's
// nspace; otherwise what proc committed, if its scope lets this process
// see it. The job-level and proc-level info of a job of the agent (job
// size, local rank, node rank, local peers, hostname …: docs/protocol.md,
// "Job-level info") comes with the exact PMIx types, for any rank of the
// job. This process's own job's info and its own proc-level info came at
// attach: a Get of them is answered here, without asking the agent, as
// OpenPMIx's client answers from its cache. Directives: PMIX_OPTIONAL
// (look only in this process: its own values and the info it got at
// attach), PMIX_IMMEDIATE (the agent answers from what it holds),
// PMIX_TIMEOUT (seconds to wait for a value not committed, or not
// collected, yet). A PMIx key ("pmix.") the agent does not have is never
// waited for.
//
// Errors: PMIX_ERR_NOT_FOUND, naming the key and the proc (an unknown
// key, nspace or rank); PMIX_ERR_TIMEOUT when PMIX_TIMEOUT passed first;
// PMIX_ERR_BAD_PARAM; ErrLostConnection.
func (c *Client) Get(ctx context.Context, proc pmix.Proc, key string, info []pmix.Info) (pmix.Value, error) {
	own := proc.Nspace == c.proc.Nspace || proc.Nspace == c.self.Cluster+":"+c.proc.Nspace
	if own && proc.Rank == c.proc.Rank {
		c.kv.mu.Lock()
		p, ok := c.kv.values[key]
		c.kv.mu.Unlock()
		if ok {
			return p.Value, nil
		}
	}
	// Its own proc-level info, and its job's: what a WILDCARD get of a
	// key of one process would not find at the agent is not answered.
	if own && (proc.Rank == c.proc.Rank || (proc.Rank == pmix.RankWildcard && !pmix.ProcLevel(key))) {
		if v, ok := pmix.LookupValue(c.info, key); ok {
			return v, nil
		}
	}
	if pmix.Flag(info, pmix.KeyOptional) {
		return pmix.Value{}, pmix.Errorf(pmix.ErrNotFound, "%s of %v is not in this process (PMIX_OPTIONAL)", pmix.Quote(key), proc)
	}
	r, err := c.request(ctx, &proto.Frame{Type: proto.TypeGet, Source: proc, Keys: []string{key}, Info: info})
	if err != nil {
		return pmix.Value{}, err
	}
	if len(r.Data) != 1 {
		return pmix.Value{}, pmix.Errorf(pmix.ErrCommFailure, "agent answered a get with %d values", len(r.Data))
	}
	return r.Data[0].Value, nil
}

// GetCB is the callback form of Get (PMIx_Get_nb).
func (c *Client) GetCB(proc pmix.Proc, key string, info []pmix.Info, cb func(pmix.Value, error)) {
	c.async(func(ctx context.Context) { cb(c.Get(ctx, proc, key, info)) })
}

// timeoutFromDeadline adds PMIX_TIMEOUT, from ctx's deadline rounded up to
// whole seconds, when info has none: the agent then fails the operation
// for every participant, rather than only this caller giving up.
func timeoutFromDeadline(ctx context.Context, info []pmix.Info) []pmix.Info {
	dl, ok := ctx.Deadline()
	if !ok {
		return info
	}
	if _, given := pmix.Lookup(info, pmix.KeyTimeout); given {
		return info
	}
	secs := max(1, min(math.Ceil(time.Until(dl).Seconds()), math.MaxInt32))
	return append(slices.Clip(info), pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(int32(secs))))
}

// Connect connects procs, as RFC0003's PMIx_Connect does, and returns the
// new nspace the group was given and this process's rank in it. Every
// proc of procs calls Connect with the same procs (RankWildcard: every
// rank of its nspace; "cluster:nspace" for another cluster's) and the
// same PMIX_CONNECT_ID, which tells apart connects of the same procs. The
// new nspace is "cluster:nspace" when the members span clusters; the
// ranks follow the members sorted by "cluster:nspace", then rank.
// Directives: PMIX_CONNECT_ID, PMIX_TIMEOUT (without it, ctx's deadline
// gives one), PMIX_CONNECT_XCHG_ONLY (no new nspace: "" and
// pmix.RankUndef). The notification and termination attributes are not
// implemented yet: PMIX_ERR_NOT_SUPPORTED when given as required, ignored
// otherwise.
//
// Errors: as Fence's.
func (c *Client) Connect(ctx context.Context, procs []pmix.Proc, info []pmix.Info) (string, pmix.Rank, error) {
	r, err := c.request(ctx, &proto.Frame{Type: proto.TypeConnect, Procs: procs, Info: timeoutFromDeadline(ctx, info)})
	if err != nil {
		return "", pmix.RankUndef, err
	}
	return r.Nspace, r.Rank, nil
}

// ConnectCB is the callback form of Connect (PMIx_Connect_nb).
func (c *Client) ConnectCB(procs []pmix.Proc, info []pmix.Info, cb func(nspace string, rank pmix.Rank, err error)) {
	c.async(func(ctx context.Context) { cb(c.Connect(ctx, procs, info)) })
}

// Disconnect leaves nspace, the new nspace of a connect this process took
// part in, as RFC0003's PMIx_Disconnect does: it returns once every member
// disconnected. Directives: PMIX_TIMEOUT (without it, ctx's deadline gives
// one).
//
// Errors: PMIX_ERR_INVALID_NAMESPACE when this process is not connected to
// nspace; otherwise as Fence's.
func (c *Client) Disconnect(ctx context.Context, nspace string, info []pmix.Info) error {
	_, err := c.request(ctx, &proto.Frame{Type: proto.TypeDisconnect, Nspace: nspace, Info: timeoutFromDeadline(ctx, info)})
	return err
}

// DisconnectCB is the callback form of Disconnect (PMIx_Disconnect_nb).
func (c *Client) DisconnectCB(nspace string, info []pmix.Info, cb func(error)) {
	c.async(func(ctx context.Context) { cb(c.Disconnect(ctx, nspace, info)) })
}
