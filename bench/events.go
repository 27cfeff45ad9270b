package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

// EventsConfig sizes the events benchmark.
type EventsConfig struct {
	LatencyRounds int // serial notify→handler round trips (default 2000)
	FanoutEvents  int // events sent in the fan-out phase (default 1000)
	Agents        int // default 4
	Clients       int // spread evenly over the agents (default 64)
}

func (c *EventsConfig) defaults() {
	if c.LatencyRounds <= 0 {
		c.LatencyRounds = 2000
	}
	if c.FanoutEvents <= 0 {
		c.FanoutEvents = 1000
	}
	if c.Agents <= 0 {
		c.Agents = 4
	}
	if c.Clients <= 0 {
		c.Clients = 64
	}
}

// benchCluster is the benchmarks' one cluster. Its one server is the top
// of the topology, so its JetStream domain holds publish/lookup data of
// every scope, GLOBAL included (cluster.TopDomain).
const benchCluster = "bench"

// setup is one NATS server with agents n0, n1, … and the clients of one
// job spread over them: rank r on agent r mod the number of agents.
type setup struct {
	w       *agenttest.World
	url     string // of the NATS server
	agents  []*agent.Agent
	clients []*client.Client // by rank
}

// rawKey signs the raw NATS side of a comparison in as an agent: the
// world's servers accept nobody else on pmixbus's subjects.
func (s *setup) rawKey() nats.Option { return s.w.Keys().Option(security.RoleAgent) }

// newSetup starts a setup; tune, if not nil, adjusts each agent's
// configuration.
func newSetup(ctx context.Context, nAgents, nClients int, tune func(*agent.Config)) (*setup, error) {
	nodes := make([]string, nAgents)
	for i := range nAgents {
		nodes[i] = fmt.Sprintf("n%d", i)
	}
	ranks := make([]string, nClients)
	for r := range nClients {
		ranks[r] = nodes[r%nAgents]
	}
	return setupOf(ctx, agenttest.Cluster{ID: benchCluster, Nodes: nodes}, ranks, tune)
}

// setupOf starts a setup on cluster c, with one job of benchCluster whose
// rank r runs on ranks[r], each agent's configuration adjusted by tune.
func setupOf(ctx context.Context, c agenttest.Cluster, ranks []string, tune func(*agent.Config)) (*setup, error) {
	w, err := agenttest.New(ctx, agenttest.Spec{
		Clusters: []agenttest.Cluster{c},
		Jobs:     []agenttest.Job{{Cluster: c.ID, Nspace: "bench", Session: "s", Nodes: ranks}},
		Agent:    tune,
	}, "", nil)
	if err != nil {
		return nil, err
	}
	s := &setup{w: w, url: w.URL(c.ID)}
	for _, n := range c.Nodes {
		s.agents = append(s.agents, w.Agent(n))
	}
	for _, p := range w.Procs() {
		s.clients = append(s.clients, w.Client(p.Name))
	}
	return s, nil
}

func (s *setup) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.w.Close(ctx)
}

// notifyMeasure prepares one serial notify→first-handler measurement
// from the setup's first client to its second (a cached event unless
// cached is false): the handler is registered once, each call notifies
// once and waits for the handler.
func (s *setup) notifyMeasure(ctx context.Context, code pmix.Status, cached bool) (measure, error) {
	src, dst := s.clients[0], s.clients[1]
	got := make(chan time.Time, 1)
	if _, err := dst.RegisterEventHandler(ctx, []pmix.Status{code}, nil, func(_ *bus.Call, done bus.Done) {
		got <- time.Now()
		done(pmix.EventNoActionTaken, nil)
	}); err != nil {
		return nil, err
	}
	target := []pmix.Info{pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{dst.Proc()}))}
	if !cached {
		target = append(target, pmix.NewInfo(pmix.KeyEventDoNotCache, pmix.Bool(true)))
		if err := warmTransient(ctx, got, func() error { return src.NotifyEvent(ctx, code, pmix.RangeCustom, target) }); err != nil {
			return nil, err
		}
	}
	return func(i int) (time.Duration, error) {
		start := time.Now()
		if err := src.NotifyEvent(ctx, code, pmix.RangeCustom, target); err != nil {
			return 0, err
		}
		select {
		case t := <-got:
			return t.Sub(start), nil
		case <-time.After(10 * time.Second):
			return 0, fmt.Errorf("event %d never reached its handler", i)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}, nil
}

