package agent

import (
	"cmp"
	"context"
	"slices"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/launch/liveness"
	"github.com/pmixbus/pmixbus/pmix"
)

// The agent's liveness (package launch/liveness, docs/liveness.md): its
// key in the cluster's PMIXBUS_AGENTS bucket, which lists the jobs its
// node hosts, and the events of the nodes whose keys expire, which the
// service raises through the agent's router as the host RM would.

// startLiveness claims the agent's key and starts watching the others'.
func (a *Agent) startLiveness(ctx context.Context) error {
	cfg := a.cfg.livenessKnobs()
	cfg.Conn, cfg.Cluster, cfg.Node, cfg.Listen, cfg.Replicas = a.nc, a.cfg.Cluster, a.cfg.Node, a.addr, a.replicas
	cfg.Host = livenessHost{a}
	cfg.Logger = a.log
	svc, err := liveness.New(cfg)
	if err != nil {
		return err
	}
	svc.OnNodeDown(a.nodeDown)
	a.live.Store(svc) // before Start: Shutdown stops what Start began
	return svc.Start(ctx)
}

// stopLiveness deletes the agent's key, so that no agent declares its
// node down, and stops the service.
func (a *Agent) stopLiveness(ctx context.Context) {
	if svc := a.live.Load(); svc != nil {
		if err := svc.Shutdown(ctx); err != nil {
			a.log.Warn("stopping liveness", "err", err)
		}
	}
}

// livenessJobsChanged rewrites the agent's key when a job placing ranks
// on this node was registered or deregistered, so that the key lists the
// job before its processes run. A write that fails is retried by the
// next refresh.
func (a *Agent) livenessJobsChanged(ctx context.Context, procs ...map[pmix.Rank]string) {
	svc := a.live.Load()
	if svc == nil {
		return
	}
	here := false
	for _, m := range procs {
		for _, n := range m {
			here = here || n == a.cfg.Node
		}
	}
	if !here {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.LivenessTTL)
	defer cancel()
	if err := svc.Refresh(ctx); err != nil {
		a.log.Warn("writing the hosted jobs to the liveness key; the next refresh retries", "err", err)
	}
}

// nodeDown hands a node down to the collectives, then to the host's
// functions.
func (a *Agent) nodeDown(d liveness.NodeDown) {
	a.collectiveNodeDown(d)
	if fs := a.downFuncs.Load(); fs != nil {
		for _, f := range *fs {
			f(d)
		}
	}
}

// OnNodeDown calls f each time this agent declared a node of its cluster
// down — its liveness key expired — after it raised the node's events
// (liveness.Events): PMIX_EVENT_NODE_DOWN to each job the node hosted and
// PMIX_ERR_PROC_TERM_WO_SYNC for each of their procs there, and told its
// collectives those procs terminated (collective.Service.NodeDown). Every agent of
// the cluster declares it; the jobs' agents run each event once. f must
// not block for long.
func (a *Agent) OnNodeDown(f func(liveness.NodeDown)) {
	a.mu.Lock()
	a.downFuncs.Store(appendCopy(a.downFuncs.Load(), f))
	a.mu.Unlock()
}

// Agents returns the agents of the cluster alive as this agent last saw
// their liveness keys, itself among them, sorted by node; nil before
// Start.
func (a *Agent) Agents() []liveness.Entry {
	if svc := a.live.Load(); svc != nil {
		return svc.Agents()
	}
	return nil
}

// LivenessStats returns the counts of the agent's liveness service: its
// key's refreshes, and the nodes it declared down.
func (a *Agent) LivenessStats() liveness.Stats {
	if svc := a.live.Load(); svc != nil {
		return svc.Stats()
	}
	return liveness.Stats{}
}

// livenessHost is the agent as its liveness service sees it.
type livenessHost struct{ a *Agent }

// HostedJobs returns the jobs placing ranks on this node, by nspace, their
// ranks sorted.
func (h livenessHost) HostedJobs() []liveness.HostedJob {
	a := h.a
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []liveness.HostedJob
	for _, j := range a.jobs {
		var ranks []pmix.Rank
		for r, n := range j.procs {
			if n == a.cfg.Node {
				ranks = append(ranks, r)
			}
		}
		if len(ranks) > 0 {
			slices.Sort(ranks)
			out = append(out, liveness.HostedJob{Nspace: j.nspace, Session: j.session, Ranks: ranks})
		}
	}
	slices.SortFunc(out, func(x, y liveness.HostedJob) int { return cmp.Compare(x.Nspace, y.Nspace) })
	return out
}

// Raise publishes an event of a node down through the router, as the
// host RM's (no sending client).
func (h livenessHost) Raise(m *event.Message) error { return h.a.raise(m) }

// Connections are the groups (connects) with members in this cluster and
// others: the liveness service declares the nodes hosting the other
// clusters' members down when their cluster stays unreachable
// (liveness.ConnectionHost).
func (h livenessHost) Connections() []liveness.Connection {
	a := h.a
	if a.coll == nil {
		return nil
	}
	var out []liveness.Connection
	for _, members := range a.coll.svc.Groups() {
		var c liveness.Connection
		for _, p := range members {
			if id, _, ok := cluster.Split(p.Nspace); ok && id != a.cfg.Cluster {
				c.Remote = append(c.Remote, p)
			} else {
				c.Local = append(c.Local, p)
			}
		}
		if len(c.Remote) > 0 && len(c.Local) > 0 {
			out = append(out, c)
		}
	}
	return out
}
