package demo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
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
	d.printf("   both found each other in %v; now they PMIx_Connect(%s, %s)\n", time.Since(start).Round(time.Millisecond),
		cluster.Qualify(sides[0].cluster, sides[0].nspace), cluster.Qualify(sides[1].cluster, sides[1].nspace))
	return d.connect(ctx, sides[0].c, sides[1].c, sides[0].node)
}

// groupEventCode is the event the demo sends to the connected group.
const groupEventCode = pmix.ExternalErrBase - 77

// connect is the end of RFC0003's example: the two rendezvoused
// processes connect, each gets the same new nspace and its own rank in
// it, and an event to the new nspace reaches both, on both clusters.
func (d *demo) connect(ctx context.Context, a, b *client.Client, hostNode string) error {
	procs := []pmix.Proc{
		{Nspace: cluster.Qualify(cluster.ID(a.Cluster()), a.Proc().Nspace), Rank: pmix.RankWildcard},
		{Nspace: cluster.Qualify(cluster.ID(b.Cluster()), b.Proc().Nspace), Rank: pmix.RankWildcard},
	}
	type joined struct {
		nspace string
		rank   pmix.Rank
		err    error
	}
	res := make([]joined, 2)
	heard := make(chan string, 2)
	var wg sync.WaitGroup
	for i, c := range []*client.Client{a, b} {
		wg.Go(func() {
			ns, r, err := c.Connect(ctx, procs, nil)
			res[i] = joined{ns, r, err}
			if err != nil {
				return
			}
			_, res[i].err = c.RegisterEventHandler(ctx, []pmix.Status{groupEventCode}, nil, func(call *bus.Call, done bus.Done) {
				heard <- fmt.Sprintf("%s:%v", c.Cluster(), c.Proc())
				done(pmix.EventActionComplete, nil)
			})
		})
	}
	wg.Wait()
	for i, r := range res {
		if r.err != nil {
			return fmt.Errorf("connect: %s: %w", []*client.Client{a, b}[i].Proc(), r.err)
		}
	}
	if res[0].nspace != res[1].nspace || res[0].rank == res[1].rank {
		return fmt.Errorf("connect: new nspaces %q and %q, ranks %v and %v: want one nspace, two ranks", res[0].nspace, res[1].nspace, res[0].rank, res[1].rank)
	}
	for i, c := range []*client.Client{a, b} {
		d.printf("   %s:%v is rank %v of the new nspace %s\n", c.Cluster(), c.Proc(), res[i].rank, res[i].nspace)
	}
	if err := d.w.WaitPropagation(ctx); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if _, err := d.w.Agent(hostNode).Notify(ctx, groupEventCode, pmix.RangeNamespace, false,
		[]pmix.Info{pmix.NewInfo(pmix.KeyNspace, pmix.String(res[0].nspace))}); err != nil {
		return fmt.Errorf("connect: notifying the group: %w", err)
	}
	for range 2 {
		select {
		case who := <-heard:
			d.printf("   %s heard the event sent to %s\n", who, res[0].nspace)
		case <-time.After(demoWait):
			return fmt.Errorf("connect: the event to %s did not reach both members within %v", res[0].nspace, demoWait)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	d.printf("   notified as one group across both clusters\n")
	return nil
}
