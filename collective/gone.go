package collective

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// Terminations: a process that ends is announced by its agent
// (ProcTerminated), or, when its node is down, by the agents that declared
// the node down (NodeDown), on GoneSubject. Coordinators of operations
// with participants of its nspace subscribe there — and ask, as they
// subscribe, the agents of its cluster to announce again what they
// announced lately (AskSubject), so that a notice published before the
// subscription reached its server is not lost; so do the agents taking
// part in a connect (before they contribute) and holding groups it is a
// member of (watchGoneLocked).

// GoneSubject is where the agent hosting a process says it terminated:
// coordinators of operations it takes part in, and agents holding groups
// it is a member of, subscribe for its nspace.
func GoneSubject(nspace string) string {
	id, ns, _ := cluster.Split(nspace)
	return Prefix + ".gone." + subjects.ClusterToken(string(id)) + "." + subjects.EscapeToken(ns)
}

// AskSubject is where an agent that begins to watch the terminations of
// an nspace of cluster c asks that cluster's agents to announce again
// the terminations of that nspace they announced within Config.Remember.
// The ask follows the subscription on the same connection, so wherever
// it arrives NATS knows the subscription already, and any notice
// published from then on reaches it.
func AskSubject(c cluster.ID) string {
	return Prefix + ".goneask." + subjects.ClusterToken(string(c))
}

// goneNotice says a process terminated: [1, proc: Proc, abnormal: bool,
// cause: str].
type goneNotice struct {
	proc     pmix.Proc // qualified
	abnormal bool
	// cause is "" when the process's own agent announces it. Otherwise it
	// names the declaration that took the process for dead with its node
	// (NodeDown), the same at every agent that declared it: every agent
	// holding a group of the process then raises the group's events, with
	// ids derived from it.
	cause string
	// left names the PMIx group the process left (PMIx_Group_leave): it
	// did not terminate. Sent as a fifth element only when set.
	left string
}

func (g goneNotice) marshal() ([]byte, error) {
	w := newEnc()
	if g.left != "" {
		w.arr(5)
	} else {
		w.arr(4)
	}
	w.uint(wireVersion)
	w.proc(g.proc)
	w.bool(g.abnormal)
	w.str(g.cause)
	if g.left != "" {
		w.str(g.left)
	}
	return w.bytes()
}

func unmarshalGoneNotice(b []byte) (goneNotice, error) {
	var g goneNotice
	err := decode(b, "gone notice", func(d *dec) {
		n := d.len("gone notice")
		if d.err == nil && n != 4 && n != 5 {
			d.err = pmix.Errorf(pmix.ErrUnpackFailure, "collective message gone notice: want 4 or 5 elements, got %d", n)
		}
		d.version()
		if d.err == nil {
			d.fail("proc", g.proc.DecodeMsgpack(d.d))
		}
		g.abnormal = d.bool("abnormal")
		g.cause = d.str("cause")
		if n == 5 {
			g.left = d.str("left")
		}
	})
	return g, err
}

// goneAsk asks for the terminations of an nspace again: [1, nspace: str
// (qualified)].
type goneAsk struct{ nspace string }

func (a goneAsk) marshal() ([]byte, error) {
	w := newEnc()
	w.arr(2)
	w.uint(wireVersion)
	w.str(a.nspace)
	return w.bytes()
}

func unmarshalGoneAsk(b []byte) (goneAsk, error) {
	var a goneAsk
	err := decode(b, "gone ask", func(d *dec) {
		d.arr(2, "gone ask")
		d.version()
		a.nspace = d.str("nspace")
	})
	return a, err
}

// deadProc is a process this agent heard terminated.
type deadProc struct {
	at     time.Time
	notice goneNotice
	// told: this agent announced it, for its own process or a node it
	// declared down, and announces it again when asked.
	told bool
}

// origin is where a termination comes from.
type origin int

const (
	fromNotice      origin = iota // another agent's notice
	fromHost                      // this agent's own process (ProcTerminated)
	fromDeclaration               // a node this agent declared down (NodeDown)
)

