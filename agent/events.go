package agent

import (
	"slices"
	"time"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/router"
)

// The agent as its router sees it (router.Host): the attached clients, the
// job table, where chain outcomes go.

// flushTimeout bounds the wait for the server to know new subscriptions.
const flushTimeout = 5 * time.Second

// routerHost is the agent as router.Host: its methods stay unexported on
// Agent.
type routerHost struct{ a *Agent }

var _ event.Spans = routerHost{} // jobs across clusters

func (h routerHost) Nodes(nspace string, rank pmix.Rank) ([]string, bool) {
	return h.a.Nodes(nspace, rank)
}
func (h routerHost) Recipients() []router.Recipient { return h.a.recipients() }

// OtherClusters makes the router publish the NAMESPACE events of a job
// across clusters on each of them (event.Spans).
func (h routerHost) OtherClusters(nspace string) []cluster.ID { return h.a.OtherClusters(nspace) }
func (h routerHost) Outcome(rep event.OutcomeReport)          { h.a.outcome(rep) }
func (h routerHost) GoFunc(f func()) bool                     { return h.a.goFunc(f) }

// place is where the agent runs, for the routing rules of package event.
func (a *Agent) place() event.Place { return event.Place{Cluster: a.cfg.Cluster, Node: a.cfg.Node} }

// recipients returns the attached clients. It must not be called with
// a.mu held: after a change it takes a.mu to rebuild the list.
func (a *Agent) recipients() []router.Recipient {
	if a.attachedStale.Load() {
		a.mu.Lock()
		if a.attachedStale.Load() {
			a.rebuildAttachedLocked()
			a.attachedStale.Store(false)
		}
		a.mu.Unlock()
	}
	if p := a.attached.Load(); p != nil {
		return *p
	}
	return nil
}

// Nodes implements event.Jobs on the agent's job table.
func (a *Agent) Nodes(nspace string, rank pmix.Rank) ([]string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	j, ok := a.jobs[nspace]
	if !ok {
		return nil, false
	}
	if rank == pmix.RankWildcard {
		nodes := make([]string, 0, len(j.procs))
		for _, n := range j.procs {
			nodes = append(nodes, n)
		}
		slices.Sort(nodes)
		return slices.Compact(nodes), true
	}
	if n, ok := j.procs[rank]; ok {
		return []string{n}, true
	}
	return nil, true
}

// outcome: a chain ended, its report queued for publishing (router).
func (a *Agent) outcome(rep event.OutcomeReport) {
	a.countOutcome(&rep.Outcome)
	if fs := a.outFuncs.Load(); fs != nil {
		for _, f := range *fs {
			f(rep)
		}
	}
	a.terminationWanted(rep.Client, rep.Outcome)
}

// Subjects returns the subjects the agent is subscribed to for its
// clients' registrations, sorted.
func (a *Agent) Subjects() []string {
	if a.router == nil {
		return nil
	}
	return a.router.Subjects()
}
