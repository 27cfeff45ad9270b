package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/collective"
	"github.com/pmixbus/pmixbus/security"
)

// cFenceLevels is the depth of the collective engine's tree for a fence
// within one cluster: a direct exchange, every agent's contribution to
// the lead agent and its one release to all, one round trip (no release
// check: that is for fences across clusters).
const cFenceLevels = 1

// fenceC measures issue 31's fence goal with C ranks: CRanks processes
// of pmixops.c ("fence CFences": after a fence with data and a warm-up,
// CFences fences without data back to back, each timed by every rank)
// launched as one job over CAgents agents of one cluster on one NATS
// server, as many ranks on each; on each agent they fence on the node's
// barrier in shared memory, whose last arrival sends the agent one frame.
// Rounds runs, each after RTTs raw request-replies between two other
// connections to the same server. Per run, the slowest rank's p50 (every
// rank prints its own median); the target is the median of those over
// the runs against the raw round trip's p50 times cFenceLevels.
//
// A tap on the collective subjects splits each fence cycle: from one
// release to the next cycle's last contribution seen (the agents' node
// side: the release reaches each agent, it wakes its ranks, they return,
// call again, the last one's frame reaches the agent, which publishes
// its contribution) and from that contribution to the release (NATS's
// side: the lead agent's exchange).
func fenceC(ctx context.Context, cfg CollectiveConfig, r *Report) error {
	n, agents := cfg.CRanks, cfg.CAgents
	per := (n + agents - 1) / agents
	// The agents, in this process, hold a socket and two pipes per rank.
	if err := raiseFileLimit(uint64(8*n + 1024)); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "pmixbus-bench-collective-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pc := PeerConfig{LibDir: cfg.LibDir, Include: cfg.Include}
	pc.defaults()
	p, err := buildPeer(ctx, pc, dir)
	if err != nil {
		return err
	}
	nodes := make([]string, agents)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("c%d", i+1)
	}
	lc := LaunchConfig{Rank: []string{p.pmixops}, Sizes: []int{per}, Kills: 1, PeerSizes: []int{1}, LibDir: cfg.LibDir}
	lc.defaults()
	s, err := newLaunchSetupOn(ctx, lc, nodes, "")
	if err != nil {
		return err
	}
	defer s.close()
	key := s.w.Keys().Option(security.RoleAgent)
	var conns [3]*nats.Conn // near and far of the round trip, the tap's
	for i := range conns {
		if conns[i], err = nats.Connect(s.w.URL(launchCluster), nats.Name("pmixbus bench collective raw"), key); err != nil {
			return err
		}
		defer conns[i].Close()
	}
	t, err := newTap(conns[2])
	if err != nil {
		return err
	}
	defer func() { _ = t.sub.Unsubscribe() }()

	m := peerMeasure{p: p, s: s, r: r}
	args := []string{"fence", strconv.Itoa(cfg.CFences)}
	r.addf("fence of C ranks: one job of %d ranks of pmixops (%s), %d on each of %d agents of one cluster, one NATS server; each rank's fences (no data) go to its node's barrier, whose last arrival sends its agent one frame",
		n, strings.Join(args, " "), per, agents)
	if _, err := m.runOursOn(ctx, agents, n, p.pmixops, args); err != nil { // unmeasured: the page cache, the agents' connections
		return err
	}
	const rttsPerRound = 20
	var slowest, rank0, fastest, rtts, took []time.Duration
	var cycles fenceCycles
	stop, err := startCPUProfileIn(cfg.ProfileDir, "fencec.cpu.pprof")
	if err != nil {
		return err
	}
	defer stop()
	for range cfg.Rounds {
		rt, err := requestRTT(ctx, conns[0], conns[1], rttsPerRound, nil)
		if err != nil {
			return fmt.Errorf("raw round trip: %w", err)
		}
		rtts = append(rtts, rt...)
		t.settle()
		t.mu.Lock()
		t.marks, t.mark = nil, true
		t.mu.Unlock()
		run, err := m.runOursOn(ctx, agents, n, p.pmixops, args)
		t.mu.Lock()
		marks := t.marks
		t.marks, t.mark = nil, false
		t.mu.Unlock()
		if err != nil {
			return err
		}
		lo, hi, got := time.Duration(0), time.Duration(0), 0
		for k, v := range run.values {
			if strings.HasPrefix(k, "fence.") {
				if got == 0 || v < lo {
					lo = v
				}
				hi = max(hi, v)
				got++
			}
		}
		if got != n {
			return fmt.Errorf("%d of %d ranks printed their fence's median", got, n)
		}
		slowest, fastest, rank0 = append(slowest, hi), append(fastest, lo), append(rank0, run.values["fence"])
		took = append(took, run.took)
		cycles.add(marks)
	}
	stop()
	fence, rtt := percentile(slowest, 50), percentile(rtts, 50)
	line := func(what string, ds []time.Duration) {
		r.addf("  %-54s p50 %9s  min %9s  max %9s  (%d)", what, us(percentile(ds, 50)), us(percentile(ds, 0)), us(percentile(ds, 100)), len(ds))
	}
	line("a fence, the slowest rank's p50, over the runs", slowest)
	line("a fence, rank 0's p50", rank0)
	line("a fence, the fastest rank's p50", fastest)
	line(fmt.Sprintf("a run of %d ranks, launch to the last exit", n), took)
	line("raw NATS request-reply, two connections, one server", rtts)
	if len(cycles.period) > 0 {
		r.addf("  per fence cycle, from the tap on %s.> (%d cycles, %.1f contributions seen each):", collective.Prefix, len(cycles.period), float64(cycles.contribs)/float64(len(cycles.period)))
		line("release to release", cycles.period)
		line("release to the next first contribution", cycles.first)
		line("release to the next last contribution (the node side)", cycles.last)
		line("last contribution to the release (NATS's side)", cycles.exchange)
		r.addf("  NATS's side %.1f raw round trips, the node side %.1f (p50s)",
			ratio(percentile(cycles.exchange, 50), rtt), ratio(percentile(cycles.last, 50), rtt))
	}
	if agents == 1 {
		r.addf("fence of %d C ranks on 1 agent: the node's barrier alone, no NATS message (no target) = %.1f raw request-replies", n, ratio(fence, rtt))
		return nil
	}
	perLevel := ratio(fence, cFenceLevels*rtt)
	r.addf("fence of %d C ranks on %d agents per level (%d: a direct exchange among the agents of one cluster) = %.1f raw request-replies",
		n, agents, cFenceLevels, perLevel)
	r.Targets = append(r.Targets, Target{Name: fmt.Sprintf("fence_c_%d_%dagents_vs_rtt_per_level", n, agents), Measured: perLevel, Op: "<=", Goal: 10})
	return nil
}

// fenceCycles are the fences' cycles as a tap saw them, from one release
// to the next: to the cycle's first and last contribution, from the last
// to the release, and whole.
type fenceCycles struct {
	first, last, exchange, period []time.Duration
	contribs                      int
}

// add takes one run's marks, in the order seen; its first release starts
// the first cycle counted (the fence with data before it is not one).
func (c *fenceCycles) add(marks []tapMark) {
	var rel, first, last time.Time
	seen := 0
	for _, m := range marks {
		switch {
		case strings.HasPrefix(m.subject, collective.Prefix+".lead."):
			if seen == 0 {
				first = m.at
			}
			last = m.at
			seen++
		case strings.HasSuffix(m.subject, ".rel"):
			if !rel.IsZero() && seen > 0 {
				c.first = append(c.first, first.Sub(rel))
				c.last = append(c.last, last.Sub(rel))
				c.exchange = append(c.exchange, m.at.Sub(last))
				c.period = append(c.period, m.at.Sub(rel))
				c.contribs += seen
			}
			rel, seen = m.at, 0
		}
	}
}
