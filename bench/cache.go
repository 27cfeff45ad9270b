package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/pmix"
)

// CacheConfig sizes the cache benchmark.
type CacheConfig struct {
	Events int // events sent in the throughput phase (default 20000)
	Replay int // cached events replayed to a new registration (default 512)
	Rounds int // replay measurements, the median reported (default 5)
}

func (c *CacheConfig) defaults() {
	if c.Events <= 0 {
		c.Events = 20000
	}
	if c.Replay <= 0 {
		c.Replay = 512
	}
	if c.Rounds <= 0 {
		c.Rounds = 5
	}
}

// Cache runs the event-cache benchmark: notify throughput with the cache
// capturing every event, against raw JetStream async publish to a stream on
// the same server; and the time to replay a full cache to a new
// registration.
func Cache(ctx context.Context, cfg CacheConfig) (*Report, error) {
	cfg.defaults()
	s, err := newSetup(ctx, 1, 1+cfg.Rounds, func(c *agent.Config) { c.CacheSize = cfg.Replay })
	if err != nil {
		return nil, err
	}
	defer s.close()
	r := &Report{}
	r.addf("cache: one embedded NATS server (file storage), one agent, event cache of %d", cfg.Replay)

	raw, err := jsAsync(ctx, s.url, cfg.Events, s.rawKey())
	if err != nil {
		return nil, fmt.Errorf("raw JetStream: %w", err)
	}
	cached, err := s.cachedNotify(ctx, cfg.Events)
	if err != nil {
		return nil, fmt.Errorf("cached notify: %w", err)
	}
	r.addf("raw JetStream async publish          %10.0f msgs/s (%d, until all acked)", raw, cfg.Events)
	r.addf("notify with caching (RM, environment) %10.0f events/s (%d, until all stored)", cached, cfg.Events)

	var times []time.Duration
	for i := range cfg.Rounds {
		d, err := s.replay(ctx, s.clients[1+i], cfg.Replay)
		if err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		times = append(times, d)
	}
	med := percentile(times, 50)
	r.addf("replay of %d cached events to a new registration: median %v of %d (min %v, max %v)", cfg.Replay, med, len(times), times[0], times[len(times)-1])
	r.Targets = append(r.Targets,
		Target{Name: "cached_notify_vs_js_async", Measured: cached / raw, Op: ">=", Goal: 0.5},
		Target{Name: "replay_512_ms", Measured: float64(med) / float64(time.Millisecond), Op: "<=", Goal: 50},
	)
	return r, nil
}

// jsAsync publishes n messages to a fresh stream with PublishAsync and
// returns messages per second until all are acknowledged.
func jsAsync(ctx context.Context, url string, n int, opts ...nats.Option) (float64, error) {
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := natsjs.New(nc, natsjs.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return 0, err
	}
	if _, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: "BENCH_RAW", Subjects: []string{"pmixbus.bench.raw.>"}, MaxMsgs: 512, Discard: natsjs.DiscardOld}); err != nil {
		return 0, err
	}
	defer js.DeleteStream(context.Background(), "BENCH_RAW")
	payload := make([]byte, 160) // about an event message's size
	start := time.Now()
	for i := range n {
		if _, err := js.PublishAsync(fmt.Sprintf("pmixbus.bench.raw.%d", i%64), payload); err != nil {
			return 0, err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		return 0, fmt.Errorf("raw publishes not acknowledged")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// cachedNotify has the host RM notify n environment events and returns
// events per second until the cache has stored them all.
func (s *setup) cachedNotify(ctx context.Context, n int) (float64, error) {
	a := s.agents[0]
	before, err := a.CacheStats(ctx)
	if err != nil {
		return 0, err
	}
	stored := func() (uint64, error) {
		st, err := a.CacheStats(ctx)
		return st.Msgs + st.Evicted, err
	}
	base := before.Msgs + before.Evicted
	start := time.Now()
	for i := range n {
		if _, err := a.Notify(ctx, pmix.EventNodeDown, pmix.RangeLocal, true, []pmix.Info{pmix.NewInfo("bench.seq", pmix.Int64(int64(i)))}); err != nil {
			return 0, err
		}
	}
	for {
		got, err := stored()
		if err != nil {
			return 0, err
		}
		if got-base >= uint64(n) {
			return float64(n) / time.Since(start).Seconds(), nil
		}
		if time.Since(start) > time.Minute {
			return 0, fmt.Errorf("only %d of %d events stored", got-base, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// replay registers a handler on c for the cached events and returns the
// time from the registration call to the last replayed invocation.
func (s *setup) replay(ctx context.Context, c *client.Client, want int) (time.Duration, error) {
	var got atomic.Int64
	all := make(chan struct{})
	start := time.Now()
	// The cached events are environment events: a registration takes those
	// only with PMIX_EVENT_ENVIRO_LEVEL (RFC0002's default is false).
	enviro := []pmix.Info{pmix.NewInfo(pmix.KeyEventEnviroLevel, pmix.Bool(true))}
	if _, err := c.RegisterEventHandler(ctx, []pmix.Status{pmix.EventNodeDown}, enviro, func(_ *bus.Call, done bus.Done) {
		done(pmix.EventNoActionTaken, nil)
		if got.Add(1) == int64(want) {
			close(all)
		}
	}); err != nil {
		return 0, err
	}
	select {
	case <-all:
		return time.Since(start), nil
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("%d of %d cached events replayed", got.Load(), want)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}
