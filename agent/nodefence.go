package agent

import (
	"context"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pmixbus/pmixbus/collective"
	"github.com/pmixbus/pmixbus/nodefence"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// The node barrier of a job's ranks on this node (package nodefence;
// partial when the job has ranks on other nodes too): made at the first
// hello of one of its ranks, handed to each
// rank with its hello's reply (SCM_RIGHTS, on a Unix socket), arrived at
// on behalf of the clients whose eligible fences come over the socket,
// broken when a rank of the job detaches or terminates, closed with the
// job.

// jobFence returns j's barrier, made the first time it is asked for; nil
// when j has no rank on this node, is no longer the registered job of its
// nspace, or barriers are off (Config.NoNodeFence) or cannot be made here.
// The barrier of a job with ranks on other nodes too is partial: the
// node's last arrival has the agent run the job's fence (nodeJoin).
func (a *Agent) jobFence(j *job) *nodefence.Barrier {
	a.mu.Lock()
	defer a.mu.Unlock()
	if j.fenceMade {
		return j.fence
	}
	if a.closed || a.jobs[j.nspace] != j {
		return nil
	}
	j.fenceMade = true
	if a.cfg.NoNodeFence || len(j.procs) > nodefence.MaxRanks {
		return nil
	}
	local := 0
	for _, node := range j.procs {
		if node == a.cfg.Node {
			local++
		}
	}
	if local == 0 {
		return nil
	}
	if v, ok := pmix.LookupValue(j.info, pmix.KeyJobSize); ok {
		if size, ok := v.Int(); !ok || size != int64(len(j.procs)) {
			return nil // the host gave this agent part of the job only
		}
	}
	b, err := nodefence.New(local, local < len(j.procs))
	if err != nil {
		a.log.Warn("the job's fences take the agent's path: no node barrier", "nspace", j.nspace, "err", err)
		return nil
	}
	j.fence = b
	return b
}

// breakFence breaks the node barrier of nspace's job, if it has one: one
// of its ranks detached or terminated, and no fence of the job can
// complete there any more (waiters get PMIX_ERR_PROC_TERM_WO_SYNC, as the
// agent's path answers; later fences take that path).
func (a *Agent) breakFence(nspace string) {
	a.mu.Lock()
	var b *nodefence.Barrier
	if j := a.jobs[nspace]; j != nil {
		b = j.fence
	}
	a.mu.Unlock()
	if b == nil {
		return
	}
	if a.ctx.Err() != nil {
		// The agent is shutting down (its context ends first): the rank
		// left because the agent did, and waiters hear that, as Shutdown
		// says; whichever breaks the barrier first.
		b.Break(pmix.ErrLostConnection)
		return
	}
	b.Break(pmix.ErrProcTermWOSync)
}

// fencesLocked lists the barriers of the registered jobs.
func (a *Agent) fencesLocked() []*nodefence.Barrier {
	var bs []*nodefence.Barrier
	for _, j := range a.jobs {
		if j.fence != nil {
			bs = append(bs, j.fence)
		}
	}
	return bs
}

// closeFence closes the barrier of a job replaced or deregistered.
func closeFence(b *nodefence.Barrier) {
	if b != nil {
		b.Close()
	}
}

// helloReply writes the hello's reply, with the fd of the job's barrier
// b attached when there is one and the socket can carry it: written here,
// not queued, since nothing else is written to a client before its
// hello's reply. A client that does not take the fd loses nothing (the
// kernel closes it); its fences reach the barrier through the agent.
func (cc *clientConn) helloReply(r *proto.Frame, b *nodefence.Barrier) error {
	uc, ok := cc.c.(*net.UnixConn)
	fd := -1
	if b != nil && ok {
		fd = b.DupFD()
	}
	if fd < 0 {
		return cc.write(r)
	}
	defer func() { _ = unix.Close(fd) }()
	out, err := proto.AppendFrame(nil, r)
	if err != nil {
		return err
	}
	_ = uc.SetWriteDeadline(time.Now().Add(cc.a.cfg.WriteTimeout))
	defer func() { _ = uc.SetWriteDeadline(time.Time{}) }()
	n, _, err := uc.WriteMsgUnix(out, unix.UnixRights(fd), nil)
	for err == nil && n < len(out) {
		var m int
		m, err = uc.Write(out[n:])
		n += m
	}
	return err
}

// nodeFence serves a fence frame on the job's node barrier when the job
// has one and the fence is eligible (nodefence.Eligible): the agent
// arrives for the client, which did not map the segment, and answers when
// every rank arrived. It returns false for a fence that takes the agent's
// path. The client's fences arrive one after another, each once the one
// before it was answered, so that a client that gave up on a fence (its
// context's deadline) and fences again is not counted twice in one round;
// a barrier that broke sends the fence down the agent's path.
func (cc *clientConn) nodeFence(ctx context.Context, e *clientEntry, f *proto.Frame) bool {
	b := cc.a.jobFence(e.job)
	if b == nil || !nodefence.Eligible(e.proc, f.Procs, f.Info) {
		return false
	}
	prev, done := cc.fenceTail, make(chan struct{})
	cc.fenceTail = done
	run := func() {
		defer close(done)
		r := &proto.Frame{Type: proto.TypeReply, Seq: f.Seq}
		r.SetErr(cc.barrier(ctx, e, b, prev, f))
		_ = cc.write(r)
	}
	if !cc.a.goFunc(run) {
		close(done)
		cc.reply(f, ErrClosed, nil)
	}
	return true
}

func (cc *clientConn) barrier(ctx context.Context, e *clientEntry, b *nodefence.Barrier, prev <-chan struct{}, f *proto.Frame) error {
	if prev != nil {
		select {
		case <-prev:
		case <-ctx.Done():
			return pmix.NewError(pmix.ErrLostConnectionToClient, "client detached")
		}
	}
	if b.Partial() && pmix.Flag(f.Info, pmix.KeyNodeFenceLast) {
		// The node's last rank, which arrived itself.
		err := cc.a.nodeJoin(e.job, f.Procs)
		b.Complete(err)
		return err
	}
	ch, last, ok := b.Arrive()
	if !ok {
		req, err := fenceRequest(e, f) // collective.go
		if err == nil {
			_, err = cc.a.coll.svc.Join(ctx, req)
		}
		return err
	}
	if last {
		b.Complete(cc.a.nodeJoin(e.job, f.Procs))
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		// Detached or shutting down: either broke the barrier.
		return pmix.NewError(pmix.ErrLostConnectionToClient, "client detached")
	}
}

// nodeJoin runs the fence of procs (none: the whole job) across agents
// for every rank of j on this node, which all arrived at its partial
// barrier: one JoinFunc each, together, as their own fences would, so that
// the collective service counts the job's fences alike whichever path
// each node's ranks took. It returns the first failure. The fence is the
// node's, not the calling client's: it ends with the agent, not with the
// client's connection.
func (a *Agent) nodeJoin(j *job, procs []pmix.Proc) error {
	if a.coll == nil {
		return ErrClosed
	}
	if len(procs) == 0 {
		procs = []pmix.Proc{{Nspace: j.nspace, Rank: pmix.RankWildcard}}
	}
	var ranks []pmix.Rank
	for r, node := range j.procs {
		if node == a.cfg.Node {
			ranks = append(ranks, r)
		}
	}
	errs := make([]error, len(ranks))
	var wg sync.WaitGroup
	wg.Add(len(ranks))
	for i, r := range ranks {
		a.coll.svc.JoinFunc(a.ctx, collective.Request{
			Kind: collective.KindFence, Procs: procs, Self: pmix.Proc{Nspace: j.nspace, Rank: r},
		}, func(_ collective.Result, err error) {
			errs[i] = err
			wg.Done()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
