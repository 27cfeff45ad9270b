package demo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
)

// rendezvous is the demo's RFC0003 step: a job in each of the first two
// clusters, one process each (an in-process client of an agent of its
// cluster), publishes its cluster-qualified nspace at GLOBAL range under a
// key the other knows, then looks the other's up with PMIX_WAIT: neither
// knows which publishes first. It prints what each found and returns an
// error unless each found the other.
//
// Run runs it after the events, once the trace has been checked.
func (d *demo) rendezvous(ctx context.Context) error {
	var clusters []*cluster.Cluster
	if mc := d.w.MultiCluster(); mc != nil {
		clusters = mc.Clusters()
	}
	if len(clusters) < 2 {
		return errors.New("rendezvous: needs two clusters")
	}
	type side struct {
		cluster cluster.ID
		node    string
		nspace  string
		c       *client.Client
		found   client.PData
		err     error
	}
	var sides []*side
	for _, cl := range clusters[:2] {
		for _, node := range d.w.Nodes() {
			if nodeCluster(node) == string(cl.ID()) {
				sides = append(sides, &side{cluster: cl.ID(), node: node, nspace: "rdv-" + string(cl.ID())})
				break
			}
		}
	}
	// The world finalizes the clients when it closes.
	for _, s := range sides {
		err := d.w.AddJob(ctx, agenttest.Job{Cluster: s.cluster, Nspace: s.nspace, Session: "rdv", Nodes: []string{s.node}})
		if err != nil {
			return fmt.Errorf("rendezvous: %w", err)
		}
		s.c = d.w.Client(cluster.Qualify(s.cluster, s.nspace) + ".0")
	}
	key := func(s *side) string { return "rendezvous-" + string(s.cluster) }
	d.printf("\nRFC0003 rendezvous: %s:%s.0 and %s:%s.0 each publish their cluster-qualified nspace (GLOBAL) and wait for the other's\n",
		sides[0].cluster, sides[0].nspace, sides[1].cluster, sides[1].nspace)
	start := time.Now()
	var wg sync.WaitGroup
	for i, s := range sides {
		other := sides[1-i]
		wg.Go(func() {
			me := cluster.Qualify(s.cluster, s.nspace)
			if s.err = s.c.Publish(ctx, []pmix.Info{
				pmix.NewInfo(key(s), pmix.String(me)),
				pmix.NewInfo(pmix.KeyRange, pmix.RangeValue(pmix.RangeGlobal)),
			}); s.err != nil {
				return
			}
			var got []client.PData
			got, s.err = s.c.Lookup(ctx, []string{key(other)}, []pmix.Info{
				pmix.NewInfo(pmix.KeyWait, pmix.Int32(0)),
				pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(int32(demoWait/time.Second))),
			})
			if s.err == nil {
				s.found = got[0]
			}
		})
	}
	wg.Wait()
	var errs []error
	for i, s := range sides {
		other := sides[1-i]
		want := cluster.Qualify(other.cluster, other.nspace)
		v, _ := s.found.Value.Str()
		switch {
		case s.err != nil:
			errs = append(errs, fmt.Errorf("%s:%s.0: %w", s.cluster, s.nspace, s.err))
		case v != want || s.found.Proc.Nspace != want:
			errs = append(errs, fmt.Errorf("%s:%s.0 found %s=%q from %s, want %q from %s.0", s.cluster, s.nspace, s.found.Key, v, s.found.Proc, want, want))
		default:
			d.printf("   %s:%s.0 looked up %s: %q, published by %s\n", s.cluster, s.nspace, s.found.Key, v, s.found.Proc)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("rendezvous: %w", errors.Join(errs...))
	}
	d.printf("   both found each other in %v: they can PMIx_Connect(%s, %s)\n", time.Since(start).Round(time.Millisecond),
		cluster.Qualify(sides[0].cluster, sides[0].nspace), cluster.Qualify(sides[1].cluster, sides[1].nspace))
	return nil
}
