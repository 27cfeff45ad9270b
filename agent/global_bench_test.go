package agent_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

// BenchmarkGlobalAcrossClusters: a cacheable GLOBAL event notified by a
// client of cluster A, to the first handler of a client of cluster B
// (one server each, linked by a hub), serially. It reports the p50 and
// p99 of that latency beside a raw NATS request-reply between the two
// clusters' servers (across the hub both ways) in the same run, and
// their ratio.
func BenchmarkGlobalAcrossClusters(b *testing.B) {
	spec := agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A", Nodes: []string{"a1"}}, {ID: "B", Nodes: []string{"b1"}}},
		Jobs: []agenttest.Job{
			{Cluster: "A", Nspace: "jobA", Session: "s1", Nodes: []string{"a1"}},
			{Cluster: "B", Nspace: "jobB", Session: "s1", Nodes: []string{"b1"}},
		},
	}
	w := agenttest.Start(b, spec)
	ctx := b.Context()
	const code = pmix.ExternalErrBase - 330
	got := make(chan struct{}, 1)
	if _, err := w.Client("B:jobB.0").RegisterEventHandler(ctx, []pmix.Status{code}, nil, func(_ *bus.Call, done bus.Done) {
		got <- struct{}{}
		done(pmix.EventNoActionTaken, nil)
	}); err != nil {
		b.Fatal(err)
	}
	src := w.Client("A:jobA.0")
	once := func() time.Duration {
		start := time.Now()
		if err := src.NotifyEvent(ctx, code, pmix.RangeGlobal, nil); err != nil {
			b.Fatal(err)
		}
		select {
		case <-got:
		case <-time.After(time.Minute):
			b.Fatal("a GLOBAL event never reached cluster B's handler in a minute")
		}
		return time.Since(start)
	}
	once() // the first crosses once everything is set up
	rtt := rawRTTAcross(b, w)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		lat = append(lat, once())
	}
	b.StopTimer()
	p50, p99 := pct(lat, 50), pct(lat, 99)
	r50 := pct(rtt(len(lat)), 50)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(r50.Microseconds()), "nats-rtt-p50-µs")
	b.ReportMetric(float64(p50)/float64(r50), "p50/rtt")
}

// rawRTTAcross returns a function measuring n raw NATS request-replies
// from cluster A's server to a responder on B's.
func rawRTTAcross(b *testing.B, w *agenttest.World) func(n int) []time.Duration {
	key := w.Keys().Option(security.RoleAgent)
	rep, err := nats.Connect(w.URL("B"), key)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rep.Close)
	req, err := nats.Connect(w.URL("A"), key)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(req.Close)
	const subj = "pmix.bench.rtt.across"
	if _, err := rep.Subscribe(subj, func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		b.Fatal(err)
	}
	if err := rep.Flush(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
	b.Cleanup(cancel)
	if err := w.WaitInterest(ctx, "A", subj); err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 256)
	return func(n int) []time.Duration {
		out := make([]time.Duration, 0, n)
		for range n {
			start := time.Now()
			if _, err := req.RequestWithContext(ctx, subj, payload); err != nil {
				b.Fatal(fmt.Errorf("raw NATS across the hub: %w", err))
			}
			out = append(out, time.Since(start))
		}
		return out
	}
}

// pct returns the p-th percentile of ds (sorted in place).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[(len(ds)-1)*p/100]
}
