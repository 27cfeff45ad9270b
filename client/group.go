package client

import (
	"context"

	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// Group is what a group construct, invitation or join gives a member: the
// members, and the context id the cluster set assigned when
// PMIX_GROUP_ASSIGN_CONTEXT_ID was given (0 otherwise).
type Group struct {
	Members   []pmix.Proc
	ContextID uint64
	// Results are the results as PMIx gives them: PMIX_GROUP_CONTEXT_ID
	// first when assigned, then PMIX_GROUP_MEMBERSHIP.
	Results []pmix.Info
}

func groupOf(r *proto.Frame) Group {
	g := Group{Results: r.Results}
	if v, ok := pmix.LookupValue(r.Results, pmix.KeyGroupMembership); ok {
		g.Members, _ = v.Procs()
	}
	if v, ok := pmix.LookupValue(r.Results, pmix.KeyGroupContextID); ok {
		if n, ok := v.Int(); ok {
			g.ContextID = uint64(n)
		}
	}
	return g
}

// GroupConstruct is PMIx_Group_construct: every member calls it with the
// same name and procs, and it returns once all did (docs/collective.md).
// Directives: PMIX_GROUP_ASSIGN_CONTEXT_ID, PMIX_GROUP_OPTIONAL,
// PMIX_GROUP_NOTIFY_TERMINATION, PMIX_GROUP_FT_COLLECTIVE, PMIX_GROUP_INFO
// (values the others may Get of this process), PMIX_TIMEOUT (without it,
// ctx's deadline gives one), PMIX_GROUP_ADD_MEMBERS (procs that are not
// in procs and join by calling GroupConstruct with no procs). Every
// member's committed REMOTE and GLOBAL data comes with it, and the name
// then addresses the group: Get of a rank of it, events, fences.
//
// Errors: PMIX_ERR_TIMEOUT naming the members that had not called;
// PMIX_ERR_PROC_TERM_WO_SYNC when one terminated first (without
// PMIX_GROUP_OPTIONAL); PMIX_ERR_BAD_PARAM.
func (c *Client) GroupConstruct(ctx context.Context, name string, procs []pmix.Proc, info []pmix.Info) (Group, error) {
	r, err := c.request(ctx, &proto.Frame{Type: proto.TypeGroupConstruct, Nspace: name, Procs: procs, Info: timeoutFromDeadline(ctx, info)})
	if err != nil {
		return Group{}, err
	}
	return groupOf(r), nil
}

// GroupConstructCB is the callback form of GroupConstruct
// (PMIx_Group_construct_nb).
func (c *Client) GroupConstructCB(name string, procs []pmix.Proc, info []pmix.Info, cb func(Group, error)) {
	c.async(func(ctx context.Context) { cb(c.GroupConstruct(ctx, name, procs, info)) })
}

// GroupDestruct is PMIx_Group_destruct: every member that has not left
// calls it, and it returns once all did (the terminated and departed
// excused). Directives: PMIX_TIMEOUT.
//
// Errors: PMIX_ERR_NOT_FOUND when this process is no member of a group of
// that name; otherwise as GroupConstruct's.
func (c *Client) GroupDestruct(ctx context.Context, name string, info []pmix.Info) error {
	_, err := c.request(ctx, &proto.Frame{Type: proto.TypeGroupDestruct, Nspace: name, Info: timeoutFromDeadline(ctx, info)})
	return err
}

// GroupDestructCB is the callback form of GroupDestruct.
func (c *Client) GroupDestructCB(name string, info []pmix.Info, cb func(error)) {
	c.async(func(ctx context.Context) { cb(c.GroupDestruct(ctx, name, info)) })
}

// GroupInvite is PMIx_Group_invite: this process leads a group of itself
// and the procs that accept its invitation (PMIX_GROUP_INVITED reaches
// them, with PMIX_GROUP_ID and PMIX_GROUP_MEMBERSHIP). It returns once
// every invitee accepted, declined or terminated; the leader gets
// PMIX_GROUP_INVITE_ACCEPTED/_DECLINED as they answer, the members
// PMIX_GROUP_CONSTRUCT_COMPLETE at the end. Directives: as
// GroupConstruct's.
func (c *Client) GroupInvite(ctx context.Context, name string, procs []pmix.Proc, info []pmix.Info) (Group, error) {
	r, err := c.request(ctx, &proto.Frame{Type: proto.TypeGroupInvite, Nspace: name, Procs: procs, Info: timeoutFromDeadline(ctx, info)})
	if err != nil {
		return Group{}, err
	}
	return groupOf(r), nil
}

// GroupInviteCB is the callback form of GroupInvite.
func (c *Client) GroupInviteCB(name string, procs []pmix.Proc, info []pmix.Info, cb func(Group, error)) {
	c.async(func(ctx context.Context) { cb(c.GroupInvite(ctx, name, procs, info)) })
}

// GroupJoin is PMIx_Group_join: this process answers leader's invitation.
// Accepting, it returns once the group is constructed; declining, at
// once.
//
// Errors: PMIX_ERR_NOT_FOUND when leader has no such invitation out (or
// is gone); otherwise as GroupConstruct's.
func (c *Client) GroupJoin(ctx context.Context, name string, leader pmix.Proc, accept bool, info []pmix.Info) (Group, error) {
	f := &proto.Frame{Type: proto.TypeGroupJoin, Nspace: name, Source: leader, Info: timeoutFromDeadline(ctx, info)}
	if accept {
		f.Status = pmix.GroupAccept
	}
	r, err := c.request(ctx, f)
	if err != nil {
		return Group{}, err
	}
	return groupOf(r), nil
}

// GroupJoinCB is the callback form of GroupJoin.
func (c *Client) GroupJoinCB(name string, leader pmix.Proc, accept bool, info []pmix.Info, cb func(Group, error)) {
	c.async(func(ctx context.Context) { cb(c.GroupJoin(ctx, name, leader, accept, info)) })
}

// GroupLeave is PMIx_Group_leave: this process leaves the group at once;
// the others get PMIX_GROUP_LEFT, and their destruct goes on without it.
func (c *Client) GroupLeave(ctx context.Context, name string, info []pmix.Info) error {
	_, err := c.request(ctx, &proto.Frame{Type: proto.TypeGroupLeave, Nspace: name, Info: info})
	return err
}

// GroupLeaveCB is the callback form of GroupLeave.
func (c *Client) GroupLeaveCB(name string, info []pmix.Info, cb func(error)) {
	c.async(func(ctx context.Context) { cb(c.GroupLeave(ctx, name, info)) })
}
