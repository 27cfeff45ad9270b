package collective

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
	"github.com/pmixbus/pmixbus/subjects"
)

// PMIx 4.2's process groups on the engine: a construct is an operation of
// kind KindGroup whose id is the group's name, a destruct one of kind
// KindGroupDestruct on the group's members, and an invitation a construct
// whose invitees join (or decline) once they accepted. The group, once
// constructed, is held as a connect's new nspace is (group.go), named by
// the group's name: PMIx_Get of a rank of the group reads that member's
// data, an event addressed to it reaches its members, a fence on it is
// one on its members.

// Operations of PMIx groups.
const (
	// KindGroup is PMIx_Group_construct, and an invitation
	// (PMIx_Group_invite / PMIx_Group_join).
	KindGroup Kind = "group"
	// KindGroupDestruct is PMIx_Group_destruct: every member of a group.
	KindGroupDestruct Kind = "group-destruct"
)

// GroupFlagsOf reads the attributes of PMIx_Group_construct.
func GroupFlagsOf(info []pmix.Info) Flags {
	f := FlagGroup
	if pmix.Flag(info, pmix.KeyGroupOptional) {
		f |= FlagOptional
	}
	if pmix.Flag(info, pmix.KeyGroupNotifyTerm) {
		f |= FlagNotifyTermination
	}
	if pmix.Flag(info, pmix.KeyGroupAssignCtxID) {
		f |= FlagAssignContextID
	}
	if pmix.Flag(info, pmix.KeyGroupFTCollective) {
		// The construct completes on the survivors of a member lost
		// before it (each told by PMIX_GROUP_MEMBER_FAILED), and the
		// group's later collectives leave out its terminated members.
		f |= FlagEarlyTermAllowed | FlagOptional
	}
	return f
}

// GroupRequest is one member's call of PMIx_Group_construct.
type GroupRequest struct {
	Name  string      // the group's name (its id)
	Procs []pmix.Proc // the members; RankWildcard: every rank of an nspace
	Self  pmix.Proc
	// Timeout: PMIX_TIMEOUT; 0 waits for every member.
	Timeout time.Duration
	Flags   Flags // GroupFlagsOf
	// Info is what Self shares with the other members (PMIX_GROUP_INFO):
	// each one a value of Self's that every member can Get.
	Info []pmix.Info
	// Add are the members Self adds (PMIX_GROUP_ADD_MEMBERS): processes
	// not in Procs that join by calling Construct with no Procs.
	Add []pmix.Proc
}

// Construct runs PMIx_Group_construct for one local member, and returns
// once every member constructed it: the members, qualified and sorted,
// and the context id when one was asked (FlagAssignContextID). Every
// member's committed REMOTE and GLOBAL data comes with it. A member with
// no Procs is one a leader added (addmembers.go): it waits for the
// leaders' construct, then constructs the group with them.
//
// Errors: pmix.ErrBadParam for no name, or one with a ':';
// pmix.GroupConstructAbort (wrapping ErrParticipantTerminated) when a
// member terminated first, without FlagOptional; Join's (ErrTimeout...).
func (s *Service) Construct(ctx context.Context, req GroupRequest) (Result, error) {
	if err := checkGroupName(req.Name); err != nil {
		return Result{}, err
	}
	var deadline time.Time
	if req.Timeout > 0 {
		deadline = time.Now().Add(req.Timeout)
	}
	if len(req.Procs) == 0 {
		return s.constructAdded(ctx, req, deadline)
	}
	info := req.Info
	if len(req.Add) > 0 {
		add, err := s.canonical(req.Add)
		if err != nil {
			return Result{}, err
		}
		// Named in its data, qualified: the construct brings it to the
		// other leaders, in whatever cluster.
		info = append(slices.Clone(info), pmix.NewInfo(addKey(req.Name), pmix.Procs(add)))
	}
	if err := s.shareGroupInfo(req.Self, info); err != nil {
		return Result{}, err
	}
	res, err := s.Join(ctx, Request{
		Kind: KindGroup, ID: req.Name, Procs: req.Procs, Self: req.Self,
		Timeout: req.Timeout, Collect: true, Flags: req.Flags | FlagGroup,
	})
	if err != nil {
		return res, constructAbort(err)
	}
	return s.constructWithAdded(ctx, req, res, deadline)
}

