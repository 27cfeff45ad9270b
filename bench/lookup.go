package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/publishlookup"
)

// LookupConfig sizes the publish/lookup benchmark.
type LookupConfig struct {
	Rounds     int // serial lookups, and serial publishes (default 2000)
	WaitRounds int // serial PMIX_WAIT wake-ups (default 200)
}

func (c *LookupConfig) defaults() {
	if c.Rounds <= 0 {
		c.Rounds = 2000
	}
	if c.WaitRounds <= 0 {
		c.WaitRounds = 200
	}
}

// rawKV is the publish/lookup bucket opened with nats.go alone, on a
// connection of its own: the baseline.
type rawKV struct {
	nc, watchNC *nats.Conn
	kv, watchKV natsjs.KeyValue
}

func openRawKV(ctx context.Context, url string, key nats.Option) (*rawKV, error) {
	r := &rawKV{}
	var err error
	open := func() (*nats.Conn, natsjs.KeyValue, error) {
		nc, err := nats.Connect(url, nats.Name("pmixbus bench lookup"), key)
		if err != nil {
			return nil, nil, err
		}
		js, err := natsjs.NewWithDomain(nc, benchCluster)
		if err != nil {
			nc.Close()
			return nil, nil, err
		}
		kv, err := js.KeyValue(ctx, publishlookup.DefaultBucket)
		if err != nil {
			nc.Close()
			return nil, nil, err
		}
		return nc, kv, nil
	}
	if r.nc, r.kv, err = open(); err != nil {
		return nil, err
	}
	if r.watchNC, r.watchKV, err = open(); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *rawKV) close() {
	for _, nc := range []*nats.Conn{r.nc, r.watchNC} {
		if nc != nil {
			nc.Close()
		}
	}
}

// measure is one timed operation: it returns how long the part measured
// took.
type measure func(i int) (time.Duration, error)

// whole measures all of f.
func whole(f func(i int) error) measure {
	return func(i int) (time.Duration, error) {
		start := time.Now()
		err := f(i)
		return time.Since(start), err
	}
}

// paired runs raw and ours rounds times each, after a tenth as many to
// warm up, interleaved — raw first in even rounds, ours first in odd ones —
// so that both see the same conditions (GC, the other tenants of a shared
// machine).
func paired(rounds int, raw, ours measure) (rawDs, oursDs []time.Duration, err error) {
	rawDs, oursDs = make([]time.Duration, 0, rounds), make([]time.Duration, 0, rounds)
	run := func(f measure, i int, out *[]time.Duration) error {
		d, err := f(i)
		if err == nil && i >= rounds/10 {
			*out = append(*out, d)
		}
		return err
	}
	for i := range rounds + rounds/10 {
		first, second := func() error { return run(raw, i, &rawDs) }, func() error { return run(ours, i, &oursDs) }
		if i%2 == 1 {
			first, second = second, first
		}
		if err := first(); err != nil {
			return nil, nil, err
		}
		if err := second(); err != nil {
			return nil, nil, err
		}
	}
	return rawDs, oursDs, nil
}

// valueOfSize returns a string value that makes a published record about
// as large as the raw values it is compared with.
func valueOfSize(n int) string { return strings.Repeat("v", n) }

const rawValueSize = 160 // bytes: about what a published record of a short key and value holds

