package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

// IOFConfig sizes the output benchmark.
type IOFConfig struct {
	// Rank is the command a rank runs, as LaunchConfig.Rank. Required.
	Rank []string
	// Ranks write Bytes in all (default 16 ranks, 64 MiB), in 100-byte
	// lines, over two agents; Rounds runs of it are timed (default 3).
	Ranks  int
	Bytes  int64
	Rounds int
	// Lines is the number of lines whose latency is measured (default
	// 200), written one every 5 ms by one rank.
	Lines int
}

func (c *IOFConfig) defaults() {
	if c.Ranks <= 0 {
		c.Ranks = 16
	}
	if c.Bytes <= 0 {
		c.Bytes = 64 << 20
	}
	if c.Rounds <= 0 {
		c.Rounds = 3
	}
	if c.Lines <= 0 {
		c.Lines = 200
	}
}

// IOF measures job output (pmixbus bench iof) on one embedded NATS server
// with two agents whose output stream is on files:
//
//   - throughput: Ranks ranks write Bytes of lines in all, as fast as a
//     program with a buffered stdout does; the rate is the bytes the
//     launcher's stdout receives over the time from its first to its last
//     byte, against raw JetStream async publishes of as many bytes, in
//     8 KiB messages, to a file stream on the same server, until all are
//     acknowledged (goal: at least 0.5);
//   - latency: one rank writes Lines lines each holding the time it was
//     written; the time until the launcher's stdout receives it (same
//     machine, same clock), against a raw NATS request/reply round trip
//     on the same server (goal: median at most 2).
//
// Errors: pmix.ErrBadParam without cfg.Rank; the error of a launch or of
// the world.
func IOF(ctx context.Context, cfg IOFConfig) (*Report, error) {
	if len(cfg.Rank) == 0 {
		return nil, pmix.Errorf(pmix.ErrBadParam, "bench iof: no rank command")
	}
	cfg.defaults()
	if cfg.Bytes < int64(cfg.Ranks) {
		return nil, pmix.Errorf(pmix.ErrBadParam, "bench iof: %d bytes for %d ranks: want at least a byte each", cfg.Bytes, cfg.Ranks)
	}
	lc := LaunchConfig{Rank: cfg.Rank, Sizes: []int{cfg.Ranks}, Kills: 1, Agents: 2}
	lc.defaults()
	s, err := newLaunchSetup(ctx, lc)
	if err != nil {
		return nil, err
	}
	defer s.close()
	raw, err := nats.Connect(s.w.URL(launchCluster), s.w.Keys().Option(security.RoleAgent))
	if err != nil {
		return nil, err
	}
	defer raw.Close()

	r := &Report{}
	per := cfg.Bytes / int64(cfg.Ranks)
	r.addf("iof: one cluster, one embedded NATS server (file store), agents %s and %s; %d ranks write %d bytes each of 100-byte lines through a 64 KiB stdio buffer",
		launchNodes[0], launchNodes[1], cfg.Ranks, per)
	r.addf("  raw: JetStream async publish of the same bytes in %d-byte messages to a file stream on the same server, until every ack", iof.MaxRecord)
	r.addf("%6s  %14s  %14s  %14s  %6s", "round", "raw MB/s", "launcher MB/s", "launch→end", "ratio")
	var ratios []float64
	for round := range cfg.Rounds {
		rawRate, err := rawPublishRate(ctx, raw, int64(cfg.Ranks)*per)
		if err != nil {
			return nil, fmt.Errorf("raw publish: %w", err)
		}
		rate, total, err := s.outputRate(ctx, cfg.Ranks, per)
		if err != nil {
			return nil, err
		}
		ratios = append(ratios, rate/rawRate)
		r.addf("%6d  %14.1f  %14.1f  %14v  %6.2f", round+1, rawRate/1e6, rate/1e6, total.Round(time.Millisecond), rate/rawRate)
	}
	slices.Sort(ratios)
	r.Targets = append(r.Targets, Target{Name: "iof_throughput_vs_raw_js", Measured: ratios[len(ratios)/2], Op: ">=", Goal: 0.5})

	rtts, err := natsRTT(ctx, s.w.URL(launchCluster), 1000, s.w.Keys().Option(security.RoleAgent))
	if err != nil {
		return nil, fmt.Errorf("raw NATS RTT: %w", err)
	}
	lat, err := s.lineLatency(ctx, cfg.Lines)
	if err != nil {
		return nil, err
	}
	rtt50, l50 := percentile(rtts, 50), percentile(lat, 50)
	r.addf("latency of a line, write in the rank -> the launcher's stdout: p50 %v  p90 %v  max %v  (%d lines); raw NATS request/reply p50 %v: ratio %.2f",
		l50.Round(time.Microsecond), percentile(lat, 90).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond), len(lat), rtt50.Round(time.Microsecond), ratio(l50, rtt50))
	r.Targets = append(r.Targets, Target{Name: "iof_line_latency_vs_rtt", Measured: ratio(l50, rtt50), Op: "<=", Goal: 2})
	return r, nil
}

