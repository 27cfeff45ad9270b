package cabi

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
)

// BenchmarkNotifyRoundTrip measures a notify→handler round trip across two
// agents: one process notifies -3100, the other's handler answers with
// -3101 from inside the handler, and the first waits for that answer. The
// figure is ns/rtt; the goal is C at most 1.2 × Go.
//
//   - C runs testdata/pingpong.c in two processes on libpmix.so.2.
//   - Go runs testdata/gopingpong, the same program on the Go client, in
//     two processes: what a Go program launched by pmixbus does, and so
//     the baseline for the ratio.
//   - GoInProcess runs two Go clients in the test process, which also runs
//     the agents and the NATS server: no process boundary anywhere on the
//     path. A lower bound, not a program anyone runs (docs/PERFORMANCE.md).
//
// Run it with
//
//	go test -run XXX -bench NotifyRoundTrip -benchtime=2000x ./cabi
func BenchmarkNotifyRoundTrip(b *testing.B) {
	b.Run("C", func(b *testing.B) {
		pingPong(b, compile(b, "pingpong.c", headers(b)[0], true))
	})
	b.Run("Go", func(b *testing.B) {
		pingPong(b, buildGo(b, "./testdata/gopingpong"))
	})
	b.Run("GoInProcess", func(b *testing.B) {
		w := agenttest.Start(b, agenttest.Spec{
			Clusters: []agenttest.Cluster{{ID: "A"}},
			Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "gp", Nodes: []string{"n1", "n2"}}},
		})
		ctx := b.Context()
		ping, pong := w.Client("A:gp.0"), w.Client("A:gp.1")
		_, err := pong.RegisterEventHandler(ctx, []pmix.Status{-3100}, nil, func(_ *bus.Call, done bus.Done) {
			pong.NotifyEventCB(-3101, pmix.RangeNamespace, nil, func(error) {})
			done(pmix.EventActionComplete, nil)
		})
		if err != nil {
			b.Fatal(err)
		}
		answers := make(chan struct{}, 1)
		_, err = ping.RegisterEventHandler(ctx, []pmix.Status{-3101}, nil, func(_ *bus.Call, done bus.Done) {
			answers <- struct{}{}
			done(pmix.EventActionComplete, nil)
		})
		if err != nil {
			b.Fatal(err)
		}
		n := max(b.N, 20)
		b.ResetTimer()
		for range n {
			if err := ping.NotifyEvent(context.Background(), -3100, pmix.RangeNamespace, nil); err != nil {
				b.Fatal(err)
			}
			<-answers
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/rtt")
	})
}

// pingPong runs bin's "pong" on one agent and its "ping" on another in a
// new world, and reports the round trip ping printed.
func pingPong(b *testing.B, bin string) {
	w := agenttest.Start(b, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "pp", Nodes: []string{"n1", "n2"}, Detached: true}},
	})
	ctx := b.Context()
	pong := start(b, ctx, bin, w.Env("A:pp.1"), "ready", "pong")
	defer pong.wait(b)
	b.ResetTimer() // ns/op: ping's whole run, its start and attach included
	out := run(b, ctx, bin, w.Env("A:pp.0"), "ping", strconv.Itoa(max(b.N, 20)))
	ns, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(out, "rtt_ns ")), 64)
	if err != nil {
		b.Fatalf("ping printed %q", out)
	}
	b.ReportMetric(ns, "ns/rtt")
}

// BenchmarkGet measures PMIx_Get of a job-level key (pmix.job.size on the
// wildcard rank, which the library answers from what the agent gave at
// attach) from 8 C threads of testdata/getbench.c, each value released.
// The figure is wall-clock ns per call, all threads together (the
// research spike measured ~200 ns on 2 cores).
//
//	go test -run XXX -bench Get ./cabi
func BenchmarkGet(b *testing.B) {
	bin := compile(b, "getbench.c", headers(b)[0], true)
	w := agenttest.Start(b, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs: []agenttest.Job{{Cluster: "A", Nspace: "gb", Nodes: []string{"n1"}, Detached: true,
			Info: []pmix.Info{pmix.NewInfo(pmix.KeyJobSize, pmix.Uint32(1))}}},
	})
	out := run(b, b.Context(), bin, w.Env("A:gb.0"), "8", strconv.Itoa(max(b.N, 8000)))
	ns, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(out, "get_ns ")), 64)
	if err != nil {
		b.Fatalf("getbench printed %q", out)
	}
	b.ReportMetric(ns, "ns/get")
}
