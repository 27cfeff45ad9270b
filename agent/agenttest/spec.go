package agenttest

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

// ErrInvalidSpec: Spec.Validate found a problem.
var ErrInvalidSpec = errors.New("agenttest: invalid spec")

// Spec declares a world.
type Spec struct {
	// Clusters lists the clusters, in order. More than one are joined
	// through a hub; a lone one runs by itself.
	Clusters []Cluster
	// Jobs are registered with every agent of their cluster, in order, and
	// their clients attached (or registered only: Job.Detached).
	Jobs []Job
	// Agent, if set, adjusts every agent's configuration before it starts
	// (its handler timeout, cache size, …). Cluster, Node, URL, Listen,
	// Keys and Logger are set by then.
	Agent func(*agent.Config)

	// Keys are the keys the world's servers accept, each role with its
	// permissions, and its agents sign in with (docs/security.md). Nil
	// means fresh ones, kept in memory, for a world that starts its own
	// servers, and none for one on servers running already (Cluster.URL).
	Keys *security.Keys
	// Insecure starts the world's servers without authentication and its
	// agents without keys: anyone who reaches a server may do anything.
	Insecure bool
	// LeafTLS puts the leaf links between the world's clusters on TLS
	// (see cluster.LeafTLS); for a world that starts several clusters.
	LeafTLS *cluster.LeafTLS
}

// Cluster declares one cluster of a world.
type Cluster struct {
	ID cluster.ID
	// Servers is the number of NATS servers of the cluster, joined by
	// routes. Zero means 1.
	Servers int
	// URL, if set, is the cluster's NATS, running already: the world
	// starts no server for it. Either every cluster of a Spec has a URL or
	// none has.
	URL string
	// Nodes are the nodes of the cluster, one agent each, started in this
	// order. Empty means the nodes its jobs place ranks on, in the order
	// they first appear.
	Nodes []string
}

// Job declares a job (an nspace of its cluster) and where its ranks run.
type Job struct {
	Cluster cluster.ID
	Nspace  string
	Session string
	Info    []pmix.Info
	// Nodes places the ranks: rank r runs on Nodes[r]. At least one.
	Nodes []string
	// Detached registers the job's clients with their agents without
	// attaching them: World.Env gives the environment to launch each one's
	// process with.
	Detached bool
}

// procs is the job's rank → node map, as agents take it.
func (j Job) procs() map[pmix.Rank]string {
	procs := make(map[pmix.Rank]string, len(j.Nodes))
	for r, n := range j.Nodes {
		procs[pmix.Rank(r)] = n
	}
	return procs
}

// Proc is one rank of a job of a world: a client.
type Proc struct {
	// Name is the cluster-qualified proc, "A:sim.0": the name Client and
	// Env take.
	Name    string
	Cluster cluster.ID
	Node    string
	// Proc is the proc as its agent knows it, its nspace unqualified.
	Proc pmix.Proc
}

func (j Job) ranks() []Proc {
	out := make([]Proc, len(j.Nodes))
	for r, n := range j.Nodes {
		p := pmix.Proc{Nspace: j.Nspace, Rank: pmix.Rank(r)}
		out[r] = Proc{Name: string(j.Cluster) + ":" + p.String(), Cluster: j.Cluster, Node: n, Proc: p}
	}
	return out
}

// Validate reports every problem with s at once, in an error wrapping
// ErrInvalidSpec.
func (s Spec) Validate() error {
	var errs []error
	addf := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(s.Clusters) == 0 {
		addf("Clusters: none")
	}
	clusters := map[cluster.ID]Cluster{}
	nodeCluster := map[string]cluster.ID{}
	withURL := 0
	for i, c := range s.Clusters {
		if err := c.ID.Validate(); err != nil {
			addf("Clusters[%d].ID: %w", i, err)
		}
		if _, dup := clusters[c.ID]; dup {
			addf("Clusters[%d].ID: %q appears twice", i, c.ID)
		}
		clusters[c.ID] = c
		if c.Servers < 0 {
			addf("Clusters[%d].Servers: %d is negative", i, c.Servers)
		}
		if c.URL != "" {
			withURL++
		}
		for _, n := range c.Nodes {
			if n == "" {
				addf("Clusters[%d].Nodes: an empty node name", i)
			} else if prev, dup := nodeCluster[n]; dup {
				addf("Clusters[%d].Nodes: node %q is also a node of cluster %s", i, n, prev)
			}
			nodeCluster[n] = c.ID
		}
	}
	if withURL != 0 && withURL != len(s.Clusters) {
		addf("Clusters: %d of %d have a URL; either all or none do", withURL, len(s.Clusters))
	}
	if s.Insecure && s.Keys != nil {
		addf("Insecure: given with Keys; a world has keys or is insecure")
	}
	if s.LeafTLS != nil && (withURL > 0 || len(s.Clusters) < 2) {
		addf("LeafTLS: for the leaf links of a world that starts several clusters")
	}
	nspaces := map[string]bool{}
	for i, j := range s.Jobs {
		c, ok := clusters[j.Cluster]
		if !ok {
			addf("Jobs[%d].Cluster: no cluster %q", i, j.Cluster)
			continue
		}
		if j.Nspace == "" || strings.ContainsRune(j.Nspace, ':') {
			addf("Jobs[%d].Nspace: %q; want a non-empty nspace of its cluster, without ':'", i, j.Nspace)
		}
		if key := string(j.Cluster) + ":" + j.Nspace; nspaces[key] {
			addf("Jobs[%d].Nspace: %s appears twice", i, key)
		} else {
			nspaces[key] = true
		}
		if len(j.Nodes) == 0 {
			addf("Jobs[%d].Nodes: none; a job has at least one rank", i)
		}
		for _, n := range j.Nodes {
			switch owner, known := nodeCluster[n]; {
			case n == "":
				addf("Jobs[%d].Nodes: an empty node name", i)
			case known && owner != j.Cluster:
				addf("Jobs[%d].Nodes: node %q is a node of cluster %s, not of %s", i, n, owner, j.Cluster)
			case !known && len(c.Nodes) > 0:
				addf("Jobs[%d].Nodes: node %q is not one of cluster %s's nodes %v", i, n, j.Cluster, c.Nodes)
			case !known:
				nodeCluster[n] = j.Cluster
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidSpec, errors.Join(errs...))
	}
	return nil
}

// withNodes returns s with every cluster's Nodes filled in from its jobs
// where it was empty.
func (s Spec) withNodes() Spec {
	s.Clusters = slices.Clone(s.Clusters)
	for i, c := range s.Clusters {
		if len(c.Nodes) > 0 {
			continue
		}
		var nodes []string
		for _, j := range s.Jobs {
			if j.Cluster != c.ID {
				continue
			}
			for _, n := range j.Nodes {
				if !slices.Contains(nodes, n) {
					nodes = append(nodes, n)
				}
			}
		}
		s.Clusters[i].Nodes = nodes
	}
	return s
}