// ProcTerminated tells the service that a process of this agent's node
// ended, normally or not (abnormal), with or without having disconnected.
// The launch service calls it from the goroutine that reaped the process,
// once the process is gone; a host RM that watches its own processes
// calls it alike. It does not block on the network (the notice to the
// other agents is a publish) and may be called twice for one process: the
// second call does nothing, for Config.Remember.
//
// What follows, by what the process was doing:
//
//   - A participant of a pending operation that had not arrived fails it
//     for every participant with ErrParticipantTerminated
//     (PMIX_ERR_PROC_TERM_WO_SYNC), unless it is a connect with
//     PMIX_CONNECT_OPTIONAL: the others then connect without it. So
//     does one whose operation reaches its coordinator only later,
//     within Config.Remember (AskSubject).
//   - A member of a connect's group that had not disconnected raises
//     PMIX_ERR_PROC_TERM_WO_SYNC at every other member, on every cluster,
//     unless the connect had PMIX_CONNECT_EARLY_TERM_ALLOWED (then, with
//     PMIX_CONNECT_NOTIFY_EACH, PMIX_PROC_HAS_DISCONNECTED). Either way
//     later collectives on the group (a fence, the disconnect) leave it
//     out.
//
// Errors: pmix.ErrBadParam for an invalid proc; ErrClosed; ctx.Err() if
// ctx ended before the call.
func (s *Service) ProcTerminated(ctx context.Context, p pmix.Proc, abnormal bool) error {
	return s.terminated(ctx, []pmix.Proc{p}, goneNotice{abnormal: abnormal}, fromHost)
}

// NodeDown tells the service that a node of its cluster is down with the
// processes it hosted: the agent's liveness service declared it (its
// agent's key expired), and that agent, gone, reports none of them.
// Each counts as terminated abnormally, as if its own agent had called
// ProcTerminated: it fails (or, OPTIONAL, is left out of) the pending
// operations it had not arrived in, and as a member of a group raises
// PMIX_ERR_PROC_TERM_WO_SYNC at the other members on every cluster
// unless EARLY_TERM_ALLOWED. Every agent of the cluster declares the node
// and calls NodeDown with the same cause, which names the declaration
// (the node and its key's expiry): the group's events are raised by
// every agent holding the group, with ids derived from the cause, so
// that each member runs each once.
//
// Errors: pmix.ErrBadParam for an empty cause or an invalid proc;
// ErrClosed; ctx.Err() if ctx ended before the call.
func (s *Service) NodeDown(ctx context.Context, cause string, procs []pmix.Proc) error {
	if cause == "" {
		return pmix.Errorf(pmix.ErrBadParam, "node down without a cause")
	}
	return s.terminated(ctx, procs, goneNotice{abnormal: true, cause: cause}, fromDeclaration)
}

// terminated applies the terminations of procs here and announces them,
// each with the abnormal flag and cause of g.
func (s *Service) terminated(ctx context.Context, procs []pmix.Proc, g goneNotice, from origin) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	notices := make([]goneNotice, 0, len(procs))
	for _, p := range procs {
		q, err := s.qualify(p)
		if err != nil {
			return err
		}
		if !q.Rank.Valid() {
			return pmix.Errorf(pmix.ErrBadParam, "terminated process %v: want a real rank", p)
		}
		g.proc = q
		notices = append(notices, g)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	// Before the notices: an agent that begins to watch their nspace
	// afterwards asks again, and this agent must hear it.
	s.listenLocked()
	s.mu.Unlock()
	for _, n := range notices {
		s.procGone(n, from)
		s.announce(n)
	}
	return nil
}

// announce publishes a termination on its nspace's GoneSubject.
func (s *Service) announce(g goneNotice) {
	b, err := g.marshal()
	if err == nil {
		err = s.cfg.Conn.Publish(GoneSubject(g.proc.Nspace), b)
	}
	if err != nil {
		s.log.Warn("collective: the other agents will not hear that a process terminated", "proc", g.proc.String(), "err", err)
	}
}

// listenLocked subscribes, once, to the asks for this cluster's
// terminations (AskSubject).
func (s *Service) listenLocked() {
	if s.closed || s.askSub != nil {
		return
	}
	sub, err := s.cfg.Conn.Subscribe(AskSubject(s.cfg.Cluster), s.askMsg)
	if err != nil {
		s.log.Warn("collective: agents that begin to watch this cluster's terminations will not hear those announced before", "err", err)
		return
	}
	s.askSub = sub
	if s.checkSub, err = s.cfg.Conn.Subscribe(CheckSubject(s.cfg.Cluster, s.cfg.Node), s.checkMsg); err != nil {
		s.log.Warn("collective: coordinators in other clusters will hold the releases of this agent's operations until their timeout", "err", err)
	}
}

// listenHomeLocked subscribes, once per cluster, to the asks of cluster
// home, which names a job across clusters this agent hosts ranks of: the
// job's coordinators, there, ask there for its terminations (watchGoneLocked).
// It reports whether it subscribed now.
func (s *Service) listenHomeLocked(home cluster.ID) bool {
	if s.closed || s.askHomes[home] != nil {
		return false
	}
	sub, err := s.cfg.Conn.Subscribe(AskSubject(home), s.askMsg)
	if err != nil {
		s.log.Warn("collective: coordinators in another cluster will not hear of terminations announced before they watched them", "cluster", home, "err", err)
		return false
	}
	s.askHomes[home] = sub
	return true
}