// outputRate launches n ranks writing per bytes each and returns the
// rate at the launcher's stdout (first byte to last) and the time from
// launch to the run's end.
func (s *launchSetup) outputRate(ctx context.Context, n int, per int64) (float64, time.Duration, error) {
	out := &arrivals{}
	var errs bytes.Buffer
	start := time.Now()
	run, err := launch.Launch(ctx, launch.Config{SignIn: s.w.SignIn(s.nc.ConnectedUrl()), Stdout: out, Stderr: &errs,
		Output: launch.OutputSpec{Limit: max(per*int64(n), iof.DefaultLimit)},
		Jobs:   []launch.JobSpec{{N: n, MapBy: launch.MapByNode, App: s.app(rankWrite + " " + strconv.FormatInt(per, 10))}}})
	if err != nil {
		return 0, 0, err
	}
	res, err := run.Wait(ctx)
	total := time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	if res.ExitCode != 0 || out.n != per*int64(n) {
		return 0, 0, fmt.Errorf("%d ranks: exit %d, %d bytes of %d seen\n%s", n, res.ExitCode, out.n, per*int64(n), errs.String())
	}
	return float64(out.n) / out.last.Sub(out.first).Seconds(), total, nil
}

// arrivals counts bytes and when the first and last came.
type arrivals struct {
	mu          sync.Mutex
	n           int64
	first, last time.Time
}

func (a *arrivals) Write(p []byte) (int, error) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == 0 {
		a.first = now
	}
	a.n += int64(len(p))
	a.last = now
	return len(p), nil
}

// lineLatency runs one rank writing n timed lines and returns each line's
// delay, sorted.
func (s *launchSetup) lineLatency(ctx context.Context, n int) ([]time.Duration, error) {
	lw := &latencies{}
	run, err := launch.Launch(ctx, launch.Config{SignIn: s.w.SignIn(s.nc.ConnectedUrl()), Stdout: lw, Stderr: io.Discard,
		Jobs: []launch.JobSpec{{N: 1, App: s.app(rankLines + " " + strconv.Itoa(n))}}})
	if err != nil {
		return nil, err
	}
	if _, err := run.Wait(ctx); err != nil {
		return nil, err
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if len(lw.d) != n {
		return nil, fmt.Errorf("%d timed lines of %d seen", len(lw.d), n)
	}
	slices.Sort(lw.d)
	return lw.d, nil
}

// latencies reads "t <unix ns>" lines and keeps how old each is.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) Write(p []byte) (int, error) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range bytes.Split(bytes.TrimSpace(p), []byte{'\n'}) {
		if ns, err := strconv.ParseInt(string(bytes.TrimPrefix(line, []byte("t "))), 10, 64); err == nil {
			l.d = append(l.d, now.Sub(time.Unix(0, ns)))
		}
	}
	return len(p), nil
}

// rawPublishRate publishes total bytes in MaxRecord-byte messages to a
// new file stream with async publishes and returns bytes per second until
// the last acknowledgement.
func rawPublishRate(ctx context.Context, nc *nats.Conn, total int64) (float64, error) {
	js, err := natsjs.New(nc, natsjs.WithPublishAsyncMaxPending(1024), natsjs.WithPublishAsyncTimeout(30*time.Second))
	if err != nil {
		return 0, err
	}
	const name = "BENCH_IOF_RAW"
	if _, err := js.CreateOrUpdateStream(ctx, natsjs.StreamConfig{Name: name, Subjects: []string{"pmix.benchiofraw.>"}, Storage: natsjs.FileStorage}); err != nil {
		return 0, err
	}
	defer func() { _ = js.DeleteStream(context.WithoutCancel(ctx), name) }()
	msg := bytes.Repeat([]byte("x"), iof.MaxRecord)
	start := time.Now()
	for sent := int64(0); sent < total; sent += int64(len(msg)) {
		if _, err := js.PublishAsync("pmix.benchiofraw.0.out", msg); err != nil {
			return 0, err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return float64(total) / time.Since(start).Seconds(), nil
}