// constructAbort gives a construct that lost a member
// PMIX_GROUP_CONSTRUCT_ABORT, as OpenPMIx does; errors.Is still finds
// ErrParticipantTerminated in it.
func constructAbort(err error) error {
	if errors.Is(err, ErrParticipantTerminated) {
		return pmix.Errorf(pmix.GroupConstructAbort, "group construct aborted: %w", err)
	}
	return err
}

// raiseFromLocked raises an event as the local process from (Config.RaiseFrom)
// to targets, about from.
func (s *Service) raiseFromLocked(from pmix.Proc, code pmix.Status, targets []pmix.Proc, extra ...pmix.Info) {
	if s.cfg.RaiseFrom == nil {
		q, _ := s.qualify(from)
		s.raiseLocked("", code, targets, q, extra...)
		return
	}
	if len(targets) == 0 {
		return
	}
	q, _ := s.qualify(from)
	info := append([]pmix.Info{
		pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs(targets)),
		pmix.NewInfo(pmix.KeyEventAffectedProc, pmix.ProcValue(q)),
	}, extra...)
	s.goFuncLocked(func() {
		if err := s.cfg.RaiseFrom(s.ctx, from, code, info); err != nil {
			s.log.Warn("collective: raising a group event", "code", code.String(), "from", from.String(), "err", err)
		}
	})
}

// checkGroupName refuses an empty name, and one with a ':', which would
// read as "cluster:nspace".
func checkGroupName(name string) error {
	switch {
	case name == "":
		return pmix.Errorf(pmix.ErrBadParam, "a group without a name")
	case strings.Contains(name, ":"):
		return pmix.Errorf(pmix.ErrBadParam, "group name %s: pmixbus reserves ':' for cluster:nspace names", pmix.Quote(name))
	}
	return nil
}

// shareGroupInfo commits PMIX_GROUP_INFO's values as self's GLOBAL data.
func (s *Service) shareGroupInfo(self pmix.Proc, info []pmix.Info) error {
	if len(info) == 0 {
		return nil
	}
	puts := make([]proto.Put, 0, len(info))
	for _, in := range info {
		if in.Key == pmix.KeyProcID {
			continue // OpenPMIx's clients name themselves first
		}
		puts = append(puts, proto.Put{Scope: pmix.ScopeGlobal, Key: in.Key, Value: in.Value})
	}
	return s.Commit(self, puts)
}

// groupConstructedLocked records the group a construct's release made,
// under its name, qualified as this agent qualifies its members' names.
// With PMIX_GROUP_FT_COLLECTIVE, the local members get
// PMIX_GROUP_MEMBER_FAILED for each participant the construct lost.
func (s *Service) groupConstructedLocked(l *local, r *release) bool {
	q, err := s.qualify(pmix.Proc{Nspace: l.id, Rank: pmix.RankWildcard})
	if err != nil {
		return false
	}
	if r.flags&FlagEarlyTermAllowed != 0 {
		var local []pmix.Proc
		for p := range l.arrived {
			local = append(local, p)
		}
		slices.SortFunc(local, pmix.CompareProcs)
		for _, p := range s.lostLocked(l, r) {
			s.raiseLocked("", pmix.GroupMemberFailed, local, p, pmix.NewInfo(pmix.KeyGroupName, pmix.String(l.id)),
				pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String(fmt.Sprintf("%v terminated before group %s was constructed", p, l.id))))
		}
	}
	return s.groupOfLocked(q.Nspace, &group{members: r.members, flags: r.flags | FlagGroup, name: l.id, ctxid: r.ctxid})
}