// askMsg announces again the terminations this agent announced within
// Config.Remember, of the nspace asked for.
func (s *Service) askMsg(m *nats.Msg) {
	a, err := unmarshalGoneAsk(m.Data)
	if err != nil {
		s.log.Warn("collective: dropping a malformed ask", "subject", m.Subject, "err", err)
		return
	}
	now := time.Now()
	var again []goneNotice
	s.mu.Lock()
	for p, d := range s.dead {
		if d.told && p.Nspace == a.nspace && now.Sub(d.at) <= s.cfg.Remember {
			again = append(again, d.notice)
		}
	}
	s.mu.Unlock()
	for _, g := range again {
		s.announce(g)
	}
}

// goneMsg takes another agent's notice that a process terminated.
func (s *Service) goneMsg(m *nats.Msg) {
	g, err := unmarshalGoneNotice(m.Data)
	if err != nil {
		s.log.Warn("collective: dropping a malformed notice", "subject", m.Subject, "err", err)
		return
	}
	if g.left != "" {
		s.memberLeft(g.left, g.proc)
		return
	}
	s.procGone(g, fromNotice)
}

// procGone applies a termination here: to the operations this agent takes
// part in (fromHost: it is the terminated process's agent) and
// coordinates, and to the groups it holds (memberGoneLocked).
func (s *Service) procGone(g goneNotice, from origin) {
	p := g.proc
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for d, dp := range s.dead {
		if now.Sub(dp.at) > s.cfg.Remember {
			delete(s.dead, d)
		}
	}
	if dp, seen := s.dead[p]; seen || s.closed {
		if seen && from != fromNotice && !dp.told {
			// Heard from another agent first; this one announces it too
			// now, and answers the asks for it.
			dp.told = true
			s.dead[p] = dp
		}
		return
	}
	s.dead[p] = deadProc{at: now, notice: g, told: from != fromNotice}
	s.deadGen++
	s.endsLocked()
	if from == fromHost {
		for _, ls := range s.open {
			for _, l := range slices.Clone(ls) {
				s.localGoneLocked(l, p, g.how())
			}
		}
	}
	for _, co := range s.coord {
		s.coordGoneLocked(co, p, g.how())
	}
	for ns, gr := range s.groups {
		if slices.Contains(gr.members, p) {
			s.memberGoneLocked(ns, gr, g, from == fromHost)
		}
	}
}

// how says how a process ended, for messages.
func (g goneNotice) how() string {
	switch {
	case g.cause != "":
		return "was lost with its node"
	case g.abnormal:
		return "terminated abnormally"
	}
	return "terminated"
}

// memberGoneLocked marks a member of group ns gone and stores that. Its
// own agent (own) raises the group's event at the other members; for a
// process lost with its node, every agent holding the group does, with
// ids derived from the cause.
func (s *Service) memberGoneLocked(ns string, gr *group, g goneNotice, own bool) {
	p := g.proc
	if gr.gone[p] {
		return
	}
	s.markGoneLocked(gr, p)
	s.saveGroupLocked(ns, gr)
	if !own && g.cause == "" {
		return
	}
	if gr.flags&FlagGroup != 0 {
		s.groupMemberGoneLocked(ns, gr, g)
		return
	}
	others := slices.DeleteFunc(gr.alive(), func(m pmix.Proc) bool { return m == p })
	info := []pmix.Info{pmix.NewInfo(pmix.KeyNspace, pmix.String(ns))}
	switch {
	case gr.flags&FlagEarlyTermAllowed == 0:
		info = append(info, pmix.NewInfo(pmix.KeyEventTextMessage,
			pmix.String(fmt.Sprintf("%v %s while connected to %s, without disconnecting", p, g.how(), ns))))
		if !g.abnormal && g.cause == "" {
			// It finalized and exited normally: only the handlers
			// registered for the code hear it, not the default ones.
			// Open MPI 4.1's MPI_Comm_disconnect is a fence, never
			// PMIx_Disconnect, so every spawned child that ends after it
			// looks connected; raised to its parents' default handler
			// (Open MPI's aborts at any event), mpi4py's spawn tests
			// aborted or crashed in MPI_Finalize 1 run in ~12.
			info = append(info, pmix.NewInfo(pmix.KeyEventNonDefault, pmix.Bool(true)))
		}
		s.raiseLocked(causedID(g, ns, pmix.ErrProcTermWOSync), pmix.ErrProcTermWOSync, others, p, info...)
	case gr.flags&FlagNotifyEach != 0:
		s.raiseLocked(causedID(g, ns, pmix.ProcHasDisconnected), pmix.ProcHasDisconnected, others, p, info...)
	}
}

