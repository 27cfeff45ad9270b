package collective

import (
	"context"
	"math"
	"slices"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
)

// Flags are RFC0003's connect attributes. The participants of one connect
// may give different ones: the operation has the union of what they gave.
type Flags uint8

const (
	// FlagOptional is PMIX_CONNECT_OPTIONAL: a participant that terminates
	// without connecting does not fail the operation; the others connect
	// without it.
	FlagOptional Flags = 1 << iota
	// FlagEarlyTermAllowed is PMIX_CONNECT_EARLY_TERM_ALLOWED: a member
	// that terminates while connected raises no PMIX_ERR_PROC_TERM_WO_SYNC.
	FlagEarlyTermAllowed
	// FlagNotifyEach is PMIX_CONNECT_NOTIFY_EACH: PMIX_PROC_HAS_CONNECTED
	// to the participants as each one connects, and
	// PMIX_PROC_HAS_DISCONNECTED (pmix.ProcHasDisconnected) to the members
	// as each one disconnects or, with FlagEarlyTermAllowed, terminates.
	FlagNotifyEach
	// FlagNotifyReq is PMIX_CONNECT_NOTIFY_REQ: PMIX_CONNECT_REQUESTED to
	// the participants that have not called yet, once per agent.
	FlagNotifyReq
	// FlagNotifyTermination is PMIX_GROUP_NOTIFY_TERMINATION: a member of
	// a PMIx group that terminates raises PMIX_GROUP_MEMBER_FAILED at the
	// others (pgroup.go).
	FlagNotifyTermination
	// FlagAssignContextID is PMIX_GROUP_ASSIGN_CONTEXT_ID: the construct's
	// coordinator gives the group a context id unique in the cluster set.
	FlagAssignContextID
	// FlagGroup marks a PMIx group (PMIx_Group_construct), as opposed to
	// a connect's.
	FlagGroup
	// FlagInvitation marks a PMIx group's construct made by an invitation
	// (PMIx_Group_invite): its members left out declined, or terminated.
	FlagInvitation
)

// FlagsOf reads RFC0003's connect attributes from a request's info.
func FlagsOf(info []pmix.Info) Flags {
	var f Flags
	for key, flag := range map[string]Flags{
		pmix.KeyConnectOptional: FlagOptional, pmix.KeyConnectEarlyTermAllowed: FlagEarlyTermAllowed,
		pmix.KeyConnectNotifyEach: FlagNotifyEach, pmix.KeyConnectNotifyReq: FlagNotifyReq,
	} {
		if pmix.Flag(info, key) {
			f |= flag
		}
	}
	return f
}

// group is a connect's new nspace as an agent knows it.
type group struct {
	members []pmix.Proc // qualified, in new rank order
	flags   Flags
	// gone: members that terminated without disconnecting. Collectives on
	// the group leave them out.
	gone map[pmix.Proc]bool
	// A PMIx group's (FlagGroup): its name as its members gave it, its
	// context id (0: none), and the members that left it.
	name  string
	ctxid uint64
	left  map[pmix.Proc]bool
}

// alive returns the members that have not terminated.
func (g *group) alive() []pmix.Proc {
	return slices.DeleteFunc(slices.Clone(g.members), func(p pmix.Proc) bool { return g.gone[p] })
}

// raiseLocked raises an event about proc to targets (CUSTOM range)
// through the agent's event path, on a goroutine of the service; id is
// its id, or "" for the agent to give one.
func (s *Service) raiseLocked(id string, code pmix.Status, targets []pmix.Proc, about pmix.Proc, extra ...pmix.Info) {
	if s.cfg.Raise == nil || len(targets) == 0 {
		return
	}
	info := append([]pmix.Info{
		pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs(targets)),
		pmix.NewInfo(pmix.KeyEventAffectedProc, pmix.ProcValue(about)),
	}, extra...)
	s.goFuncLocked(func() {
		if err := s.cfg.Raise(s.ctx, id, code, info); err != nil {
			s.log.Warn("collective: raising an event", "code", code.String(), "about", about.String(), "err", err)
		}
	})
}

