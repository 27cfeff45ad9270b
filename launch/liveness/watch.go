package liveness

import (
	"cmp"
	"slices"
	"sync"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/subjects"
)

// State is what a node's key says of its agent.
type State int

const (
	// Up: the agent refreshes its key.
	Up State = iota
	// Down: the key expired; the cluster declared the node down.
	Down
	// Stopped: the agent stopped cleanly and deleted its key.
	Stopped
)

func (s State) String() string {
	switch s {
	case Up:
		return "up"
	case Down:
		return "down"
	case Stopped:
		return "stopped"
	}
	return "unknown"
}

// Entry is one node's key, as the bucket holds it.
type Entry struct {
	Cluster cluster.ID
	Node    string
	State   State
	// Record is the agent's value; nil for a key that is down or stopped,
	// or whose value does not parse.
	Record *Record
	// Revision of the key's last write (the expiry marker's, when Down).
	Revision uint64
	// At is when the key was last written: the last beat when Up, the
	// expiry when Down.
	At time.Time
}

// watch follows every key of the bucket until the watcher stops: it keeps
// the view of the agents alive, and declares down the nodes whose keys
// expire (nodeDown). The initial values only fill the view: an expiry
// marker among them is old, and whoever was watching then has raised it.
func (s *Service) watch(w natsjs.KeyWatcher) {
	var readyOnce sync.Once
	initial := true
	for e := range w.Updates() {
		if e == nil {
			initial = false
			readyOnce.Do(func() { close(s.ready) })
			continue
		}
		k := e.Key()
		switch e.Operation() {
		case natsjs.KeyValuePut:
			rec, err := parseRecord(e.Value())
			if err != nil {
				s.log.Warn("an agent's liveness key holds a value that does not parse; its node cannot be declared down with its procs", "key", k, "err", err)
			}
			s.mu.Lock()
			s.view[k] = &peer{rec: rec, revision: e.Revision(), beat: e.Created()}
			s.mu.Unlock()
		case natsjs.KeyValueDelete:
			s.mu.Lock()
			p := s.view[k]
			delete(s.view, k)
			s.mu.Unlock()
			if p != nil && !initial {
				s.log.Info("agent stopped", "node", nodeOf(k))
			}
		case natsjs.KeyValuePurge:
			// Nats-Marker-Reason MaxAge: the key expired (an operator's
			// purge reads the same, and counts as the node going down).
			s.mu.Lock()
			p := s.view[k]
			delete(s.view, k)
			s.mu.Unlock()
			switch {
			case initial || p == nil:
			case k == s.key:
				s.log.Warn("this agent's own liveness key expired; refreshing it again", "key", k)
				select {
				case s.kick <- struct{}{}:
				default:
				}
			default:
				s.expired(k, p, e.Revision(), e.Created())
			}
		}
	}
	readyOnce.Do(func() { close(s.ready) }) // stopped before the initial values
}

// nodeOf is the node of a key.
func nodeOf(k string) string { return subjects.Unescaped(k) }

// Agents returns the agents alive in the cluster, as the watcher last saw
// their keys (this one among them), sorted by node.
func (s *Service) Agents() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Entry, 0, len(s.view))
	for k, p := range s.view {
		out = append(out, Entry{Cluster: s.cfg.Cluster, Node: nodeOf(k), State: Up, Record: p.rec, Revision: p.revision, At: p.beat})
	}
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.Node, b.Node) })
	return out
}
