package bench

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// StalledConfig sizes the stalled-readers benchmark.
type StalledConfig struct {
	Events  int // events notified in each condition, alone and with stalled readers (default 6000)
	Windows int // windows each condition's events are sent in, alternating (default 6)
	Rate    int // events per second (default 1000)
	Payload int // bytes of text each event carries (default 1000)
	Stalled int // readers that never read, attached in each window of the second condition (default 3)
}

func (c *StalledConfig) defaults() {
	if c.Events <= 0 {
		c.Events = 6000
	}
	if c.Windows <= 0 {
		c.Windows = 6
	}
	c.Windows = min(c.Windows, c.Events)
	if c.Rate <= 0 {
		c.Rate = 1000
	}
	if c.Payload <= 0 {
		c.Payload = 1000
	}
	if c.Stalled <= 0 {
		c.Stalled = 3
	}
}

// goalStalledP99 bounds the healthy client's p99 with stalled readers
// attached, over its p99 alone (issue 12, item 4).
const goalStalledP99 = 2

// stalledCode is the code of the benchmark's events.
const stalledCode = pmix.ExternalErrBase - 20

// seqKey carries an event's number in the benchmark, for its handler to
// find when it was sent.
const seqKey = "pmixbus.bench.seq"

// Stalled runs the stalled-readers benchmark: one agent, one healthy
// client, and the host RM notifying local events at a steady rate; the
// healthy client's notify→handler latency alone, and with cfg.Stalled
// readers attached that registered a default handler and never read
// again. The agent writes to each client from a goroutine of its own, so
// the stalled readers must not delay the healthy one.
//
// The two conditions alternate, window by window, so that the shared
// machine's hiccups fall on both alike: each stalled window attaches fresh
// readers and closes them at its end, and the next window starts once the
// agent has let them go. The first tenth of every window is left out: the
// readers' socket buffers are still filling then.
func Stalled(ctx context.Context, cfg StalledConfig) (*Report, error) {
	cfg.defaults()
	stuck := make([]string, cfg.Stalled*cfg.Windows)
	for i := range stuck {
		stuck[i] = "n1"
	}
	w, err := agenttest.New(ctx, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: benchCluster}},
		Jobs: []agenttest.Job{
			{Cluster: benchCluster, Nspace: "ok", Nodes: []string{"n1"}},
			{Cluster: benchCluster, Nspace: "stuck", Nodes: stuck, Detached: true},
		},
	}, "", nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = w.Close(cctx)
	}()
	s := &stalledRun{a: w.Agent("n1"), cfg: cfg, base: time.Now()}
	healthy := w.Client(benchCluster + ":ok.0")
	if _, err := healthy.RegisterEventHandler(ctx, []pmix.Status{stalledCode}, nil, s.handle); err != nil {
		return nil, err
	}

	var alone, stalled []time.Duration
	cutOff, lostAlone, lostStalled := 0, 0, 0
	for win := range cfg.Windows {
		n := cfg.Events / cfg.Windows
		if win < cfg.Events%cfg.Windows {
			n++
		}
		lat, lost, err := s.phase(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("alone: %w", err)
		}
		alone, lostAlone = append(alone, lat...), lostAlone+lost
		var readers []net.Conn
		for i := range cfg.Stalled {
			c, err := stalledReader(ctx, w.Env(fmt.Sprintf("%s:stuck.%d", benchCluster, win*cfg.Stalled+i)))
			if err != nil {
				closeAll(readers)
				return nil, fmt.Errorf("stalled reader %d: %w", i, err)
			}
			readers = append(readers, c)
		}
		lat, lost, err = s.phase(ctx, n)
		cutOff += cfg.Stalled + 1 - s.a.Stats().ClientsAttached
		closeAll(readers)
		if err != nil {
			return nil, fmt.Errorf("with %d stalled readers: %w", cfg.Stalled, err)
		}
		stalled, lostStalled = append(stalled, lat...), lostStalled+lost
		if err := s.onlyHealthy(ctx); err != nil {
			return nil, err
		}
	}
	if len(alone) == 0 || len(stalled) == 0 {
		return nil, fmt.Errorf("the healthy client got none of the events (%d lost alone, %d with stalled readers)", lostAlone, lostStalled)
	}
	slices.Sort(alone)
	slices.Sort(stalled)

	r := &Report{}
	r.addf("stalled: one agent, one healthy client; the host notifies local events at %d/s, %d bytes of text each;", cfg.Rate, cfg.Payload)
	r.addf("  %d events alone and %d with %d stalled readers attached, in %d alternating windows of each", cfg.Events, cfg.Events, cfg.Stalled, cfg.Windows)
	a50, a99 := percentile(alone, 50), percentile(alone, 99)
	s50, s99 := percentile(stalled, 50), percentile(stalled, 99)
	r.addf("healthy client alone                 p50 %8v  p90 %8v  p99 %8v  max %8v  (%d events measured)", a50, percentile(alone, 90), a99, alone[len(alone)-1], len(alone))
	r.addf("with %d stalled readers               p50 %8v  p90 %8v  p99 %8v  max %8v  (%d events measured; %d readers cut off)", cfg.Stalled, s50, percentile(stalled, 90), s99, stalled[len(stalled)-1], len(stalled), cutOff)
	if lostAlone+lostStalled > 0 {
		r.addf("LOST: %d events alone and %d with stalled readers never reached the healthy client (within %v)", lostAlone, lostStalled, lostAfter)
	}
	r.Targets = append(r.Targets, Target{Name: "stalled_p99_vs_alone", Measured: ratio(s99, a99), Op: "<=", Goal: goalStalledP99})
	return r, nil
}