// warmTransient sends a transient (DO_NOT_CACHE) event until one reaches
// its handler (got), then lets the late ones arrive, before any is
// measured. A transient event reaches only the subscriptions NATS routes
// to already: the handler's agent subscribed as it registered, and on a
// cluster of several servers that interest takes a moment to reach the
// sender's server (bench replicas' smoke test lost its first event so).
func warmTransient(ctx context.Context, got <-chan time.Time, notify func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := notify(); err != nil {
			return err
		}
		select {
		case <-got:
			for {
				select {
				case <-got:
				case <-time.After(100 * time.Millisecond):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		case <-time.After(50 * time.Millisecond):
			if time.Now().After(deadline) {
				return errors.New("a DO_NOT_CACHE event never reached its handler in 10 s")
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Latency measures notify→first-handler latency from a client on one agent
// to a client on another, serially, returning every sample. A cached event
// is captured by the event cache on the way; an uncached one carries
// PMIX_EVENT_DO_NOT_CACHE.
func (s *setup) latency(ctx context.Context, rounds int, cached bool) ([]time.Duration, error) {
	code := pmix.ExternalErrBase - 1
	if !cached {
		code = pmix.ExternalErrBase - 3 // -2 is the fan-out's
	}
	m, err := s.notifyMeasure(ctx, code, cached)
	if err != nil {
		return nil, err
	}
	out := make([]time.Duration, 0, rounds)
	for i := range rounds + rounds/10 { // the first tenth warms up
		d, err := m(i)
		if err != nil {
			return nil, err
		}
		if i >= rounds/10 {
			out = append(out, d)
		}
	}
	return out, nil
}

// natsRTT measures raw NATS request-reply round trips between two
// connections on the same server.
func natsRTT(ctx context.Context, url string, rounds int, opts ...nats.Option) ([]time.Duration, error) {
	req, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, err
	}
	defer req.Close()
	rep, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, err
	}
	defer rep.Close()
	payload := make([]byte, 64)
	if _, err := rep.Subscribe("pmixbus.bench.rtt", func(m *nats.Msg) { _ = m.Respond(payload) }); err != nil {
		return nil, err
	}
	if err := rep.Flush(); err != nil {
		return nil, err
	}
	out := make([]time.Duration, 0, rounds)
	for i := range rounds + rounds/10 {
		start := time.Now()
		if _, err := req.RequestWithContext(ctx, "pmixbus.bench.rtt", payload); err != nil {
			return nil, err
		}
		if i >= rounds/10 {
			out = append(out, time.Since(start))
		}
	}
	return out, nil
}

// fanout sends n events from the host RM at GLOBAL range to every client
// and returns deliveries per second (handler invocations).
func (s *setup) fanout(ctx context.Context, n int) (float64, error) {
	const code = pmix.ExternalErrBase - 2
	var count atomic.Int64
	want := int64(n * len(s.clients))
	all := make(chan struct{})
	for _, c := range s.clients {
		if _, err := c.RegisterEventHandler(ctx, []pmix.Status{code}, nil, func(_ *bus.Call, done bus.Done) {
			done(pmix.EventNoActionTaken, nil)
			if count.Add(1) == want {
				close(all)
			}
		}); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	for range n {
		if _, err := s.agents[0].Notify(ctx, code, pmix.RangeGlobal, false, nil); err != nil {
			return 0, err
		}
	}
	select {
	case <-all:
	case <-time.After(2 * time.Minute):
		return 0, fmt.Errorf("only %d of %d deliveries", count.Load(), want)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return float64(want) / time.Since(start).Seconds(), nil
}

// natsFanout publishes n messages to subscribers on subs connections and
// returns deliveries per second.
func natsFanout(ctx context.Context, url string, subs, n int, opts ...nats.Option) (float64, error) {
	var count atomic.Int64
	want := int64(subs * n)
	all := make(chan struct{})
	for range subs {
		nc, err := nats.Connect(url, opts...)
		if err != nil {
			return 0, err
		}
		defer nc.Close()
		sub, err := nc.Subscribe("pmixbus.bench.fanout", func(*nats.Msg) {
			if count.Add(1) == want {
				close(all)
			}
		})
		if err != nil {
			return 0, err
		}
		_ = sub.SetPendingLimits(-1, -1)
		if err := nc.Flush(); err != nil {
			return 0, err
		}
	}
	pub, err := nats.Connect(url, opts...)
	if err != nil {
		return 0, err
	}
	defer pub.Close()
	payload := make([]byte, 128)
	start := time.Now()
	for range n {
		if err := pub.Publish("pmixbus.bench.fanout", payload); err != nil {
			return 0, err
		}
	}
	if err := pub.Flush(); err != nil {
		return 0, err
	}
	select {
	case <-all:
	case <-time.After(2 * time.Minute):
		return 0, fmt.Errorf("only %d of %d deliveries", count.Load(), want)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return float64(want) / time.Since(start).Seconds(), nil
}

// Events runs the events benchmark: notify latency and fan-out throughput,
// each against raw NATS on the same server.
func Events(ctx context.Context, cfg EventsConfig) (*Report, error) {
	cfg.defaults()
	s, err := newSetup(ctx, cfg.Agents, cfg.Clients, nil)
	if err != nil {
		return nil, err
	}
	defer s.close()
	r := &Report{}
	r.addf("events: %d agents, %d clients, one embedded NATS server", cfg.Agents, cfg.Clients)

	rtt, err := natsRTT(ctx, s.url, cfg.LatencyRounds, s.rawKey())
	if err != nil {
		return nil, fmt.Errorf("raw NATS RTT: %w", err)
	}
	lat, err := s.latency(ctx, cfg.LatencyRounds, true)
	if err != nil {
		return nil, fmt.Errorf("notify latency: %w", err)
	}
	unc, err := s.latency(ctx, cfg.LatencyRounds, false)
	if err != nil {
		return nil, fmt.Errorf("notify latency (uncached): %w", err)
	}
	rtt50, rtt99 := percentile(rtt, 50), percentile(rtt, 99)
	lat50, lat99 := percentile(lat, 50), percentile(lat, 99)
	unc50, unc99 := percentile(unc, 50), percentile(unc, 99)
	r.addf("raw NATS request-reply RTT         p50 %8v  p99 %8v  (%d rounds)", rtt50, rtt99, len(rtt))
	r.addf("notify -> first handler (1->2)     p50 %8v  p99 %8v  ratio p50 %.2f  p99 %.2f  (cached, the default)", lat50, lat99, ratio(lat50, rtt50), ratio(lat99, rtt99))
	r.addf("  with PMIX_EVENT_DO_NOT_CACHE     p50 %8v  p99 %8v  ratio p50 %.2f  p99 %.2f", unc50, unc99, ratio(unc50, rtt50), ratio(unc99, rtt99))

	raw, err := natsFanout(ctx, s.url, cfg.Clients, cfg.FanoutEvents, s.rawKey())
	if err != nil {
		return nil, fmt.Errorf("raw NATS fan-out: %w", err)
	}
	fan, err := s.fanout(ctx, cfg.FanoutEvents)
	if err != nil {
		return nil, fmt.Errorf("fan-out: %w", err)
	}
	r.addf("raw NATS fan-out to %d subscribers     %10.0f msgs/s", cfg.Clients, raw)
	r.addf("event fan-out to %d clients / %d agents %10.0f deliveries/s", cfg.Clients, cfg.Agents, fan)
	r.Targets = append(r.Targets,
		Target{Name: "notify_p50_vs_nats_rtt", Measured: ratio(lat50, rtt50), Op: "<=", Goal: 1.2},
		Target{Name: "fanout_vs_nats", Measured: fan / raw, Op: ">=", Goal: 0.5},
		// Issue 17 asks for this absolute figure beside the ratio: on a
		// machine where raw NATS is slow, half of it is not enough.
		Target{Name: "fanout_deliveries_per_s", Measured: fan, Op: ">=", Goal: 500000},
	)
	return r, nil
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