// lostLocked returns the participants of l that r's members leave out
// and that terminated: for a construct, every explicit participant and
// every rank of a WILDCARD nspace whose size this agent knows left out;
// for an invitation, and for the other WILDCARD nspaces, those this
// agent heard terminated.
func (s *Service) lostLocked(l *local, r *release) []pmix.Proc {
	in := func(p pmix.Proc) bool {
		_, found := slices.BinarySearchFunc(r.members, p, pmix.CompareProcs)
		return found
	}
	invitation := r.flags&FlagInvitation != 0
	sizes := map[string]uint32{}
	for _, sz := range l.sizes {
		sizes[sz.nspace] = sz.size
	}
	var out []pmix.Proc
	for _, p := range l.procs {
		switch size, known := sizes[p.Nspace]; {
		case p.Rank != pmix.RankWildcard:
			if !in(p) && (!invitation || s.deadLocked(p)) {
				out = append(out, p)
			}
		case known && !invitation:
			for rk := range pmix.Rank(size) {
				if q := (pmix.Proc{Nspace: p.Nspace, Rank: rk}); !in(q) {
					out = append(out, q)
				}
			}
		default:
			for _, d := range s.deadListLocked() {
				if d.Nspace == p.Nspace && !in(d) {
					out = append(out, d)
				}
			}
		}
	}
	slices.SortFunc(out, pmix.CompareProcs)
	return slices.Compact(out)
}

// pgroupLocked returns the PMIx group name names, and its key.
func (s *Service) pgroupLocked(name string) (string, *group) {
	q, err := s.qualify(pmix.Proc{Nspace: name, Rank: pmix.RankWildcard})
	if err != nil {
		return "", nil
	}
	gr := s.groups[q.Nspace]
	if gr == nil || gr.flags&FlagGroup == 0 {
		return "", nil
	}
	return q.Nspace, gr
}

// Destruct runs PMIx_Group_destruct for one local member: a collective of
// the group's members (those that terminated, or left, excused), after
// which the name names nothing here.
//
// Errors: pmix.ErrNotFound when self is no member of a group of that
// name; Join's.
func (s *Service) Destruct(ctx context.Context, self pmix.Proc, name string, timeout time.Duration) error {
	me, err := s.qualify(self)
	if err != nil {
		return err
	}
	s.mu.Lock()
	key, gr := s.pgroupLocked(name)
	member := gr != nil && slices.Contains(gr.members, me) && !gr.left[me]
	s.mu.Unlock()
	if !member {
		return pmix.Errorf(pmix.ErrNotFound, "%v is no member of a group %s", self, pmix.Quote(name))
	}
	// The id is the name as the members gave it: the agents of every
	// cluster name the operation alike (each qualifies the name with its
	// own cluster to expand it into the members).
	_, err = s.Join(ctx, Request{Kind: KindGroupDestruct, ID: name, Procs: []pmix.Proc{{Nspace: key, Rank: pmix.RankWildcard}}, Self: self, Timeout: timeout})
	return err
}

// leftOfLocked is what a contribution to l excuses: the participants
// that terminated here, and for a destruct the members this agent heard
// left the group.
func (s *Service) leftOfLocked(l *local) []pmix.Proc {
	if l.kind != KindGroupDestruct {
		return l.gone
	}
	gone := slices.Clone(l.gone)
	if _, gr := s.pgroupLocked(l.id); gr != nil {
		for p := range gr.left {
			if !slices.Contains(gone, p) {
				gone = append(gone, p)
			}
		}
	}
	return gone
}

