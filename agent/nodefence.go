package agent

import (
	"context"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pmixbus/pmixbus/nodefence"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// The node barrier of a job whose ranks all run on this node (package
// nodefence): made at the first hello of one of its ranks, handed to each
// rank with its hello's reply (SCM_RIGHTS, on a Unix socket), arrived at
// on behalf of the clients whose eligible fences come over the socket,
// broken when a rank of the job detaches or terminates, closed with the
// job.

// jobFence returns j's barrier, made the first time it is asked for; nil
// when j has ranks on other nodes, is no longer the registered job of its
// nspace, or barriers are off (Config.NoNodeFence) or cannot be made here.
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
	if a.cfg.NoNodeFence || len(j.procs) == 0 || len(j.procs) > nodefence.MaxRanks {
		return nil
	}
	for _, node := range j.procs {
		if node != a.cfg.Node {
			return nil
		}
	}
	if v, ok := pmix.LookupValue(j.info, pmix.KeyJobSize); ok {
		if size, ok := v.Int(); !ok || size != int64(len(j.procs)) {
			return nil // the host gave this agent part of the job only
		}
	}
	b, err := nodefence.New(len(j.procs))
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
	if b != nil {
		b.Break(pmix.ErrProcTermWOSync)
	}
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
	ch, ok := b.Arrive()
	if !ok {
		return cc.fence(ctx, e, f) // collective.go
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		// Detached or shutting down: either broke the barrier.
		return pmix.NewError(pmix.ErrLostConnectionToClient, "client detached")
	}
}
