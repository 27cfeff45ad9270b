package collective

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
)

// coordinated is an operation this agent coordinates: the contributions so
// far.
type coordinated struct {
	op
	key     opKey
	nodes   map[string]bool    // "cluster/node" of the agents that contributed
	covered map[pmix.Proc]bool // real ranks, qualified
	excused map[pmix.Proc]bool // participants that terminated (FlagOptional)
	flags   Flags
	sizes   map[string]int // WILDCARD nspace → ranks
	data    []procData
	jobs    map[string][]pmix.Info
	started time.Time
	warn    *time.Timer
	timeout time.Duration // the longest any contribution gave
	timer   *time.Timer
	// unready: the agents of other clusters that have not said yet that
	// they wait for the release (check.go); nil before the check began.
	unready map[string]bool
	checked bool                   // they all said so: the success may go out
	by      map[string][]pmix.Proc // the participants each agent covered
}

func (co *coordinated) stop() {
	if co.warn != nil {
		co.warn.Stop()
	}
	if co.timer != nil {
		co.timer.Stop()
	}
}

// finished is an operation concluded here, remembered to answer
// latecomers.
type finished struct {
	nodes   map[string]bool
	err     error
	at      time.Time
	release []byte // sent again to an agent that contributed and is still waiting
}

// contributed takes an agent's contribution to an operation this agent
// coordinates, acknowledges it, and releases the operation once every
// participant is covered, or one agent gave up.
func (s *Service) contributed(m *nats.Msg) {
	c, err := unmarshalContribution(m.Data)
	if err != nil {
		s.log.Warn("collective: dropping a malformed contribution", "subject", m.Subject, "err", err)
		s.respond(m, ack{outcomeOf(err)})
		return
	}
	procs, err := canonical(s.cfg.Cluster, c.procs)
	if err != nil || !slices.Equal(procs, c.procs) {
		s.respond(m, ack{outcomeOf(pmix.Errorf(pmix.ErrBadParam, "%s contribution with participants out of canonical order", c.kind))})
		return
	}
	key := opKey{sig: s.sigs.of(c.op), gen: c.gen}
	from := c.cluster + "/" + c.node
	s.mu.Lock()
	if f, ok := s.finished[key]; ok {
		s.mu.Unlock()
		if f.nodes[from] {
			// Sent again: the agent waits still, so the release did not
			// reach it. Once more, to all (the others have unsubscribed).
			if f.release != nil {
				if err := s.cfg.Conn.Publish(ReleaseSubject(key.sig), f.release); err != nil {
					s.log.Warn("collective: sending a release again", "err", err)
				}
			}
			s.respond(m, ack{})
			return
		}
		if errors.Is(f.err, ErrParticipantTerminated) {
			// Not late: a participant's end ended it, for all alike.
			s.respond(m, ack{outcomeOf(f.err)})
			return
		}
		s.respond(m, ack{outcomeOf(fmt.Errorf("%w: %s of %s ended before these participants arrived: %s (it ended with: %v)",
			ErrFinished, c.kind, describe(c.procs), describe(c.covers), f.err))})
		return
	}
	if s.closed {
		s.mu.Unlock()
		s.respond(m, ack{outcomeOf(ErrClosed)})
		return
	}
	co := s.coord[key]
	if co == nil {
		co = &coordinated{op: c.op, key: key, nodes: map[string]bool{}, covered: map[pmix.Proc]bool{}, excused: map[pmix.Proc]bool{}, sizes: map[string]int{}, started: time.Now()}
		s.coord[key] = co
		s.warnLater(co)
		seen := map[string]bool{}
		for _, p := range co.procs {
			if !seen[p.Nspace] {
				seen[p.Nspace] = true
				s.watchGoneLocked(p.Nspace, true)
			}
		}
	}
	co.flags |= c.flags
	for _, p := range c.gone {
		co.excused[p] = true
	}
	if co.kind == KindGroupDestruct {
		// Members that left before this agent coordinated the destruct:
		// the notice came first, and no leftLocked will excuse them again.
		if _, gr := s.pgroupLocked(co.id); gr != nil {
			for p := range gr.left {
				co.excused[p] = true
			}
		}
	}
	if c.status != pmix.Success {
		for _, p := range c.covers { // those that did arrive there
			co.covered[p] = true
		}
		for _, sz := range c.sizes {
			co.sizes[sz.nspace] = int(sz.size)
		}
		if c.status != pmix.ErrTimeout {
			s.concludeLocked(co, pmix.NewCodedError(c.status, ErrParticipantTerminated.Code, c.message))
		} else {
			s.failLocked(co, c.status, fmt.Sprintf("%s timed out after %v", co.kind, c.timeout))
		}
		s.mu.Unlock()
		s.respond(m, ack{})
		return
	}
	if c.timeout > co.timeout {
		co.timeout = c.timeout
		if co.timer != nil {
			co.timer.Stop()
		}
		// Half the grace later than the agents: an agent whose participants
		// have not all arrived names them first.
		co.timer = time.AfterFunc(time.Until(co.started.Add(co.timeout+s.cfg.Grace/2)), func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.coord[co.key] == co {
				s.failLocked(co, pmix.ErrTimeout, fmt.Sprintf("%s timed out after %v", co.kind, co.timeout))
			}
		})
	}
	if !co.nodes[from] {
		co.nodes[from] = true
		if co.by == nil {
			co.by = map[string][]pmix.Proc{}
		}
		co.by[from] = c.covers
		for _, p := range c.covers {
			co.covered[p] = true
		}
		for _, sz := range c.sizes {
			co.sizes[sz.nspace] = int(sz.size)
		}
		co.data = append(co.data, c.data...)
		for _, j := range c.jobs {
			if co.jobs == nil {
				co.jobs = map[string][]pmix.Info{}
			}
			co.jobs[j.nspace] = j.info
		}
	}
	for _, p := range s.deadListLocked() { // terminated before this operation was heard of here
		if s.coord[key] == co {
			s.coordGoneLocked(co, p, "terminated")
		}
	}
	if s.coord[key] == co && co.complete() {
		s.concludeLocked(co, nil)
	}
	s.mu.Unlock()
	s.respond(m, ack{})
}

