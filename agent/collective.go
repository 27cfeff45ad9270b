package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/collective"
	"github.com/pmixbus/pmixbus/launch/liveness"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// collectives serves the fence, commit and get frames of the agent's
// clients (package collective does the work) and tells the service as
// jobs come and go, so that the agent hosting a job's lowest rank
// coordinates the operations that job leads.
//
// A fence or a get that waits runs on a goroutine of its own, in the
// context of its connection, cancelled when the client detaches or the
// agent shuts down; a commit is answered at once, so that a fence sent
// after it finds its data.
type collectives struct {
	svc *collective.Service

	mu    sync.Mutex
	conns map[*clientConn]context.CancelFunc
	ctxs  map[*clientConn]context.Context
}

func (a *Agent) startCollective(ctx context.Context) error {
	svc, err := collective.New(collective.Config{
		Cluster: a.cfg.Cluster, Node: a.cfg.Node, Conn: a.nc, Jobs: a.jobRanks, Home: a.jobHome, JobInfo: a.connectInfo,
		Raise: func(ctx context.Context, id string, code pmix.Status, info []pmix.Info) error {
			_, err := a.notify(ctx, id, code, pmix.RangeCustom, false, info)
			return err
		},
		RaiseFrom:   a.notifyFrom,
		Memberships: collective.NewNATSMemberships(a.nc, a.cfg.Cluster.Domain(), collective.DefaultGroupsBucket, a.replicas),
		Logger:      a.log.With("component", "collective"),
	})
	if err != nil {
		return err
	}
	if err := svc.Restore(ctx); err != nil {
		// The cluster's JetStream may be down: the agent works without
		// the groups it held before a restart.
		a.log.Warn("groups formed before this agent started are unknown to it", "err", err)
	}
	a.coll = &collectives{svc: svc, conns: map[*clientConn]context.CancelFunc{}, ctxs: map[*clientConn]context.Context{}}
	a.mu.Lock()
	nspaces := slices.Collect(maps.Keys(a.jobs)) // registered before Start
	a.mu.Unlock()
	for _, ns := range nspaces {
		if err := svc.JobChanged(ctx, ns); err != nil {
			return err
		}
	}
	return nil
}

// jobRanks is the job table as the collective service reads it: a job's
// rank → node map, which RegisterJob never changes once it stored it.
// jobHome is the cluster that names a job across clusters (its rank
// 0's), "" for a job of this cluster only (collective.Config.Home).
func (a *Agent) jobHome(nspace string) cluster.ID {
	a.mu.Lock()
	defer a.mu.Unlock()
	if j := a.jobs[nspace]; j != nil {
		return j.home
	}
	return ""
}

func (a *Agent) jobRanks(nspace string) map[pmix.Rank]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if j := a.jobs[nspace]; j != nil {
		return j.procs
	}
	return nil
}

// registeredJobInfo is the job-level info a host registered.
func (a *Agent) registeredJobInfo(nspace string) []pmix.Info {
	a.mu.Lock()
	defer a.mu.Unlock()
	if j := a.jobs[nspace]; j != nil {
		return j.info
	}
	return nil
}

// jobInfo is the job-level info of a job of this cluster: the host's,
// or for a connect's new nspace the group's
// (collective.Service.GroupJobInfo).
func (a *Agent) jobInfo(nspace string) []pmix.Info {
	if info := a.registeredJobInfo(nspace); info != nil || a.coll == nil {
		return info
	}
	info, _ := a.coll.svc.GroupJobInfo(nspace)
	return info
}

// ProcTerminated tells the collectives that a process of this node
// ended (collective.Service.ProcTerminated): the launch service calls it
// from the goroutine that reaped the process, a host RM for the processes
// it watches. Reporting a process twice does nothing more.
//
// Errors: pmix.ErrBadParam for an invalid proc; ErrClosed.
func (a *Agent) ProcTerminated(ctx context.Context, p pmix.Proc, abnormal bool) error {
	a.breakFence(p.Nspace) // nodefence.go
	if a.coll == nil {
		return ErrClosed
	}
	return a.coll.svc.ProcTerminated(ctx, p, abnormal)
}