// Leave is PMIx_Group_leave: self leaves the group at once, and the other
// members get PMIX_GROUP_LEFT. Their agents learn of it (a notice on
// GoneSubject), so that the group's destruct excuses it.
//
// Errors: pmix.ErrNotFound when self is no member of a group of that
// name; pmix.ErrUnreach when the notice could not be sent.
func (s *Service) Leave(self pmix.Proc, name string) error {
	me, err := s.qualify(self)
	if err != nil {
		return err
	}
	s.mu.Lock()
	_, gr := s.pgroupLocked(name)
	if gr == nil || !slices.Contains(gr.members, me) || gr.left[me] {
		s.mu.Unlock()
		return pmix.Errorf(pmix.ErrNotFound, "%v is no member of a group %s", self, pmix.Quote(name))
	}
	s.leftLocked(gr, me)
	others := slices.DeleteFunc(gr.alive(), func(m pmix.Proc) bool { return m == me || gr.left[m] })
	gname := gr.name
	s.mu.Unlock()
	// The notice before the event: a member that destructs once it heard
	// of the departure finds its agent knowing it.
	b, err := goneNotice{proc: me, left: name}.marshal()
	if err == nil {
		err = s.cfg.Conn.Publish(GoneSubject(me.Nspace), b)
	}
	if err == nil {
		err = s.cfg.Conn.FlushTimeout(flushTimeout)
	}
	if err != nil {
		return pmix.Errorf(pmix.ErrUnreach, "telling the group's agents that %v left %s: %v", self, name, err)
	}
	s.mu.Lock()
	s.raiseFromLocked(self, pmix.GroupLeft, others, pmix.NewInfo(pmix.KeyGroupName, pmix.String(gname)))
	s.mu.Unlock()
	return nil
}

func (s *Service) leftLocked(gr *group, p pmix.Proc) {
	if gr.left == nil {
		gr.left = map[pmix.Proc]bool{}
	}
	gr.left[p] = true
	// A destruct in progress here, or coordinated here, excuses it.
	for _, ls := range s.open {
		for _, l := range slices.Clone(ls) {
			if l.kind == KindGroupDestruct && l.id == gr.name {
				s.localGoneLocked(l, p, "left the group")
			}
		}
	}
	for _, co := range s.coord {
		if co.kind == KindGroupDestruct && co.id == gr.name {
			s.coordGoneLocked(co, p, "left the group")
		}
	}
}

// memberLeft applies another agent's notice that p left group name. A
// notice for a group this agent does not know yet is kept (Remember) and
// applied when the group's release comes: the leaver's agent may have had
// the release first, and its member left at once. Dropped, such a notice
// left the group's destruct here waiting for the leaver for ever (cabi's
// TestGroupInvite, 1 run in ~20 under load).
func (s *Service) memberLeft(name string, p pmix.Proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, gr := s.pgroupLocked(name); gr != nil {
		if slices.Contains(gr.members, p) {
			s.leftLocked(gr, p)
		}
		return
	}
	now := time.Now()
	for n, ps := range s.earlyLeft {
		for q, at := range ps {
			if now.Sub(at) > s.cfg.Remember {
				delete(ps, q)
			}
		}
		if len(ps) == 0 {
			delete(s.earlyLeft, n)
		}
	}
	if s.earlyLeft[name] == nil {
		s.earlyLeft[name] = map[pmix.Proc]time.Time{}
	}
	s.earlyLeft[name][p] = now
}

// applyEarlyLeftLocked applies to gr, a PMIx group just recorded here,
// the leave notices that came before it (memberLeft).
func (s *Service) applyEarlyLeftLocked(gr *group) {
	ps := s.earlyLeft[gr.name]
	if ps == nil {
		return
	}
	delete(s.earlyLeft, gr.name)
	for p, at := range ps {
		if time.Since(at) <= s.cfg.Remember && slices.Contains(gr.members, p) {
			s.leftLocked(gr, p)
		}
	}
}

// groupMemberGoneLocked raises, for a PMIx group with
// PMIX_GROUP_NOTIFY_TERMINATION, PMIX_GROUP_MEMBER_FAILED at the other
// members (OpenPMIx: the terminated member is the affected proc, the
// group's name in PMIX_GROUP_ID).
func (s *Service) groupMemberGoneLocked(ns string, gr *group, g goneNotice) {
	if gr.flags&FlagNotifyTermination == 0 {
		return
	}
	p := g.proc
	others := slices.DeleteFunc(gr.alive(), func(m pmix.Proc) bool { return m == p || gr.left[m] })
	s.raiseLocked(causedID(g, ns, pmix.GroupMemberFailed), pmix.GroupMemberFailed, others, p,
		pmix.NewInfo(pmix.KeyGroupName, pmix.String(gr.name)),
		pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String(fmt.Sprintf("%v %s while a member of group %s", p, g.how(), gr.name))))
}