// causedID is the id of a group's event about a process lost with its
// node: the same at every agent that raises it. "" (the agent gives one)
// for a termination its own agent reported.
func causedID(g goneNotice, group string, code pmix.Status) string {
	if g.cause == "" {
		return ""
	}
	h := sha256.New()
	for _, s := range []string{g.cause, group, g.proc.Nspace, strconv.FormatUint(uint64(g.proc.Rank), 10), strconv.Itoa(int(code))} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "collgone." + hex.EncodeToString(h.Sum(nil)[:16])
}

// markGoneLocked marks member p of gr gone.
func (s *Service) markGoneLocked(gr *group, p pmix.Proc) {
	if gr.gone == nil {
		gr.gone = map[pmix.Proc]bool{}
	}
	gr.gone[p] = true
	if !s.goneMembers[p] {
		s.goneMembers[p] = true
		s.deadGen++
	}
}

// deadLocked reports whether this agent heard that p terminated: lately
// (ProcTerminated, NodeDown, or another agent's notice), or as a member
// of a group.
func (s *Service) deadLocked(p pmix.Proc) bool {
	_, ok := s.dead[p]
	return ok || s.goneMembers[p]
}

// deadListLocked returns every process deadLocked reports.
func (s *Service) deadListLocked() []pmix.Proc {
	out := make([]pmix.Proc, 0, len(s.dead)+len(s.goneMembers))
	for p := range s.dead {
		out = append(out, p)
	}
	for p := range s.goneMembers {
		if _, ok := s.dead[p]; !ok {
			out = append(out, p)
		}
	}
	return out
}

// localGoneLocked applies a termination to this agent's part in l: a
// participant that had not arrived fails it, or, for an optional connect,
// is left out.
func (s *Service) localGoneLocked(l *local, p pmix.Proc, how string) {
	if l.finished || l.contributed || !l.expect[p] || l.arrived[p] {
		return
	}
	if l.flags&FlagOptional != 0 {
		delete(l.expect, p)
		l.gone = append(l.gone, p)
		if len(l.arrived) == len(l.expect) && !l.contributed {
			s.completeLocked(l)
		}
		return
	}
	if l.alone {
		s.finishLocked(l, fmt.Errorf("%w: %s of %s: participant %v %s before it arrived", ErrParticipantTerminated, l.kind, describe(l.procs), p, how))
		return
	}
	s.contributeLocked(l, ErrParticipantTerminated.Status, fmt.Sprintf("%s: participant %v %s before it arrived", l.kind, p, how))
}

// coordGoneLocked applies a termination to an operation this agent
// coordinates.
func (s *Service) coordGoneLocked(co *coordinated, p pmix.Proc, how string) {
	if co.covered[p] || co.excused[p] || !slices.ContainsFunc(co.procs, func(q pmix.Proc) bool { return q.Matches(p) }) {
		return
	}
	if co.flags&FlagOptional != 0 {
		co.excused[p] = true
		if co.complete() {
			s.concludeLocked(co, nil)
		}
		return
	}
	s.concludeLocked(co, fmt.Errorf("%w: %s of %s: participant %v %s before it arrived", ErrParticipantTerminated, co.kind, describe(co.procs), p, how))
}

// watchGoneLocked subscribes to the termination notices of an nspace's
// processes, once; the subscriptions stay until Close: one per nspace
// this agent took part in a connect of, coordinated an operation of, or
// held a group member of. It reports whether it subscribed now.
//
// A coordinator also asks (ask), once per nspace, its cluster's agents to
// announce again those they announced lately (AskSubject): it must know of
// a participant that terminated before it heard of the operation. An
// agent taking part in a connect needs no ask: it subscribes before it
// contributes, so a member that terminates after the connect completed
// is announced after NATS knew the subscription, and one that terminated
// before is known to the coordinator, whose ask backs it.
func (s *Service) watchGoneLocked(nspace string, ask bool) bool {
	if s.closed {
		return false
	}
	subscribed := false
	if s.goneSubs[nspace] == nil {
		sub, err := s.cfg.Conn.Subscribe(GoneSubject(nspace), s.goneMsg)
		if err != nil {
			s.log.Warn("collective: this agent will not hear of terminations", "nspace", nspace, "err", err)
			return false
		}
		s.goneSubs[nspace], subscribed = sub, true
	}
	if !ask || s.asked[nspace] {
		return subscribed
	}
	s.asked[nspace] = true
	id, _, _ := cluster.Split(nspace)
	b, err := goneAsk{nspace: nspace}.marshal()
	if err == nil {
		err = s.cfg.Conn.Publish(AskSubject(id), b)
	}
	if err != nil {
		s.log.Warn("collective: terminations announced before this agent watched them may be missed", "nspace", nspace, "err", err)
	}
	return subscribed
}