// collectiveNodeDown tells the collectives that a node of this cluster
// is down with the processes it hosted (collective.Service.NodeDown):
// they count as terminated in pending operations and in their groups.
// Every agent that declares the node does so with the same cause, the
// node's expiry in the agents bucket.
func (a *Agent) collectiveNodeDown(d liveness.NodeDown) {
	if a.coll == nil {
		return
	}
	var procs []pmix.Proc
	for _, j := range d.Jobs {
		procs = append(procs, j.Procs()...)
	}
	if len(procs) == 0 {
		return
	}
	cause := fmt.Sprintf("%s/%s/%d", d.Cluster, d.Node, d.Revision)
	if err := a.coll.svc.NodeDown(a.ctx, cause, procs); err != nil && !errors.Is(err, collective.ErrClosed) {
		a.log.Warn("the collectives will not count a down node's processes as terminated", "node", d.Node, "err", err)
	}
}

// ConnectReport tells the host that a local process connected (RFC0003's
// PMIx_Connect completed for it) or disconnected.
type ConnectReport struct {
	Proc pmix.Proc // the local process
	// Nspace is the new nspace ("" for PMIX_CONNECT_XCHG_ONLY) or, for a
	// disconnect, the one left.
	Nspace     string
	Rank       pmix.Rank   // the process's rank in Nspace; RankUndef for a disconnect
	Members    []pmix.Proc // a connect's members, qualified, in rank order
	Disconnect bool
}

// OnConnect calls f each time a connect or disconnect completes for a
// local process, for the host's accounting. f must not block for long.
func (a *Agent) OnConnect(f func(ConnectReport)) {
	a.mu.Lock()
	a.onConnect.Store(appendCopy(a.onConnect.Load(), f))
	a.mu.Unlock()
}

func (a *Agent) reportConnect(r ConnectReport) {
	if fs := a.onConnect.Load(); fs != nil {
		for _, f := range *fs {
			f(r)
		}
	}
}

// collectiveJobChanged tells the service that a job was registered,
// replaced or deregistered.
func (a *Agent) collectiveJobChanged(ctx context.Context, nspace string) {
	if a.coll == nil {
		return
	}
	if err := a.coll.svc.JobChanged(ctx, nspace); err != nil {
		a.log.Warn("collectives led by a job will not be coordinated here", "nspace", nspace, "err", err)
	}
}

func (a *Agent) closeCollective(ctx context.Context) {
	if a.coll == nil {
		return
	}
	if err := a.coll.svc.Close(ctx); err != nil {
		a.log.Warn("stopping collectives", "err", err)
	}
}

// collectiveDetached ends a client's fences and gets in flight.
func (a *Agent) collectiveDetached(cc *clientConn) {
	if a.coll == nil {
		return
	}
	a.coll.mu.Lock()
	cancel := a.coll.conns[cc]
	delete(a.coll.conns, cc)
	delete(a.coll.ctxs, cc)
	a.coll.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// connContext returns the context of an attached connection's requests.
func (c *collectives) connContext(a *Agent, cc *clientConn) (context.Context, *clientEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, _, ok := cc.attached()
	if !ok {
		return nil, nil, pmix.NewError(pmix.ErrLostConnectionToClient, "client detached")
	}
	ctx := c.ctxs[cc]
	if ctx == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(a.ctx)
		c.ctxs[cc], c.conns[cc] = ctx, cancel
	}
	return ctx, e, nil
}

