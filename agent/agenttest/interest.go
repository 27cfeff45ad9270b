package agenttest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/security"
	"github.com/pmixbus/pmixbus/subjects"
)

// errNoServers: the world did not start its servers, so it cannot look
// into them.
var errNoServers = errors.New("agenttest: the world did not start its NATS servers")

// pollEvery is how often the waits look again.
const pollEvery = 5 * time.Millisecond

// WaitInterest waits until every server of cluster id routes subject
// somewhere, and that interest came over a leaf link: a subscription made
// in another cluster reaches id a moment after the subscriber's own server
// knows it, and id's own subscribers to the subject (GLOBAL ones, say) do
// not count.
//
// Errors: ctx.Err(), wrapped with what was still missing, when ctx ends
// first; an error for a world with servers it did not start.
func (w *World) WaitInterest(ctx context.Context, id cluster.ID, subject string) error {
	c := w.Cluster(id)
	if c == nil {
		return errNoServers
	}
	return poll(ctx, func() error {
		remote := false
		for _, s := range c.Servers() {
			ns := s.NATS()
			if ns == nil || !ns.GlobalAccount().SubscriptionInterest(subject) {
				return fmt.Errorf("no interest in %s on %s", subject, s.Name())
			}
			lz, err := ns.Leafz(&server.LeafzOptions{Subscriptions: true})
			if err != nil {
				return err
			}
			for _, l := range lz.Leafs {
				for _, sub := range l.Subs {
					remote = remote || subjects.Match(sub, subject)
				}
			}
		}
		if !remote {
			return fmt.Errorf("no interest in %s over the leaf links of cluster %s", subject, id)
		}
		return nil
	})
}

// WaitPropagation waits until every subscription made so far, in any
// cluster, is known to every running server of the world: then an event
// published anywhere reaches every agent that registered for it.
// Interest crosses routes and leaf links asynchronously but in order, so
// a marker subscribed in each cluster after everything else is seen
// everywhere only after the rest.
//
// Errors: ctx.Err(), wrapped with what was still missing, when ctx ends
// first; an error for a world with servers it did not start.
func (w *World) WaitPropagation(ctx context.Context) error {
	var servers []*cluster.Server
	switch {
	case w.mc != nil:
		servers = append(servers, w.mc.Hub())
		for _, c := range w.mc.Clusters() {
			servers = append(servers, c.Servers()...)
		}
	case w.lone != nil:
		servers = w.lone.Servers()
	default:
		return errNoServers
	}
	for _, c := range w.spec.Clusters {
		if err := w.propagated(ctx, c.ID, servers); err != nil {
			return err
		}
	}
	return nil
}

// propagated subscribes a marker in cluster id and waits until servers
// know it.
func (w *World) propagated(ctx context.Context, id cluster.ID, servers []*cluster.Server) error {
	nc, err := nats.Connect(w.URL(id), nats.Name("agenttest"), w.keys.Option(security.RoleAgent))
	if err != nil {
		return err
	}
	defer nc.Close()
	marker := "_PMIXBUS.agenttest.marker." + nuid.Next()
	if _, err := nc.SubscribeSync(marker); err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	return poll(ctx, func() error {
		for _, s := range servers {
			if !s.Running() {
				continue
			}
			if ns := s.NATS(); ns == nil || !ns.GlobalAccount().SubscriptionInterest(marker) {
				return fmt.Errorf("the subscriptions of cluster %s have not reached server %s", id, s.Name())
			}
		}
		return nil
	})
}

// poll calls f until it returns nil or ctx ends.
func poll(ctx context.Context, f func() error) error {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// WaitSourced waits until each cluster's events stream sources the GLOBAL
// events of every other cluster of the world, each source's consumer set
// up in the other cluster's domain (GLOBAL events by stream sourcing,
// docs/cache.md): from then on a cluster's GLOBAL events reach the others'
// streams (one sent before reaches them too, sourced from the origin's
// stream, unless that stream has evicted it).
//
// Errors: ctx.Err(), wrapped with what was still missing, when ctx ends
// first; those of connecting.
func (w *World) WaitSourced(ctx context.Context) error {
	for _, c := range w.spec.Clusters {
		if err := w.sourced(ctx, c.ID); err != nil {
			return err
		}
	}
	return nil
}

// sourced waits until cluster id's events stream sources the others'.
func (w *World) sourced(ctx context.Context, id cluster.ID) error {
	nc, err := nats.Connect(w.URL(id), nats.Name("agenttest"), w.keys.Option(security.RoleAgent))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return err
	}
	return poll(ctx, func() error {
		s, err := js.Stream(ctx, jetstream.EventStreamName(string(id)))
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		active := map[string]bool{}
		for _, si := range info.Sources {
			active[si.Name] = si.Active >= 0
		}
		for _, o := range w.spec.Clusters {
			if o.ID != id && !active[jetstream.EventStreamName(string(o.ID))] {
				return fmt.Errorf("cluster %s's events stream does not source cluster %s's yet", id, o.ID)
			}
		}
		return nil
	})
}