// notifyArrivalLocked raises what l's attributes ask for when self arrives
// here: PMIX_PROC_HAS_CONNECTED (PMIX_PROC_HAS_DISCONNECTED for a
// disconnect) to the other participants, and, on the first arrival here
// that asks, PMIX_CONNECT_REQUESTED to the participants that have not
// arrived here.
func (s *Service) notifyArrivalLocked(l *local, self pmix.Proc, flags Flags) {
	others := slices.DeleteFunc(slices.Clone(l.procs), func(p pmix.Proc) bool { return p == self })
	if flags&FlagNotifyEach != 0 {
		switch l.kind {
		case KindConnect, KindConnectXchg:
			s.raiseLocked("", pmix.ProcHasConnected, others, self)
		case KindDisconnect:
			s.raiseLocked("", pmix.ProcHasDisconnected, others, self, pmix.NewInfo(pmix.KeyNspace, pmix.String(l.id)))
		}
	}
	if flags&FlagNotifyReq != 0 && !l.requested && (l.kind == KindConnect || l.kind == KindConnectXchg) {
		l.requested = true
		waiting := slices.DeleteFunc(slices.Clone(l.procs), func(p pmix.Proc) bool { return l.arrived[p] })
		s.raiseLocked("", pmix.ConnectRequested, waiting, self)
	}
}

// groupOfLocked records a connect's group, and where this agent is its
// cluster's writer, stores it (see Memberships). A member this agent
// heard terminated after it arrived, before the release, is gone at once,
// as if it had terminated connected (memberGoneLocked). It reports
// whether it subscribed to terminations it did not hear of before: the
// caller flushes before the members learn they are connected, so that a
// member that terminates at once is heard of.
func (s *Service) groupOfLocked(nspace string, gr *group) bool {
	s.groups[nspace] = gr
	if gr.flags&FlagGroup != 0 {
		s.applyEarlyLeftLocked(gr)
	}
	subscribed := false
	for _, m := range gr.members {
		subscribed = s.watchGoneLocked(m.Nspace, false) || subscribed
	}
	for _, m := range gr.members {
		if dp, ok := s.dead[m]; ok {
			s.memberGoneLocked(nspace, gr, dp.notice, dp.told)
		}
	}
	s.saveGroupLocked(nspace, gr)
	return subscribed
}

// writesLocked reports whether this agent stores gr for its cluster: it
// hosts the first member of its cluster.
func (s *Service) writesLocked(gr *group) bool {
	for _, m := range gr.members {
		if ns, ok := s.local(m.Nspace); ok {
			return s.cfg.Jobs(ns)[m.Rank] == s.cfg.Node
		}
	}
	return false
}

// saveGroupLocked stores gr if this agent is its cluster's writer: on a
// goroutine, in the order of the calls.
func (s *Service) saveGroupLocked(nspace string, gr *group) {
	if !s.writesLocked(gr) {
		return
	}
	rec := Membership{Members: slices.Clone(gr.members), Flags: gr.flags}
	for _, m := range gr.members {
		if gr.gone[m] {
			rec.Gone = append(rec.Gone, m)
		}
	}
	s.persistLocked(func(ctx context.Context) error { return s.cfg.Memberships.Put(ctx, nspace, rec) })
}

// dropGroupLocked forgets a group every member left, and deletes its
// record where this agent wrote it.
func (s *Service) dropGroupLocked(nspace string) {
	gr := s.groups[nspace]
	if gr == nil {
		return
	}
	delete(s.groups, nspace)
	if s.writesLocked(gr) {
		s.persistLocked(func(ctx context.Context) error { return s.cfg.Memberships.Delete(ctx, nspace) })
	}
}

