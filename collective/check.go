package collective

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// The release check. A release goes out once, and what NATS cannot carry
// across a cut leaf link it drops: a success released while another
// cluster's agent is cut off completes the operation on this side only,
// while the agent there, hearing nothing, fails its participants at its
// timeout. So before it releases a success, a coordinator asks each agent
// of another cluster that contributed whether it still waits for the
// release (CheckSubject), and releases once all said yes. While one does
// not answer, the release is held: until the link comes back (then the
// operation completes on every side), or until the operation's own
// timeout, when the coordinator fails it with PMIX_ERR_TIMEOUT, as the
// cut-off agent fails its participants (docs/collective.md, "Partitions").
// An agent that answers that it gave up already (its timeout passed)
// makes the coordinator fail it too. Operations within one cluster are
// not checked: their agents share the cluster's servers, and a node cut
// off from them is declared down (docs/liveness.md).

// CheckSubject is where the coordinator of an operation asks node's agent
// of cluster c whether it still waits for the operation's release: every
// agent subscribes once, with its first job.
func CheckSubject(c cluster.ID, node string) string {
	return Prefix + ".check." + subjects.ClusterToken(string(c)) + "." + subjects.EscapeToken(node)
}

// check asks for one instance of an operation: [1, signature: str, gen:
// uint]. The answer is an ack: success when the agent still waits for the
// release, PMIX_ERR_TIMEOUT when it no longer does.
type check struct{ key opKey }

func (c check) marshal() ([]byte, error) {
	w := newEnc()
	w.arr(3)
	w.uint(wireVersion)
	w.str(c.key.sig)
	w.uint(c.key.gen)
	return w.bytes()
}

func unmarshalCheck(b []byte) (check, error) {
	var c check
	err := decode(b, "check", func(d *dec) {
		d.arr(3, "check")
		d.version()
		c.key.sig = d.str("signature")
		c.key.gen = d.uint(1<<63, "gen")
		if d.err == nil && len(c.key.sig) != 32 {
			d.fail("signature", fmt.Errorf("%d bytes, want 32", len(c.key.sig)))
		}
	})
	return c, err
}

// remoteLocked returns the agents of other clusters that contributed to
// co, "cluster/node", sorted.
func (s *Service) remoteLocked(co *coordinated) []string {
	var out []string
	for n := range co.nodes {
		if c, _, _ := strings.Cut(n, "/"); c != string(s.cfg.Cluster) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// holdLocked reports whether co's success must wait for the release check,
// and starts it once.
func (s *Service) holdLocked(co *coordinated) bool {
	if co.checked {
		return false
	}
	if co.unready == nil {
		remote := s.remoteLocked(co)
		if len(remote) == 0 {
			return false
		}
		co.unready = map[string]bool{}
		for _, n := range remote {
			co.unready[n] = true
		}
		s.goFuncLocked(func() { s.checkRelease(co, remote) })
	}
	return true
}

// checkRelease asks the agents of nodes whether they still wait for co's
// release, and releases its success once all said yes (see above).
func (s *Service) checkRelease(co *coordinated, nodes []string) {
	b, err := check{key: co.key}.marshal()
	if err != nil {
		s.mu.Lock()
		if s.coord[co.key] == co {
			s.concludeLocked(co, pmix.Errorf(pmix.ErrPackFailure, "%s release check: %v", co.kind, err))
		}
		s.mu.Unlock()
		return
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() { s.checkNode(co, n, b) })
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.coord[co.key] == co && len(co.unready) == 0 {
		co.checked = true
		s.concludeLocked(co, nil)
	}
}

// checkNode asks node ("cluster/node") until it answers, or co ends.
func (s *Service) checkNode(co *coordinated, node string, b []byte) {
	c, n, _ := strings.Cut(node, "/")
	subj := CheckSubject(cluster.ID(c), n)
	warnAt := time.Now().Add(s.cfg.WarnAfter)
	for {
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.AckWait)
		msg, err := s.cfg.Conn.RequestWithContext(ctx, subj, b)
		cancel()
		var a ack
		if err == nil {
			a, err = unmarshalAck(msg.Data)
		}
		s.mu.Lock()
		if s.coord[co.key] != co {
			s.mu.Unlock()
			return
		}
		if err != nil && s.allDeadLocked(co.by[node]) {
			// Its processes were declared terminated (its node went down
			// with them): there is nobody left there to disagree.
			delete(co.unready, node)
			s.mu.Unlock()
			return
		}
		if err == nil {
			if a.status == pmix.Success {
				delete(co.unready, node)
			} else {
				s.concludeLocked(co, a.err())
			}
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if time.Now().After(warnAt) {
			warnAt = time.Now().Add(s.cfg.WarnAfter)
			s.log.Warn("collective: holding a release: an agent of another cluster that contributed does not answer",
				"kind", string(co.kind), "id", co.id, "agent", node, "err", err)
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(s.cfg.Retry):
		}
	}
}

// allDeadLocked reports whether every one of procs is known terminated.
func (s *Service) allDeadLocked(procs []pmix.Proc) bool {
	for _, p := range procs {
		if !s.deadLocked(p) {
			return false
		}
	}
	return len(procs) > 0
}

// unreadyLocked names the agents co's release waits for, for messages.
func (co *coordinated) unreadyLocked() string {
	return strings.Join(slices.Sorted(maps.Keys(co.unready)), ", ")
}

// checkMsg answers a coordinator's check: yes while this agent's instance
// is open and contributed, and it then waits one grace more at its
// timeout (the release is on its way).
func (s *Service) checkMsg(m *nats.Msg) {
	c, err := unmarshalCheck(m.Data)
	if err != nil {
		s.log.Warn("collective: dropping a malformed release check", "subject", m.Subject, "err", err)
		s.respond(m, ack{outcomeOf(err)})
		return
	}
	s.mu.Lock()
	var l *local
	for _, o := range s.open[c.key.sig] {
		if o.key == c.key {
			l = o
		}
	}
	a := ack{}
	if l == nil || l.finished || !l.contributed {
		a = ack{outcomeOf(fmt.Errorf("%w: the agent of node %s in cluster %s no longer waits for its release (it gave up on it, or restarted)",
			ErrTimeout, s.cfg.Node, s.cfg.Cluster))}
	} else if !l.checked {
		l.checked = true
		// The release should follow at once. If it does not come within
		// AckWait (a cut right after this answer), the contribution goes
		// again, and again every Retry while the link is down: the
		// coordinator, which concluded, sends the release again as soon as
		// one arrives.
		time.AfterFunc(s.cfg.AckWait, func() {
			select {
			case l.nudge <- struct{}{}:
			default:
			}
		})
	}
	s.mu.Unlock()
	s.respond(m, a)
}

// Reconnected is called by the agent when its NATS connection came back:
// a release published while it was away never reaches it, so every
// contribution still waiting for one goes again now, and a coordinator
// that concluded the operation sends its release again.
func (s *Service) Reconnected() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ls := range s.open {
		for _, l := range ls {
			if l.contributed && !l.finished && !l.alone {
				select {
				case l.nudge <- struct{}{}:
				default:
				}
			}
		}
	}
}
