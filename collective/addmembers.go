package collective

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// PMIX_GROUP_ADD_MEMBERS: a construct's leaders (the processes that call
// it with the members they know) may name more processes, which call
// PMIx_Group_construct with no procs; the group is the leaders' members
// and every added one, and no one's construct completes before all have
// called. It runs in two steps of the engine. The leaders construct the
// group among themselves, each naming its added members in its data
// (addKey, a GLOBAL value, which the construct brings to every leader);
// if they named any, every leader then offers the whole membership to
// the added members' agents (AddedSubject), and leaders and added members
// construct the group again, of all of them: that second construct's
// release is the group. An added member's agent asks its subject until a
// leader answers (or PMIX_TIMEOUT passes), then takes part. The added
// members also get PMIX_GROUP_INVITED from the leader that named them.

// addKey is the value in which a leader names its added members.
func addKey(name string) string { return "pmixbus.grp.add." + name }

// addedPoll is how often an added member's agent asks for the
// membership while no leader answers.
const addedPoll = 100 * time.Millisecond

// AddedSubject is where the leaders' agents answer an added member's
// agent with the group's membership, once the leaders constructed it.
func AddedSubject(member pmix.Proc, name string) string {
	c, ns, _ := cluster.Split(member.Nspace)
	return fmt.Sprintf("%s.added.%s.%s.%d.%s", Prefix, subjects.ClusterToken(string(c)), subjects.EscapeToken(ns), member.Rank, subjects.EscapeToken(name))
}

// constructWithAdded is Construct for a leader once the leaders have
// constructed the group among themselves (first): the group again with
// the members any leader added, if any did.
func (s *Service) constructWithAdded(ctx context.Context, req GroupRequest, first Result, deadline time.Time) (Result, error) {
	added, err := s.addedBy(req.Name, first.Members)
	if err != nil || len(added) == 0 {
		return first, err
	}
	all, err := s.canonical(append(slices.Clone(first.Members), added...))
	if err != nil {
		return Result{}, err
	}
	flags := req.Flags | FlagGroup
	b, err := marshalInvitation(all, flags)
	if err != nil {
		return Result{}, err
	}
	var subs []*nats.Subscription
	defer func() {
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
	}()
	for _, a := range added {
		sub, err := s.cfg.Conn.Subscribe(AddedSubject(a, req.Name), func(m *nats.Msg) { _ = m.Respond(b) })
		if err != nil {
			return Result{}, pmix.Errorf(pmix.ErrUnreach, "offering group %s to its added members: %v", pmix.Quote(req.Name), err)
		}
		subs = append(subs, sub)
	}
	if err := s.cfg.Conn.FlushTimeout(flushTimeout); err != nil {
		return Result{}, pmix.Errorf(pmix.ErrUnreach, "offering group %s to its added members: %v", pmix.Quote(req.Name), err)
	}
	if own, _ := s.canonical(req.Add); len(own) > 0 {
		own = slices.DeleteFunc(own, func(p pmix.Proc) bool { return slices.Contains(first.Members, p) })
		s.mu.Lock()
		s.raiseFromLocked(req.Self, pmix.GroupInvited, own,
			pmix.NewInfo(pmix.KeyGroupName, pmix.String(req.Name)), pmix.NewInfo(pmix.KeyGroupMembership, pmix.Procs(all)))
		s.mu.Unlock()
	}
	timeout, err := remaining(req.Name, deadline)
	if err != nil {
		return Result{}, err
	}
	res, err := s.Join(ctx, Request{Kind: KindGroup, ID: req.Name, Procs: all, Self: req.Self, Timeout: timeout, Collect: true, Flags: flags})
	return res, constructAbort(err)
}

// addedBy is the union of the members members added (their addKey
// values, which the construct brought), less members themselves.
func (s *Service) addedBy(name string, members []pmix.Proc) ([]pmix.Proc, error) {
	var out []pmix.Proc
	for _, m := range members {
		v, found, visible, _ := s.kv.get(m, addKey(name), "", "")
		if !found || !visible {
			continue
		}
		procs, ok := v.Procs()
		if !ok {
			return nil, pmix.Errorf(pmix.ErrBadParam, "group %s: %v's added members are %s, not procs", pmix.Quote(name), m, v)
		}
		for _, p := range procs {
			if !slices.Contains(members, p) && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// constructAdded is Construct for an added member (no procs): it waits
// for a leader's agent to give the membership, then takes part in the
// construct of all.
func (s *Service) constructAdded(ctx context.Context, req GroupRequest, deadline time.Time) (Result, error) {
	if len(req.Add) > 0 {
		return Result{}, pmix.Errorf(pmix.ErrBadParam, "group %s: a construct without procs (an added member's) names added members", pmix.Quote(req.Name))
	}
	me, err := s.qualify(req.Self)
	if err != nil {
		return Result{}, err
	}
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	var all []pmix.Proc
	var flags Flags
	for {
		rctx, cancel := context.WithTimeout(ctx, s.cfg.AckWait)
		msg, err := s.cfg.Conn.RequestWithContext(rctx, AddedSubject(me, req.Name), nil)
		cancel()
		if err == nil {
			if all, flags, err = unmarshalInvitation(msg.Data); err != nil {
				return Result{}, err
			}
			break
		}
		if ctx.Err() != nil {
			if !deadline.IsZero() && !time.Now().Before(deadline) {
				return Result{}, pmix.Errorf(pmix.ErrTimeout, "group %s: no leader added %v within %v", pmix.Quote(req.Name), req.Self, req.Timeout)
			}
			return Result{}, ctx.Err()
		}
		if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			return Result{}, pmix.Errorf(pmix.ErrUnreach, "group %s: asking the leaders for its members: %v", pmix.Quote(req.Name), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(addedPoll):
		}
	}
	if !slices.Contains(all, me) {
		return Result{}, pmix.Errorf(pmix.ErrNotFound, "group %s: %v is not among its members", pmix.Quote(req.Name), req.Self)
	}
	if err := s.shareGroupInfo(req.Self, req.Info); err != nil {
		return Result{}, err
	}
	timeout, err := remaining(req.Name, deadline)
	if err != nil {
		return Result{}, err
	}
	res, err := s.Join(ctx, Request{Kind: KindGroup, ID: req.Name, Procs: all, Self: req.Self, Timeout: timeout, Collect: true, Flags: flags | FlagGroup})
	return res, constructAbort(err)
}

// remaining is what is left of a construct's PMIX_TIMEOUT (0: none).
func remaining(name string, deadline time.Time) (time.Duration, error) {
	if deadline.IsZero() {
		return 0, nil
	}
	left := time.Until(deadline)
	if left <= 0 {
		return 0, pmix.Errorf(pmix.ErrTimeout, "group %s: its construct timed out", pmix.Quote(name))
	}
	return left, nil
}