// persistLocked queues a write of the memberships, done in order on one
// goroutine.
func (s *Service) persistLocked(f func(context.Context) error) {
	s.writes = append(s.writes, f)
	if s.writing {
		return
	}
	s.writing = true
	s.goFuncLocked(func() {
		for {
			s.mu.Lock()
			if len(s.writes) == 0 {
				s.writing = false
				s.mu.Unlock()
				return
			}
			f := s.writes[0]
			s.writes = s.writes[1:]
			s.mu.Unlock()
			ctx, cancel := context.WithTimeout(s.ctx, flushTimeout)
			if err := f(ctx); err != nil {
				s.log.Warn("collective: storing a group's membership; an agent that restarts will not know it", "err", err)
			}
			cancel()
		}
	})
}

// Restore reads the memberships of the groups of this agent's cluster,
// so that an agent that restarted knows again the groups its processes
// are members of (to fence on, disconnect from, and report terminations
// to). The agent calls it once, before its clients attach.
//
// Errors: pmix.ErrUnreach when the store cannot be read; ErrClosed.
func (s *Service) Restore(ctx context.Context) error {
	all, err := s.cfg.Memberships.All(ctx)
	if err != nil {
		return pmix.Errorf(pmix.ErrUnreach, "reading the groups' memberships: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	for ns, rec := range all {
		if s.groups[ns] != nil {
			continue
		}
		gr := &group{members: rec.Members, flags: rec.Flags}
		if rec.Flags&FlagGroup != 0 {
			_, gr.name, _ = cluster.Split(ns) // a PMIx group: its name
		}
		for _, m := range rec.Gone {
			s.markGoneLocked(gr, m)
		}
		s.groups[ns] = gr
		for _, m := range gr.members {
			s.watchGoneLocked(m.Nspace, false)
		}
	}
	return nil
}

// Members returns the members of a connect's new nspace that this agent
// knows (one of its processes is a member, or its cluster stored it), in
// new rank order, and whether it knows it. An unqualified nspace is of
// this cluster.
func (s *Service) Members(nspace string) ([]pmix.Proc, bool) {
	q, err := s.qualify(pmix.Proc{Nspace: nspace, Rank: pmix.RankWildcard})
	if err != nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	gr := s.groups[q.Nspace]
	if gr == nil {
		return nil, false
	}
	return slices.Clone(gr.members), true
}

// Targets returns procs with those of a connect's new nspace that this
// agent knows replaced by the members they stand for (WILDCARD: every
// member, a rank: the member of that new rank), the others as they are,
// and whether any was replaced: how an event addresses a group
// (RFC0003). An unqualified nspace is of this cluster.
//
// Errors: pmix.ErrBadParam for a rank the new nspace does not have.
func (s *Service) Targets(procs []pmix.Proc) ([]pmix.Proc, bool, error) {
	var out []pmix.Proc
	replaced := false
	for _, p := range procs {
		members, ok := s.Members(p.Nspace)
		switch {
		case !ok:
			out = append(out, p)
		case p.Rank == pmix.RankWildcard:
			out, replaced = append(out, members...), true
		default:
			q, _ := s.qualify(pmix.Proc{Nspace: p.Nspace, Rank: pmix.RankWildcard})
			m, err := s.member(pmix.Proc{Nspace: q.Nspace, Rank: p.Rank})
			if err != nil {
				return nil, false, err
			}
			out, replaced = append(out, m), true
		}
	}
	return out, replaced, nil
}

// Groups returns the members of every group this agent knows (one of its
// processes is a member, or its cluster stored it), qualified, each in
// new rank order.
func (s *Service) Groups() [][]pmix.Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]pmix.Proc, 0, len(s.groups))
	for _, gr := range s.groups {
		out = append(out, slices.Clone(gr.members))
	}
	return out
}

// GroupJobInfo returns the job-level info of a connect's new nspace: its
// size (pmix.KeyJobSize, the number of members), and whether the nspace
// is one.
func (s *Service) GroupJobInfo(nspace string) ([]pmix.Info, bool) {
	members, ok := s.Members(nspace)
	if !ok || len(members) > math.MaxUint32 {
		return nil, false
	}
	return []pmix.Info{pmix.NewInfo(pmix.KeyJobSize, pmix.Uint32(uint32(len(members))))}, true
}