// collective serves a fence, commit or get frame.
func (cc *clientConn) collective(f *proto.Frame) {
	c := cc.a.coll
	ctx, e, err := c.connContext(cc.a, cc)
	if err != nil {
		cc.reply(f, err, nil)
		return
	}
	if f.Type == proto.TypeCommit {
		cc.reply(f, c.svc.Commit(e.proc, f.Puts), nil)
		return
	}
	switch f.Type {
	case proto.TypeFence:
		if !cc.nodeFence(ctx, e, f) { // nodefence.go
			cc.fence(ctx, e, f)
		}
		return
	case proto.TypeConnect:
		cc.connect(ctx, e, f)
		return
	}
	run := func() {
		r := &proto.Frame{Type: proto.TypeReply, Seq: f.Seq}
		switch f.Type {
		case proto.TypeDisconnect:
			timeout, err := collective.TimeoutOf(f.Info)
			if err == nil {
				err = cc.a.coll.svc.Disconnect(ctx, e.proc, f.Nspace, timeout, collective.FlagsOf(f.Info))
			}
			r.SetErr(err)
			if err == nil {
				cc.a.reportConnect(ConnectReport{Proc: e.proc, Nspace: f.Nspace, Rank: pmix.RankUndef, Disconnect: true})
			}
		case proto.TypeGet:
			v, err := cc.get(ctx, e, f)
			if err == nil {
				r.Data = []proto.PData{{Proc: f.Source, Key: f.Keys[0], Value: v}}
			}
			r.SetErr(err)
		}
		// Not cc.reply: see publishLookup.
		_ = cc.write(r)
	}
	if !cc.a.goFunc(run) {
		cc.reply(f, ErrClosed, nil)
	}
}

// fence runs PMIx_Fence for the client. No procs means every proc of the
// client's nspace, as in PMIx. It does not wait: the service answers the
// fence once it ended, from one goroutine for all of this agent's
// participants (collective.Service.JoinFunc), not one per process.
func (cc *clientConn) fence(ctx context.Context, e *clientEntry, f *proto.Frame) {
	answer := func(_ collective.Result, err error) {
		r := &proto.Frame{Type: proto.TypeReply, Seq: f.Seq}
		r.SetErr(err)
		// Not cc.reply: see publishLookup.
		_ = cc.write(r)
	}
	req, err := fenceRequest(e, f)
	if err != nil {
		answer(collective.Result{}, err)
		return
	}
	cc.a.coll.svc.JoinFunc(ctx, req, answer)
}

// fenceRequest is the client's fence frame as the collective service
// takes it.
func fenceRequest(e *clientEntry, f *proto.Frame) (collective.Request, error) {
	procs := f.Procs
	if len(procs) == 0 {
		procs = []pmix.Proc{{Nspace: e.proc.Nspace, Rank: pmix.RankWildcard}}
	}
	timeout, err := collective.TimeoutOf(f.Info)
	if err != nil {
		return collective.Request{}, err
	}
	id, err := stringInfo(f.Info, pmix.KeyCollectiveID)
	if err != nil {
		return collective.Request{}, err
	}
	return collective.Request{
		Kind: collective.KindFence, ID: id, Procs: procs, Self: e.proc, Timeout: timeout,
		Collect: pmix.Flag(f.Info, pmix.KeyCollectData),
	}, nil
}

// stringInfo returns the string value of key in infos, "" when absent.
func stringInfo(infos []pmix.Info, key string) (string, error) {
	v, ok := pmix.LookupValue(infos, key)
	if !ok {
		return "", nil
	}
	s, ok := v.Str()
	if !ok {
		return "", pmix.Errorf(pmix.ErrBadParam, "%s: want a string, got %s", key, v)
	}
	return s, nil
}

// connect runs the collective part of RFC0003's PMIx_Connect: every
// participant arrives, the coordinator names the new nspace (none with
// PMIX_CONNECT_XCHG_ONLY) and each member's rank is its index in the
// sorted membership. RFC0003's attributes: collective.FlagsOf. As a
// fence, it does not wait: the service answers (collective.Service.JoinFunc).
func (cc *clientConn) connect(ctx context.Context, e *clientEntry, f *proto.Frame) {
	answer := func(res collective.Result, err error) {
		r := &proto.Frame{Type: proto.TypeReply, Seq: f.Seq, Rank: pmix.RankUndef}
		if err == nil {
			r.Nspace, r.Rank = res.Nspace, res.Rank
			cc.a.reportConnect(ConnectReport{Proc: e.proc, Nspace: res.Nspace, Rank: res.Rank, Members: res.Members})
		}
		r.SetErr(err)
		// Not cc.reply: see publishLookup.
		_ = cc.write(r)
	}
	if len(f.Procs) == 0 {
		answer(collective.Result{}, pmix.Errorf(pmix.ErrBadParam, "connect of no procs"))
		return
	}
	timeout, err := collective.TimeoutOf(f.Info)
	if err != nil {
		answer(collective.Result{}, err)
		return
	}
	id, err := stringInfo(f.Info, pmix.KeyConnectID)
	if err != nil {
		answer(collective.Result{}, err)
		return
	}
	kind := collective.KindConnect
	if pmix.Flag(f.Info, pmix.KeyConnectXchgOnly) {
		kind = collective.KindConnectXchg
	}
	cc.a.coll.svc.JoinFunc(ctx, collective.Request{Kind: kind, ID: id, Procs: f.Procs, Self: e.proc, Timeout: timeout, Flags: collective.FlagsOf(f.Info)}, answer)
}