func (s *Service) respond(m *nats.Msg, a ack) {
	b, err := a.marshal()
	if err == nil {
		err = m.Respond(b)
	}
	if err != nil {
		s.log.Debug("collective: acknowledging a contribution", "err", err)
	}
}

// complete reports whether the contributions cover every participant: each
// explicit one, and as many ranks of each WILDCARD nspace as its cluster's
// agents say it has.
func (co *coordinated) complete() bool {
	per := map[string]int{}
	for p := range co.covered {
		per[p.Nspace]++
	}
	for p := range co.excused {
		if !co.covered[p] {
			per[p.Nspace]++
		}
	}
	for _, p := range co.procs {
		if p.Rank != pmix.RankWildcard {
			if !co.covered[p] && !co.excused[p] {
				return false
			}
			continue
		}
		if size, known := co.sizes[p.Nspace]; !known || per[p.Nspace] < size {
			return false
		}
	}
	return true
}

// missing names the participants not covered yet, for messages (the ranks
// of a WILDCARD nspace taken as 0 to its size - 1).
func (co *coordinated) missing() string { return missingOf(co.procs, co.sizes, co.covered) }

// missingOf names the participants of procs not covered, a WILDCARD
// nspace's ranks taken as 0 to its size - 1.
func missingOf(procs []pmix.Proc, sizes map[string]int, covered map[pmix.Proc]bool) string {
	var out []string
	for _, p := range procs {
		if p.Rank != pmix.RankWildcard {
			if !covered[p] {
				out = append(out, p.String())
			}
			continue
		}
		size, known := sizes[p.Nspace]
		if !known {
			out = append(out, p.String()+" (no agent of its cluster has contributed)")
			continue
		}
		var ranks []string
		for r := range pmix.Rank(size) {
			if !covered[pmix.Proc{Nspace: p.Nspace, Rank: r}] {
				ranks = append(ranks, strconv.FormatUint(uint64(r), 10))
			}
		}
		if len(ranks) > 0 {
			if len(ranks) > 16 {
				ranks = append(ranks[:16], "…")
			}
			out = append(out, fmt.Sprintf("%s.{%s} (%d of %d ranks)", p.Nspace, strings.Join(ranks, ","), len(ranks), size))
		}
	}
	return strings.Join(out, ", ")
}

