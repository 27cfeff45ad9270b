package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/pmix"
)

// ReplicasConfig sizes the replicas benchmark.
type ReplicasConfig struct {
	Rounds int // serial notifies, and serial publishes, per replica count (default 1000)
}

func (c *ReplicasConfig) defaults() {
	if c.Rounds <= 0 {
		c.Rounds = 1000
	}
}

// replicaServers is the size of the routed cluster both setups run on.
const replicaServers = 3

// newReplicaSetup starts a routed cluster of replicaServers servers whose
// streams and buckets have replicas copies, and two agents, each on a
// server of its own (the first and the second URL), with a client each.
func newReplicaSetup(ctx context.Context, replicas int) (*setup, error) {
	nodes := []string{"n0", "n1"}
	return setupOf(ctx, agenttest.Cluster{ID: benchCluster, Servers: replicaServers, Nodes: nodes}, nodes, func(c *agent.Config) {
		c.Replicas = replicas
		urls := strings.Split(c.URL, ",")
		if c.Node == "n1" && len(urls) > 1 {
			c.URL = urls[1]
		} else {
			c.URL = urls[0]
		}
	})
}

// publishMeasure publishes a fresh key from the setup's first client.
func (s *setup) publishMeasure(ctx context.Context) measure {
	c := s.clients[0]
	value := pmix.String(valueOfSize(8))
	return whole(func(i int) error {
		return c.Publish(ctx, []pmix.Info{pmix.NewInfo(fmt.Sprintf("r%d", i), value)})
	})
}

// lookupMeasure looks up from the second client a key the first published.
func (s *setup) lookupMeasure(ctx context.Context) (measure, error) {
	if err := s.clients[0].Publish(ctx, []pmix.Info{pmix.NewInfo("hit", pmix.String("v"))}); err != nil {
		return nil, err
	}
	looker := s.clients[1]
	return whole(func(int) error { _, err := looker.Lookup(ctx, []string{"hit"}, nil); return err }), nil
}

// Replicas runs the replicas benchmark: the same operations on two routed
// clusters of three servers, one whose streams and buckets have one
// replica and one whose have three, the two agents of each on different
// servers, interleaved round by round (paired) so that both see the same
// machine: a cached notify to another agent's client (the event cache on
// its path), an uncached one (no store: the reference), a publish and a
// lookup (the publish/lookup bucket). Targets are R3 against R1.
func Replicas(ctx context.Context, cfg ReplicasConfig) (*Report, error) {
	cfg.defaults()
	one, err := newReplicaSetup(ctx, 1)
	if err != nil {
		return nil, fmt.Errorf("cluster with R1: %w", err)
	}
	defer one.close()
	three, err := newReplicaSetup(ctx, 3)
	if err != nil {
		return nil, fmt.Errorf("cluster with R3: %w", err)
	}
	defer three.close()
	r := &Report{}
	r.addf("replicas: two routed clusters of %d NATS servers, streams and buckets R1 in one and R3 in the other; 2 agents each, on different servers; %d rounds, interleaved", replicaServers, cfg.Rounds)

	type op struct {
		name   string
		target string
		goal   float64
		make   func(s *setup) (measure, error)
	}
	ops := []op{
		{"notify -> handler, cached", "notify_cached_p50_r3_vs_r1", 2,
			func(s *setup) (measure, error) { return s.notifyMeasure(ctx, pmix.ExternalErrBase-1, true) }},
		{"notify -> handler, DO_NOT_CACHE", "", 0,
			func(s *setup) (measure, error) { return s.notifyMeasure(ctx, pmix.ExternalErrBase-3, false) }},
		{"publish (client->agent->KV)", "publish_p50_r3_vs_r1", 3,
			func(s *setup) (measure, error) { return s.publishMeasure(ctx), nil }},
		{"lookup, found", "lookup_p50_r3_vs_r1", 1.5,
			func(s *setup) (measure, error) { return s.lookupMeasure(ctx) }},
	}
	for _, o := range ops {
		m1, err := o.make(one)
		if err != nil {
			return nil, fmt.Errorf("%s (R1): %w", o.name, err)
		}
		m3, err := o.make(three)
		if err != nil {
			return nil, fmt.Errorf("%s (R3): %w", o.name, err)
		}
		d1, d3, err := paired(cfg.Rounds, m1, m3)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.name, err)
		}
		p1, p3 := percentile(d1, 50), percentile(d3, 50)
		r.addf("%-34s R1 p50 %8v p99 %8v   R3 p50 %8v p99 %8v   ratio p50 %.2f", o.name, p1, percentile(d1, 99), p3, percentile(d3, 99), ratio(p3, p1))
		if o.target != "" {
			r.Targets = append(r.Targets, Target{Name: o.target, Measured: ratio(p3, p1), Op: "<=", Goal: o.goal})
		}
	}
	return r, nil
}
