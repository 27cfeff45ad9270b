package collective

import (
	"slices"
	"sync"

	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// store holds committed data: what the agent's own clients committed, and
// what fences with PMIX_COLLECT_DATA brought from the others. Procs are
// qualified.
type store struct {
	mu      sync.Mutex
	procs   map[pmix.Proc]*stored
	changed chan struct{} // closed and replaced on every change
}

type stored struct {
	cluster, node string
	values        map[string]proto.Put
}

func newStore() *store {
	return &store{procs: map[pmix.Proc]*stored{}, changed: make(chan struct{})}
}

// add merges puts into proc's data: a key put again replaces its value.
func (s *store) add(d procData) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.procs[d.proc]
	if st == nil {
		st = &stored{values: map[string]proto.Put{}}
		s.procs[d.proc] = st
	}
	st.cluster, st.node = d.cluster, d.node
	for _, p := range d.puts {
		st.values[p.Key] = p
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// shared returns what proc committed for other nodes (REMOTE and GLOBAL),
// as a fence with PMIX_COLLECT_DATA carries it.
func (s *store) shared(proc pmix.Proc) (procData, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.procs[proc]
	if st == nil {
		return procData{}, false
	}
	d := procData{proc: proc, cluster: st.cluster, node: st.node}
	for _, p := range st.values {
		if p.Scope == pmix.ScopeRemote || p.Scope == pmix.ScopeGlobal {
			d.puts = append(d.puts, p)
		}
	}
	slices.SortFunc(d.puts, func(a, b proto.Put) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return d, true
}

// get returns proc's value of key if its scope lets a reader on
// (cluster, node) see it; wait is closed when the store next changes.
func (s *store) get(proc pmix.Proc, key, cluster, node string) (v pmix.Value, found, visible bool, wait <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.procs[proc]
	if st == nil {
		return pmix.Value{}, false, false, s.changed
	}
	p, ok := st.values[key]
	if !ok {
		return pmix.Value{}, false, false, s.changed
	}
	same := st.cluster == cluster && st.node == node
	return p.Value, true, p.Scope.Reaches(same), s.changed
}

// forget drops the data of procs for which drop is true.
func (s *store) forget(drop func(pmix.Proc) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := range s.procs {
		if drop(p) {
			delete(s.procs, p)
		}
	}
}
