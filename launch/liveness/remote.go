package liveness

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
)

// Connection is a group of processes of this cluster connected to
// processes of others (a connect's group, RFC0003): when one of those
// clusters is lost, Local hears that the nodes hosting its Remote
// members went down. One per group, not per process: a group of n
// members across two clusters is O(n), not O(n²).
type Connection struct {
	// Remote are the other clusters' members, qualified ("B:sim", rank).
	Remote []pmix.Proc
	// Local are this cluster's members.
	Local []pmix.Proc
}

// ConnectionHost is implemented by a Host that knows the connections of
// its cluster's processes to other clusters' (the agent's collectives).
// The service then watches those clusters (Config.ClusterGrace).
type ConnectionHost interface {
	Connections() []Connection
}

// remoteView is what the service knows of another cluster its processes
// are connected to: its agents as last read, and when it last answered.
type remoteView struct {
	entries  []Entry
	seen     time.Time
	declared bool
}

// remotes is the service's watch of other clusters (watchRemotes).
type remotes struct {
	mu    sync.Mutex
	views map[cluster.ID]*remoteView
}

// watchRemotes reads, every Interval, the agents bucket of every cluster
// this cluster's processes are connected to. A cluster whose bucket
// cannot be read for ClusterGrace — its leaf link is down, or all of it
// — is declared lost: for each of its nodes that hosted connected
// processes, this cluster's members of their groups get
// PMIX_EVENT_NODE_DOWN (range CUSTOM, source the lost cluster, info
// PMIX_EVENT_AFFECTED_PROCS the connected processes on the node and
// PMIX_HOSTNAME). Every agent of the cluster declares it with the same
// event ids (the node's last key revision), so each member gets one.
// A leaf link that comes back within the grace raises nothing: links
// reconnect.
func (s *Service) watchRemotes(h ConnectionHost) {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		byCluster := map[cluster.ID][]Connection{}
		for _, c := range h.Connections() {
			seen := map[cluster.ID]bool{}
			for _, p := range c.Remote {
				id, _, ok := cluster.Split(p.Nspace)
				if ok && id != s.cfg.Cluster && !seen[id] {
					seen[id] = true
					byCluster[id] = append(byCluster[id], c)
				}
			}
		}
		s.rem.mu.Lock()
		for id := range s.rem.views {
			if _, still := byCluster[id]; !still {
				delete(s.rem.views, id) // no connection left to it
			}
		}
		s.rem.mu.Unlock()
		for id, cs := range byCluster {
			s.checkRemote(id, cs)
		}
	}
}

// checkRemote reads cluster id's agents, or declares it lost.
func (s *Service) checkRemote(id cluster.ID, conns []Connection) {
	ctx, cancel := context.WithTimeout(s.ctx, max(s.cfg.Interval, time.Second))
	entries, err := ReadAgents(ctx, s.cfg.Conn, id)
	cancel()
	now := time.Now()
	s.rem.mu.Lock()
	v := s.rem.views[id]
	if v == nil {
		v = &remoteView{seen: now}
		s.rem.views[id] = v
	}
	if err == nil {
		s.stats.remoteReads.Add(1)
		v.entries, v.seen = entries, now
		if v.declared {
			s.log.Info("a lost cluster answers again", "cluster", id)
		}
		v.declared = false
		s.rem.mu.Unlock()
		return
	}
	lost := !v.declared && now.Sub(v.seen) >= s.cfg.ClusterGrace && v.entries != nil
	if lost {
		v.declared = true
	}
	entries = v.entries
	s.rem.mu.Unlock()
	if !lost {
		return
	}
	s.log.Warn("a cluster connected to this one has not answered for the grace; declaring its nodes that host connected processes down",
		"cluster", id, "grace", s.cfg.ClusterGrace, "err", err)
	for _, m := range RemoteEvents(id, entries, conns, now) {
		if err := s.cfg.Host.Raise(m); err != nil {
			s.log.Warn("raising a lost cluster's node down", "cluster", id, "err", err)
		}
	}
}

// RemoteEvents are the PMIX_EVENT_NODE_DOWN events of cluster id lost:
// one per node of entries that hosted a connected process, to this
// cluster's members of the groups those processes are in.
func RemoteEvents(id cluster.ID, entries []Entry, conns []Connection, at time.Time) []*event.Message {
	node := map[pmix.Proc]int{} // a process of cluster id → its entry
	for i, e := range entries {
		if e.Record == nil {
			continue
		}
		for _, j := range e.Record.Jobs {
			for _, r := range j.Ranks {
				node[pmix.Proc{Nspace: cluster.Qualify(id, j.Nspace), Rank: r}] = i
			}
		}
	}
	// By entry: the connected processes it hosted, and the members of
	// their groups here.
	hosted := make([]map[pmix.Proc]bool, len(entries))
	members := make([]map[pmix.Proc]bool, len(entries))
	for _, c := range conns {
		hit := map[int]bool{}
		for _, p := range c.Remote {
			i, ok := node[p]
			if !ok {
				continue
			}
			if hosted[i] == nil {
				hosted[i], members[i] = map[pmix.Proc]bool{}, map[pmix.Proc]bool{}
			}
			hosted[i][p], hit[i] = true, true
		}
		for i := range hit {
			for _, l := range c.Local {
				members[i][l] = true
			}
		}
	}
	var out []*event.Message
	for i, e := range entries {
		if len(hosted[i]) == 0 {
			continue
		}
		affected := slices.SortedFunc(maps.Keys(hosted[i]), pmix.CompareProcs)
		tl := slices.SortedFunc(maps.Keys(members[i]), pmix.CompareProcs)
		d := NodeDown{Cluster: id, Node: e.Node, Revision: e.Revision, At: at}
		out = append(out, &event.Message{
			ID:     eventID(d, "", "cluster-lost."+strconv.Itoa(len(affected))),
			Code:   pmix.EventNodeDown,
			Range:  pmix.RangeCustom,
			Source: bus.Origin{Cluster: string(id)},
			Info: []pmix.Info{
				pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs(tl)),
				pmix.NewInfo(pmix.KeyEventAffectedProcs, pmix.Procs(affected)),
				pmix.NewInfo(pmix.KeyHostname, pmix.String(e.Node)),
				pmix.NewInfo(pmix.KeyClusterID, pmix.String(string(id))),
				pmix.NewInfo(pmix.KeyEventTimestamp, pmix.Time(at)),
				pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String(fmt.Sprintf(
					"node %s of cluster %s is taken for down: its cluster has not answered for the grace period", e.Node, id))),
			},
			Time: at,
		})
	}
	return out
}