// Lookup runs the publish/lookup benchmark: a lookup that finds its key
// against a raw KV Get, a publish against a raw KV Create, and the wake-up
// of a PMIX_WAIT lookup against the delivery of a raw KV watch, all on the
// same server and bucket in the same run.
func Lookup(ctx context.Context, cfg LookupConfig) (*Report, error) {
	cfg.defaults()
	// A publisher and a looker on different agents, so that every
	// operation crosses agents.
	s, err := newSetup(ctx, 2, 2, nil)
	if err != nil {
		return nil, err
	}
	defer s.close()
	publisher, looker := s.clients[0], s.clients[1]
	r := &Report{}
	r.addf("lookup: one embedded NATS server, 2 agents, a publisher and a looker on different agents")

	// Publishing once provisions the bucket the raw side opens.
	if err := publisher.Publish(ctx, []pmix.Info{pmix.NewInfo("hit", pmix.String("v"))}); err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	raw, err := openRawKV(ctx, s.url, s.rawKey())
	if err != nil {
		return nil, fmt.Errorf("raw KV: %w", err)
	}
	defer raw.close()
	rawValue := []byte(valueOfSize(rawValueSize))
	if _, err := raw.kv.Create(ctx, "raw.hit", rawValue); err != nil {
		return nil, fmt.Errorf("raw KV create: %w", err)
	}

	// Lookups that find their key, against KV Gets.
	rawGet, hit, err := paired(cfg.Rounds,
		whole(func(int) error { _, err := raw.kv.Get(ctx, "raw.hit"); return err }),
		whole(func(int) error { _, err := looker.Lookup(ctx, []string{"hit"}, nil); return err }))
	if err != nil {
		return nil, fmt.Errorf("lookup against KV get: %w", err)
	}

	// Publishes of fresh keys, against KV Creates.
	value := pmix.String(valueOfSize(8))
	indef := pmix.NewInfo(pmix.KeyPersistence, pmix.PersistValue(pmix.PersistIndef))
	rawCreate, publish, err := paired(cfg.Rounds,
		whole(func(i int) error { _, err := raw.kv.Create(ctx, fmt.Sprintf("raw.c%d", i), rawValue); return err }),
		whole(func(i int) error {
			return publisher.Publish(ctx, []pmix.Info{pmix.NewInfo(fmt.Sprintf("p%d", i), value), indef})
		}))
	if err != nil {
		return nil, fmt.Errorf("publish against KV create: %w", err)
	}

	rawWake, wake, err := paired(cfg.WaitRounds,
		func(i int) (time.Duration, error) { return rawWatchWake(ctx, raw, rawValue, i) },
		func(i int) (time.Duration, error) { return waitWake(ctx, publisher, looker, s.agents[1], i) })
	if err != nil {
		return nil, fmt.Errorf("wait wake-up against KV watch: %w", err)
	}

	line := func(what string, ds []time.Duration) {
		r.addf("%-34s p50 %8v  p99 %8v  (%d rounds)", what, percentile(ds, 50), percentile(ds, 99), len(ds))
	}
	line("raw KV Get", rawGet)
	line("lookup, found (client->agent->KV)", hit)
	line("raw KV Create", rawCreate)
	line("publish (client->agent->KV)", publish)
	line("raw KV watch delivery", rawWake)
	line("PMIX_WAIT wake-up, publish->return", wake)
	r.Targets = append(r.Targets,
		Target{Name: "lookup_hit_vs_kv_get", Measured: ratio(percentile(hit, 50), percentile(rawGet, 50)), Op: "<=", Goal: 1.3},
		Target{Name: "publish_vs_kv_create", Measured: ratio(percentile(publish, 50), percentile(rawCreate, 50)), Op: "<=", Goal: 1.3},
		Target{Name: "wait_wake_vs_kv_watch", Measured: ratio(percentile(wake, 50), percentile(rawWake, 50)), Op: "<=", Goal: 1.5},
	)
	return r, nil
}

// rawWatchWake measures from a KV Create on one connection to its delivery
// to a watch of that key on another, made beforehand.
func rawWatchWake(ctx context.Context, raw *rawKV, value []byte, i int) (time.Duration, error) {
	key := fmt.Sprintf("raw.w%d", i)
	w, err := raw.watchKV.Watch(ctx, key)
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	if err := nextEntry(ctx, w); err != nil { // the end of the (empty) initial values
		return 0, err
	}
	start := time.Now()
	if _, err := raw.kv.Create(ctx, key, value); err != nil {
		return 0, err
	}
	if err := nextEntry(ctx, w); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func nextEntry(ctx context.Context, w natsjs.KeyWatcher) error {
	select {
	case _, ok := <-w.Updates():
		if !ok {
			return fmt.Errorf("watch closed")
		}
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("no watch delivery in 10 s")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitWake measures from the start of a publish to the return of a
// PMIX_WAIT lookup of that key, started beforehand on another agent (the
// looker's, lookerAgent). It publishes only once the lookup waits with the
// bucket followed (agent.Agent.LookupsWaiting), so what it measures is the
// wake-up, not the lookup's first read.
func waitWake(ctx context.Context, publisher, looker *client.Client, lookerAgent *agent.Agent, i int) (time.Duration, error) {
	wait := []pmix.Info{pmix.NewInfo(pmix.KeyWait, pmix.Int32(0)), pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(30))}
	key := fmt.Sprintf("w%d", i)
	done := make(chan error, 1)
	var woke time.Time
	looker.LookupCB([]string{key}, wait, func(_ []client.PData, err error) {
		woke = time.Now()
		done <- err
	})
	if err := waiting(ctx, lookerAgent); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := publisher.Publish(ctx, []pmix.Info{pmix.NewInfo(key, pmix.String("v"))}); err != nil {
		return 0, err
	}
	select {
	case err := <-done:
		if err != nil {
			return 0, err
		}
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return woke.Sub(start), nil
}

// waiting waits until a lookup of a's clients waits with its buckets
// followed.
func waiting(ctx context.Context, a *agent.Agent) error {
	return poll(ctx, 100*time.Microsecond, 10*time.Second, func() error {
		if a.LookupsWaiting() == 0 {
			return errors.New("no lookup waiting")
		}
		return nil
	})
}
