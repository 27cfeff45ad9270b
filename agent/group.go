package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/pmixbus/pmixbus/collective"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// group serves the PMIx group frames (package collective does the work):
// each runs on a goroutine of its own, in the context of its connection,
// as a fence does.
func (cc *clientConn) group(f *proto.Frame) {
	c := cc.a.coll
	ctx, e, err := c.connContext(cc.a, cc)
	if err != nil {
		cc.reply(f, err, nil)
		return
	}
	run := func() {
		r := &proto.Frame{Type: proto.TypeReply, Seq: f.Seq}
		res, err := cc.groupOp(ctx, e, f)
		r.SetErr(err)
		if err == nil {
			r.Results = groupResults(res)
		}
		_ = cc.write(r)
	}
	if !cc.a.goFunc(run) {
		cc.reply(f, ErrClosed, nil)
	}
}

func (cc *clientConn) groupOp(ctx context.Context, e *clientEntry, f *proto.Frame) (collective.Result, error) {
	svc := cc.a.coll.svc
	timeout, err := collective.TimeoutOf(f.Info)
	if err != nil {
		return collective.Result{}, err
	}
	if f.Nspace == "" {
		return collective.Result{}, pmix.Errorf(pmix.ErrBadParam, "%s without a group name", f.Type)
	}
	req := collective.GroupRequest{Name: f.Nspace, Procs: f.Procs, Self: e.proc, Timeout: timeout, Flags: collective.GroupFlagsOf(f.Info)}
	switch f.Type {
	case proto.TypeGroupConstruct:
		// No procs: an added member's (PMIX_GROUP_ADD_MEMBERS).
		if v, ok := pmix.LookupValue(f.Info, pmix.KeyGroupAddMembers); ok {
			if req.Add, ok = v.Procs(); !ok {
				return collective.Result{}, pmix.Errorf(pmix.ErrBadParam, "%s: want procs, got %s", pmix.KeyGroupAddMembers, v)
			}
		}
		if v, ok := pmix.LookupValue(f.Info, pmix.KeyGroupInfo); ok {
			req.Info, _ = v.Infos()
		}
		if v, ok := pmix.LookupValue(f.Info, pmix.KeyGroupEndptData); ok {
			// The caller's endpoint data: a value of its own the others read.
			req.Info = append(req.Info, pmix.NewInfo(pmix.KeyGroupEndptData, v))
		}
		return svc.Construct(ctx, req)
	case proto.TypeGroupInvite:
		if len(f.Procs) == 0 {
			return collective.Result{}, pmix.Errorf(pmix.ErrBadParam, "group invite of no procs")
		}
		return svc.Invite(ctx, req)
	case proto.TypeGroupJoin:
		return svc.JoinGroup(ctx, e.proc, f.Source, f.Nspace, f.Status == pmix.GroupAccept, timeout)
	case proto.TypeGroupDestruct:
		return collective.Result{}, svc.Destruct(ctx, e.proc, f.Nspace, timeout)
	default: // TypeGroupLeave
		return collective.Result{}, svc.Leave(e.proc, f.Nspace)
	}
}

// groupResults are a construct's results as OpenPMIx gives them: the
// context id first when one was assigned, then the membership.
func groupResults(res collective.Result) []pmix.Info {
	if len(res.Members) == 0 {
		return nil
	}
	var out []pmix.Info
	if res.ContextID != 0 {
		out = append(out, pmix.NewInfo(pmix.KeyGroupContextID, pmix.Uint64(res.ContextID)))
	}
	return append(out, pmix.NewInfo(pmix.KeyGroupMembership, pmix.Procs(res.Members)))
}

// notifyFrom publishes an event of range CUSTOM as the local process from
// had notified it (collective.Config.RaiseFrom): its handlers see from as
// the source. A process no longer attached: the agent is the source.
func (a *Agent) notifyFrom(ctx context.Context, from pmix.Proc, code pmix.Status, info []pmix.Info) error {
	a.mu.Lock()
	e := a.expected[from]
	a.mu.Unlock()
	if e == nil {
		_, err := a.notify(ctx, "", code, pmix.RangeCustom, false, info)
		return err
	}
	_, info, err := a.groupEvent(pmix.RangeCustom, info)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if a.isClosed() || a.router == nil {
		return fmt.Errorf("%w: not started, or shut down", ErrClosed)
	}
	m := &event.Message{ID: a.nextEventID(), Code: code, Range: pmix.RangeCustom, Source: a.origin(e), Info: info, Time: time.Now()}
	return a.link.Publish(m, &event.Sender{Proc: e.proc, Session: e.job.session})
}

// Psets returns the PMIx groups (process sets) the agent knows, by name,
// each with its members (collective.Service.Psets): what a query of
// PMIX_QUERY_PSET_NAMES or PMIX_QUERY_PSET_MEMBERSHIP answers.
func (a *Agent) Psets() map[string][]pmix.Proc {
	if a.coll == nil {
		return nil
	}
	return a.coll.svc.Psets()
}
