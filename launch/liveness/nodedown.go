package liveness

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
)

// NodeDown is a node the cluster declared down: its agent's key expired.
type NodeDown struct {
	Cluster cluster.ID
	Node    string
	// Revision is the expiry marker's revision in the bucket, the same for
	// every agent that saw it: the events' ids derive from it.
	Revision uint64
	// At is when the key expired; LastBeat when its agent last refreshed it.
	At, LastBeat time.Time
	// Jobs are the jobs the node hosted, with their ranks there, as its
	// key last listed them.
	Jobs []HostedJob
	// Events are the ids of the events raised, in order: for each job a
	// PMIX_EVENT_NODE_DOWN, then a PMIX_ERR_PROC_TERM_WO_SYNC per proc.
	Events []string
	// Err is what went wrong raising them, if anything.
	Err error
}

// OnNodeDown calls f after this agent raised the events of a node it
// declared down (every agent of the cluster does so, and the agents of
// the jobs keep one copy of each event). f must not block for long.
func (s *Service) OnNodeDown(f func(NodeDown)) {
	s.mu.Lock()
	s.downFuncs = append(s.downFuncs, f)
	s.mu.Unlock()
}

// expired handles the expiry of another agent's key, whose last value the
// watcher held. An agent whose own connection was down lately waits a TTL
// first: if the node's key is back by then, the expiry was the outage's
// (a restarted NATS server expires every key at once) and nothing is
// raised.
func (s *Service) expired(k string, p *peer, rev uint64, at time.Time) {
	d := NodeDown{Cluster: s.cfg.Cluster, Node: nodeOf(k), Revision: rev, At: at, LastBeat: p.beat}
	if p.rec != nil {
		d.Jobs = p.rec.Jobs
	}
	if !s.recentOutage() {
		s.declare(d)
		return
	}
	s.log.Info("a node's liveness key expired shortly after this agent's own NATS connection came back; waiting one TTL for it to return before declaring it down",
		"node", d.Node, "ttl", s.cfg.TTL)
	s.goFunc(func() {
		select {
		case <-time.After(s.cfg.TTL):
		case <-s.done:
			return
		}
		s.mu.Lock()
		back := s.view[k]
		s.mu.Unlock()
		if back != nil && back.revision > rev {
			s.log.Info("a node whose key expired during a NATS outage is back; not declared down", "node", d.Node)
			return
		}
		s.declare(d)
	})
}

// declare raises the node's events and tells the OnNodeDown functions.
func (s *Service) declare(d NodeDown) {
	s.stats.declared.Add(1)
	procs := 0
	for _, j := range d.Jobs {
		procs += len(j.Ranks)
	}
	s.log.Warn("node down: its agent's liveness key expired", "node", d.Node, "last_beat", d.LastBeat, "late", d.At.Sub(d.LastBeat), "jobs", len(d.Jobs), "procs", procs)
	var errs []error
	for _, m := range Events(d) {
		d.Events = append(d.Events, m.ID)
		if err := s.cfg.Host.Raise(m); err != nil {
			errs = append(errs, fmt.Errorf("%v %s: %w", m.Code, m.ID, err))
		}
	}
	if d.Err = errors.Join(errs...); d.Err != nil {
		s.log.Error("raising the events of a node down", "node", d.Node, "err", d.Err)
	}
	s.mu.Lock()
	fs := s.downFuncs
	s.mu.Unlock()
	for _, f := range fs {
		f(d)
	}
}

// Events returns the events of a node down, ids set, in the order they
// are raised: for each job the node hosted a PMIX_EVENT_NODE_DOWN to the
// job (range NAMESPACE, source the cluster's RM, info
// PMIX_EVENT_AFFECTED_PROCS with the job's procs on the node, PMIX_HOSTNAME,
// PMIX_EVENT_TIMESTAMP and a PMIX_EVENT_TEXT_MESSAGE), then for each of
// those procs a PMIX_ERR_PROC_TERM_WO_SYNC to its job (range NAMESPACE,
// source the dead proc, PMIX_EVENT_AFFECTED_PROC of type PROC — what Open
// MPI's ULFM handler reads —, PMIX_HOSTNAME and a text). Every agent that
// declares the node down makes the same events with the same ids, which
// derive from the cluster, the node, the expiry marker's revision, the
// nspace and the rank: receiving agents drop the copies they have seen
// (event ids), and the event cache keeps one (Nats-Msg-Id).
func Events(d NodeDown) []*event.Message {
	var out []*event.Message
	text := fmt.Sprintf("node %s of cluster %s is down: its agent's liveness key expired", d.Node, d.Cluster)
	host := pmix.NewInfo(pmix.KeyHostname, pmix.String(d.Node))
	for _, j := range d.Jobs {
		if len(j.Ranks) == 0 {
			continue
		}
		procs := j.Procs()
		out = append(out, &event.Message{
			ID: eventID(d, j.Nspace, "down"), Code: pmix.EventNodeDown, Range: pmix.RangeNamespace,
			Source: bus.Origin{Cluster: string(d.Cluster)},
			Info: []pmix.Info{
				pmix.NewInfo(pmix.KeyNspace, pmix.String(j.Nspace)),
				pmix.NewInfo(pmix.KeyEventAffectedProcs, pmix.Procs(procs)),
				host,
				pmix.NewInfo(pmix.KeyEventTimestamp, pmix.Time(d.At)),
				pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String(text)),
			},
			Time: d.At,
		})
		for _, p := range procs {
			out = append(out, &event.Message{
				ID: eventID(d, j.Nspace, strconv.FormatUint(uint64(p.Rank), 10)), Code: pmix.ErrProcTermWOSync, Range: pmix.RangeNamespace,
				Source: bus.Origin{Cluster: string(d.Cluster), Node: d.Node, Session: j.Session, Proc: p},
				Info: []pmix.Info{
					pmix.NewInfo(pmix.KeyEventAffectedProc, pmix.ProcValue(p)),
					host,
					pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String(fmt.Sprintf("%v terminated without finalizing: %s", p, text))),
				},
				Time: d.At,
			})
		}
	}
	return out
}

// eventID is the id of one event of a node down: the same on every agent.
func eventID(d NodeDown, nspace, what string) string {
	h := sha256.New()
	for _, s := range []string{string(d.Cluster), d.Node, strconv.FormatUint(d.Revision, 10), nspace, what} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "nodedown." + hex.EncodeToString(h.Sum(nil)[:16])
}