// failLocked releases a failure, naming the participants that had not
// arrived.
func (s *Service) failLocked(co *coordinated, status pmix.Status, msg string) {
	if missing := co.missing(); missing != "" {
		msg += "; not arrived: " + missing
	}
	if len(co.unready) > 0 {
		msg += "; every participant arrived, but these agents of other clusters did not answer (cut off?): " + co.unreadyLocked()
	}
	s.concludeLocked(co, pmix.NewCodedError(status, ErrTimeout.Code, msg))
}

// concludeLocked releases an operation to every participating agent: one
// message on its release subject.
func (s *Service) concludeLocked(co *coordinated, err error) {
	if err == nil && s.holdLocked(co) {
		return // once the agents of the other clusters answered (check.go)
	}
	co.stop()
	delete(s.coord, co.key)
	now := time.Now()
	for k, f := range s.finished {
		if now.Sub(f.at) > s.cfg.Remember {
			delete(s.finished, k)
		}
	}
	r := &release{gen: co.key.gen, outcome: outcomeOf(err), flags: co.flags}
	if err == nil {
		r.data = co.data
		if co.kind == KindConnect || co.kind == KindConnectXchg || co.kind == KindGroup {
			r.members = slices.SortedFunc(maps.Keys(co.covered), pmix.CompareProcs)
			r.members = slices.DeleteFunc(r.members, func(p pmix.Proc) bool { return co.excused[p] })
		}
		if co.kind == KindConnect {
			r.nspace = s.newNspace(r.members)
		}
		for _, ns := range slices.Sorted(maps.Keys(co.jobs)) {
			r.jobs = append(r.jobs, jobInfo{nspace: ns, info: co.jobs[ns]})
		}
	}
	if err == nil && co.kind == KindGroup && co.flags&FlagAssignContextID != 0 {
		// The context id comes from the cluster's store: the release
		// follows it, from a goroutine.
		s.finished[co.key] = finished{nodes: co.nodes, at: now}
		s.goFuncLocked(func() { s.assignContextID(co, r) })
		return
	}
	s.publishReleaseLocked(co, r, err)
}

// publishReleaseLocked sends r, and remembers it for the latecomers.
func (s *Service) publishReleaseLocked(co *coordinated, r *release, err error) {
	b, merr := r.marshal()
	s.finished[co.key] = finished{nodes: co.nodes, err: err, at: time.Now(), release: b}
	if merr == nil {
		merr = s.cfg.Conn.Publish(ReleaseSubject(co.key.sig), b)
	}
	if merr != nil {
		s.log.Error("collective: the release could not be sent; its participants will time out", "kind", string(co.kind), "err", merr)
	}
}

// newNspace names a connect's new nspace: "cnct." and a name unique to
// this coordinator's run and operation, qualified with the coordinator's
// cluster when the members span clusters. Called with s.mu held.
func (s *Service) newNspace(members []pmix.Proc) string {
	s.seq++
	name := "cnct." + s.run + "." + strconv.FormatUint(s.seq, 10)
	first, _, _ := cluster.Split(members[0].Nspace)
	for _, m := range members {
		c, ns, _ := cluster.Split(m.Nspace)
		if _, spans := s.home(ns); c != first || (spans && c == s.cfg.Cluster) {
			// Members in several clusters, or of a job across clusters:
			// the agents of the others read an unqualified name as theirs.
			return cluster.Qualify(s.cfg.Cluster, name)
		}
	}
	return name // the coordinator's cluster: the first member's
}

// warnLater logs, every WarnAfter while the operation waits, who has not
// arrived.
func (s *Service) warnLater(co *coordinated) {
	co.warn = time.AfterFunc(s.cfg.WarnAfter, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.coord[co.key] != co {
			return
		}
		s.log.Warn("collective still waiting", "kind", string(co.kind), "id", co.id,
			"waiting", time.Since(co.started).Round(time.Second).String(), "not_arrived", co.missing())
		s.warnLater(co)
	})
}

// describe formats procs for messages.
func describe(procs []pmix.Proc) string {
	parts := make([]string, len(procs))
	for i, p := range procs {
		parts[i] = p.String()
	}
	return strings.Join(parts, ", ")
}