// get runs PMIx_Get for the client: the job-level and proc-level info of
// a job of this agent comes from its job map (jobinfo.go); otherwise a
// WILDCARD rank asks for the job-level info its host registered, a real
// rank for what that proc committed.
func (cc *clientConn) get(ctx context.Context, e *clientEntry, f *proto.Frame) (pmix.Value, error) {
	if len(f.Keys) != 1 {
		return pmix.Value{}, pmix.Errorf(pmix.ErrBadParam, "get of %d keys: want one", len(f.Keys))
	}
	key, proc := f.Keys[0], f.Source
	if v, found, err := cc.a.jobValue(proc, key); found {
		return v, err
	}
	if proc.Rank == pmix.RankWildcard {
		info, known := cc.a.coll.svc.JobInfo(proc.Nspace) // another cluster's, from a connect
		if ns, ok := cc.a.cfg.Cluster.Local(proc.Nspace); ok {
			info, known = cc.a.jobInfo(ns), true
		}
		if known {
			if v, found := pmix.LookupValue(info, key); found {
				return v, nil
			}
		}
		if info, ok := cc.a.spawned.Info(proc.Nspace); ok { // a job a client here spawned (spawn.go)
			if v, found := pmix.LookupValue(info, key); found {
				return v, nil
			}
		}
		return pmix.Value{}, pmix.Errorf(pmix.ErrNotFound, "no job-level %s for %s", pmix.Quote(key), proc.Nspace)
	}
	return cc.a.coll.svc.Get(ctx, e.proc, proc, key, getDirectives(key, f.Info))
}

// groupEvent addresses a connect's new nspace, which is no job of any
// cluster's job table — no agent subscribes to its namespace subject —
// but whose members' agents all hear their members' (RFC0003: processes
// address the group by its new nspace). A host's NAMESPACE event whose
// pmix.KeyNspace is a new nspace becomes a CUSTOM event to its members;
// a CUSTOM event's targets of a new nspace (WILDCARD: every member; a
// rank: that member) become the members they stand for. Other events are
// returned as they are.
//
// Errors: pmix.ErrBadParam for a target rank the new nspace does not
// have.
func (a *Agent) groupEvent(rng pmix.Range, info []pmix.Info) (pmix.Range, []pmix.Info, error) {
	if a.coll == nil {
		return rng, info, nil
	}
	switch rng {
	case pmix.RangeNamespace:
		ns, err := stringInfo(info, pmix.KeyNspace)
		if err != nil || ns == "" {
			return rng, info, nil
		}
		members, ok := a.coll.svc.Members(ns)
		if !ok {
			return rng, info, nil
		}
		return pmix.RangeCustom, append(slices.Clone(info), pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs(members))), nil
	case pmix.RangeCustom:
		info, err := a.groupTargets(info)
		return rng, info, err
	}
	return rng, info, nil
}

// groupTargets replaces the targets of a CUSTOM event that name a
// connect's new nspace by the members they stand for.
func (a *Agent) groupTargets(info []pmix.Info) ([]pmix.Info, error) {
	i := slices.IndexFunc(info, func(in pmix.Info) bool { return in.Key == pmix.KeyEventCustomRange })
	if i < 0 {
		return info, nil
	}
	targets, ok := info[i].Value.Procs()
	if !ok {
		return info, nil
	}
	out, replaced, err := a.coll.svc.Targets(targets)
	if err != nil || !replaced {
		return info, err
	}
	slices.SortFunc(out, pmix.CompareProcs)
	info = slices.Clone(info)
	info[i] = pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs(slices.Compact(out)))
	return info, nil
}