// GroupContext returns the context id of a PMIx group self is a member
// of, and whether there is such a group.
func (s *Service) GroupContext(name string) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, gr := s.pgroupLocked(name)
	if gr == nil {
		return 0, false
	}
	return gr.ctxid, true
}

// contextIDs gives context ids unique in the cluster set: a Memberships
// that implements it gives them (NATSMemberships: from its bucket), else
// a counter of this process does.
type contextIDs interface {
	NextContextID(ctx context.Context) (uint64, error)
}

var processContextIDs atomic.Uint64

// assignContextID gives a construct's release its context id, then sends
// it.
func (s *Service) assignContextID(co *coordinated, r *release) {
	var id uint64
	var err error
	if ids, ok := s.cfg.Memberships.(contextIDs); ok {
		ctx, cancel := context.WithTimeout(s.ctx, flushTimeout)
		id, err = ids.NextContextID(ctx)
		cancel()
	} else {
		id = processContextIDs.Add(1)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		err = pmix.Errorf(pmix.ErrUnreach, "assigning the group %s a context id: %v", co.id, err)
		r = &release{gen: co.key.gen, outcome: outcomeOf(err), flags: co.flags}
		s.publishReleaseLocked(co, r, err)
		return
	}
	r.ctxid = id
	s.publishReleaseLocked(co, r, nil)
}

// contextIDBlock is how many context ids one write to the bucket gives an
// agent.
const contextIDBlock = 1 << 10

// NextContextID gives a context id unique in the cluster set. An agent
// takes them in blocks of contextIDBlock: block r is the revision of a
// write of the key "contextid" (unique in the cluster's domain, never
// given twice, also across restarts), its ids r·1024 to r·1024+1023 in
// the low 48 bits, with a 15-bit hash of the cluster's domain in the high
// ones. One write per 1024 constructs that ask for an id.
func (s *NATSMemberships) NextContextID(ctx context.Context) (uint64, error) {
	s.ctxMu.Lock()
	defer s.ctxMu.Unlock()
	if s.ctxNext == s.ctxEnd {
		kv, err := s.open(ctx)
		if err != nil {
			return 0, err
		}
		rev, err := kv.Put(ctx, "contextid", nil)
		if err != nil {
			return 0, err
		}
		s.ctxNext, s.ctxEnd = rev*contextIDBlock, (rev+1)*contextIDBlock
	}
	id := s.ctxNext
	s.ctxNext++
	h := fnv.New32a()
	h.Write([]byte(s.domain))
	return uint64(h.Sum32()&0x7fff)<<48 | id&(1<<48-1), nil
}

// inviteKey names an invitation out: its leader and the group's name.
type inviteKey struct {
	leader pmix.Proc
	name   string
}

// InviteSubject is where the agent of a group's leader answers the
// invitees' agents with the group's proposed members while its
// invitation is out.
func InviteSubject(leader pmix.Proc, name string) string {
	c, ns, _ := cluster.Split(leader.Nspace)
	return fmt.Sprintf("%s.invite.%s.%s.%d.%s", Prefix, subjects.ClusterToken(string(c)), subjects.EscapeToken(ns), leader.Rank, subjects.EscapeToken(name))
}