func closeAll(cs []net.Conn) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// onlyHealthy waits until the agent has let the closed readers go.
func (s *stalledRun) onlyHealthy(ctx context.Context) error {
	return poll(ctx, 5*time.Millisecond, time.Minute, func() error {
		if n := s.a.Stats().ClientsAttached; n > 1 {
			return fmt.Errorf("%d clients still attached after the stalled readers closed", n)
		}
		return nil
	})
}

// stalledRun is the state of one run: the healthy client's handler finds
// the current phase's send times here.
type stalledRun struct {
	a    *agent.Agent
	cfg  StalledConfig
	base time.Time
	sent int // events notified so far
	cur  atomic.Pointer[stalledPhase]
}

type stalledPhase struct {
	first   int            // the number of the phase's first event: numbers go on across phases
	sent    []atomic.Int64 // since base, by event number less first
	latency []atomic.Int64
	got     atomic.Int64
	all     chan struct{}
}

func (s *stalledRun) handle(call *bus.Call, done bus.Done) {
	now := time.Since(s.base)
	done(pmix.EventNoActionTaken, nil)
	p := s.cur.Load()
	if p == nil {
		return // between phases
	}
	v, _ := pmix.LookupValue(call.Info, seqKey)
	seq, ok := v.Int()
	i := int(seq) - p.first
	if !ok || i < 0 || i >= len(p.sent) || !p.latency[i].CompareAndSwap(0, int64(now)-p.sent[i].Load()) {
		return // not an event of this phase, or twice
	}
	if p.got.Add(1) == int64(len(p.sent)) {
		close(p.all)
	}
}

// lostAfter is how long after the last of a phase's events one that has
// not reached the healthy client is taken for lost.
const lostAfter = 10 * time.Second

// phase notifies n events at the configured rate and returns the healthy
// client's latencies, less the first tenth, and how many events never
// reached it.
func (s *stalledRun) phase(ctx context.Context, n int) (lat []time.Duration, lost int, err error) {
	p := &stalledPhase{first: s.sent, sent: make([]atomic.Int64, n), latency: make([]atomic.Int64, n), all: make(chan struct{})}
	s.sent += n
	s.cur.Store(p)
	text := pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String(strings.Repeat("x", s.cfg.Payload)))
	interval := time.Second / time.Duration(s.cfg.Rate)
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		info := []pmix.Info{pmix.NewInfo(seqKey, pmix.Uint64(uint64(p.first+i))), pmix.NewInfo(pmix.KeyEventDoNotCache, pmix.Bool(true)), text}
		p.sent[i].Store(int64(time.Since(s.base)))
		if _, err := s.a.Notify(ctx, stalledCode, pmix.RangeLocal, false, info); err != nil {
			return nil, 0, err
		}
	}
	select {
	case <-p.all:
	case <-time.After(lostAfter):
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	s.cur.Store(nil) // an event arriving later is not measured
	for i := range n {
		d := p.latency[i].Load()
		switch {
		case d == 0:
			lost++
		case i >= n/10:
			lat = append(lat, time.Duration(d))
		}
	}
	return lat, lost, nil
}

// stalledReader attaches as the client env names, registers a default
// handler, and never reads again: a client whose process stopped reading
// its socket.
func stalledReader(ctx context.Context, env map[string]string) (net.Conn, error) {
	network, addr, err := proto.ParseAddr(env[client.EnvAgent])
	if err != nil {
		return nil, err
	}
	rank, err := pmix.ParseRank(env[client.EnvRank])
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	for _, f := range []*proto.Frame{
		{Type: proto.TypeHello, Seq: 1, Version: proto.Version, Nspace: env[client.EnvNspace], Rank: rank, Credential: env[client.EnvCredential]},
		{Type: proto.TypeRegister, Seq: 2},
	} {
		if err := proto.WriteFrame(c, f); err != nil {
			_ = c.Close()
			return nil, err
		}
		rep, err := proto.ReadFrame(c, proto.DefaultMaxFrame)
		if err == nil {
			err = rep.Err()
		}
		if err == nil && rep.Type != proto.TypeReply {
			err = fmt.Errorf("answered with %v", rep.Type)
		}
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("%v: %w", f.Type, err)
		}
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}