// Invite is PMIx_Group_invite for its leader: the invitees get
// PMIX_GROUP_INVITED (with PMIX_GROUP_ID and PMIX_GROUP_MEMBERSHIP), and
// the group is constructed of the leader and those that accept
// (JoinGroup); those that decline, or terminate first, are left out.
// It returns once every invitee answered, or PMIX_TIMEOUT passed.
//
// Errors: Construct's.
func (s *Service) Invite(ctx context.Context, req GroupRequest) (Result, error) {
	if err := checkGroupName(req.Name); err != nil {
		return Result{}, err
	}
	leader, err := s.qualify(req.Self)
	if err != nil {
		return Result{}, err
	}
	procs, err := s.canonical(append(slices.Clone(req.Procs), req.Self))
	if err != nil {
		return Result{}, err
	}
	k := inviteKey{leader: leader, name: req.Name}
	b, err := marshalInvitation(procs, req.Flags|FlagGroup|FlagOptional|FlagInvitation)
	if err != nil {
		return Result{}, err
	}
	s.mu.Lock()
	if s.invites[k] != nil {
		s.mu.Unlock()
		return Result{}, pmix.Errorf(pmix.ErrBadParam, "%v has an invitation to %s out already", req.Self, pmix.Quote(req.Name))
	}
	sub, err := s.cfg.Conn.Subscribe(InviteSubject(leader, req.Name), func(m *nats.Msg) { _ = m.Respond(b) })
	if err != nil {
		s.mu.Unlock()
		return Result{}, pmix.Errorf(pmix.ErrUnreach, "offering the invitation: %v", err)
	}
	s.invites[k] = sub
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.invites, k)
		s.mu.Unlock()
		_ = sub.Unsubscribe()
	}()
	if err := s.cfg.Conn.FlushTimeout(flushTimeout); err != nil {
		return Result{}, pmix.Errorf(pmix.ErrUnreach, "offering the invitation: %v", err)
	}
	invitees := slices.DeleteFunc(slices.Clone(procs), func(p pmix.Proc) bool { return p == leader })
	s.mu.Lock()
	s.raiseFromLocked(req.Self, pmix.GroupInvited, invitees,
		pmix.NewInfo(pmix.KeyGroupName, pmix.String(req.Name)), pmix.NewInfo(pmix.KeyGroupMembership, pmix.Procs(procs)))
	s.mu.Unlock()
	res, err := s.Join(ctx, Request{
		Kind: KindGroup, ID: req.Name, Procs: procs, Self: req.Self,
		Timeout: req.Timeout, Collect: true, Flags: req.Flags | FlagGroup | FlagOptional | FlagInvitation,
	})
	err = constructAbort(err)
	if err == nil {
		s.mu.Lock()
		others := slices.DeleteFunc(slices.Clone(res.Members), func(p pmix.Proc) bool { return p == leader })
		s.raiseFromLocked(req.Self, pmix.GroupConstructDone, others,
			pmix.NewInfo(pmix.KeyGroupName, pmix.String(req.Name)), pmix.NewInfo(pmix.KeyGroupMembership, pmix.Procs(res.Members)),
			pmix.NewInfo(pmix.KeyEventNonDefault, pmix.Bool(true)))
		s.mu.Unlock()
	}
	return res, err
}

// JoinGroup is PMIx_Group_join: self answers leader's invitation to group
// name. Accepting, it takes part in the group's construct and returns
// once it completed; declining, it is left out of it and returns at once.
// Either way the leader gets PMIX_GROUP_INVITE_ACCEPTED or _DECLINED. A
// leader that terminates before the construct completed is left out of
// the group (or, once it had taken part, a member gone), and the members
// that accepted get PMIX_GROUP_LEADER_FAILED.
//
// Errors: pmix.ErrNotFound when the leader has no such invitation out
// (or is gone: no hang); Construct's.
func (s *Service) JoinGroup(ctx context.Context, self, leader pmix.Proc, name string, accept bool, timeout time.Duration) (Result, error) {
	me, err := s.qualify(self)
	if err != nil {
		return Result{}, err
	}
	if leader.Nspace == "" || !leader.Rank.Valid() {
		return Result{}, pmix.Errorf(pmix.ErrBadParam, "group join of %s: want the leader's nspace and rank, got %v", pmix.Quote(name), leader)
	}
	ldr, err := s.qualify(leader)
	if err != nil {
		return Result{}, err
	}
	wait := s.cfg.AckWait * 5
	if timeout > 0 {
		wait = min(wait, timeout)
	}
	rctx, cancel := context.WithTimeout(ctx, wait)
	msg, err := s.cfg.Conn.RequestWithContext(rctx, InviteSubject(ldr, name), nil)
	cancel()
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) {
			return Result{}, pmix.Errorf(pmix.ErrNotFound, "%v has no invitation to group %s out", leader, pmix.Quote(name))
		}
		return Result{}, pmix.Errorf(pmix.ErrUnreach, "asking %v for its invitation to %s: %v", leader, pmix.Quote(name), err)
	}
	procs, flags, err := unmarshalInvitation(msg.Data)
	if err != nil {
		return Result{}, err
	}
	if !slices.Contains(procs, me) {
		return Result{}, pmix.Errorf(pmix.ErrNotFound, "%v is not invited to group %s", self, pmix.Quote(name))
	}
	code := pmix.GroupInviteAccepted
	if !accept {
		code = pmix.GroupInviteDeclined
	}
	s.mu.Lock()
	s.raiseFromLocked(self, code, []pmix.Proc{ldr}, pmix.NewInfo(pmix.KeyGroupName, pmix.String(name)))
	s.mu.Unlock()
	req := Request{Kind: KindGroup, ID: name, Procs: procs, Self: self, Timeout: timeout, Collect: true, Flags: flags}
	if !accept {
		return Result{}, s.decline(req)
	}
	res, err := s.Join(ctx, req)
	err = constructAbort(err)
	if err == nil {
		s.mu.Lock()
		if !slices.Contains(res.Members, ldr) || s.deadLocked(ldr) {
			// The leader terminated before the group was constructed:
			// the others constructed it without it (or with it gone),
			// and hear of it.
			s.raiseLocked("", pmix.GroupLeaderFailed, []pmix.Proc{me}, ldr, pmix.NewInfo(pmix.KeyGroupName, pmix.String(name)))
		}
		s.mu.Unlock()
	}
	return res, err
}

// decline takes self out of the operation req names: excused, as a
// participant of an optional operation that terminated.
func (s *Service) decline(req Request) error {
	procs, err := s.canonical(req.Procs)
	if err != nil {
		return err
	}
	self, err := s.qualify(req.Self)
	if err != nil {
		return err
	}
	o := op{kind: req.Kind, id: req.ID, procs: procs}
	sig := s.sigs.of(o)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	var l *local
	for _, c := range s.open[sig] {
		if !c.arrived[self] && c.expect[self] {
			l = c
			break
		}
	}
	if l == nil {
		if l, err = s.beginLocked(o, sig, self); err != nil {
			return err
		}
	}
	l.flags |= req.Flags | FlagOptional
	if req.Timeout > l.timeout {
		l.timeout = req.Timeout
	}
	s.localGoneLocked(l, self, "declined")
	return nil
}

// invitation: [1, procs: [Proc], flags: uint].
func marshalInvitation(procs []pmix.Proc, flags Flags) ([]byte, error) {
	w := newEnc()
	w.arr(3)
	w.uint(wireVersion)
	w.procs(procs)
	w.uint(uint64(flags))
	return w.bytes()
}

func unmarshalInvitation(b []byte) ([]pmix.Proc, Flags, error) {
	var procs []pmix.Proc
	var flags Flags
	err := decode(b, "invitation", func(d *dec) {
		d.arr(3, "invitation")
		d.version()
		procs = d.procs("procs")
		flags = Flags(d.uint(255, "flags"))
	})
	if err == nil && len(procs) == 0 {
		err = pmix.Errorf(pmix.ErrUnpackFailure, "an invitation without members")
	}
	return procs, flags, err
}

// Psets returns the PMIx groups this agent knows (one of its processes
// is a member, or its cluster stored it), by name as their members gave
// it, each with its members in rank order: what a query of the process
// sets reads (PMIX_QUERY_PSET_NAMES, PMIX_QUERY_PSET_MEMBERSHIP).
func (s *Service) Psets() map[string][]pmix.Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]pmix.Proc{}
	for _, gr := range s.groups {
		if gr.flags&FlagGroup != 0 && gr.name != "" {
			out[gr.name] = slices.DeleteFunc(slices.Clone(gr.members), func(p pmix.Proc) bool { return gr.left[p] })
		}
	}
	return out
}
