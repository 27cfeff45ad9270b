package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/collective"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

// CollectiveConfig sizes the collective benchmark.
type CollectiveConfig struct {
	Procs  int // processes connecting and fencing, half in each cluster (default 1024)
	Agents int // agents, half in each cluster (default 8)
	Rounds int // connects and fences measured, each against a raw barrier (default 5)
	// DataProcs processes fence with PMIX_COLLECT_DATA, each having put
	// DataSize bytes (defaults 64 and 1024).
	DataProcs, DataSize int
	// ProfileDir, if set, receives a CPU profile of the process (agents,
	// clients and NATS servers alike: all run in it) over the measured
	// fences, fence.cpu.pprof, and over the connects, connect.cpu.pprof;
	// with CRanks, over the measured runs of C ranks, fencec.cpu.pprof
	// (the agents and the NATS server; the ranks are other processes).
	ProfileDir string
	// CRanks, if positive, also fences C ranks (fenceC): as many
	// processes of bench/peer/pmixops.c, launched over CAgents agents of
	// one cluster (default Agents; 1 for the node's barrier alone), each
	// doing CFences fences without data (default 200), Rounds runs. They
	// load LibDir's libpmix.so.2 (required then) and are compiled against
	// Include's headers where OpenPMIx's are missing.
	CRanks, CAgents, CFences int
	LibDir, Include          string
	// COnly skips the in-process clients: only the C ranks' fence runs.
	COnly bool
}

func (c *CollectiveConfig) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Procs, 1024)
	def(&c.Agents, 8)
	def(&c.Rounds, 5)
	def(&c.DataProcs, 64)
	def(&c.DataSize, 1024)
	def(&c.CFences, 200)
	c.Agents = max(c.Agents, 2)
	c.Procs = max(c.Procs, 2, c.DataProcs)
	def(&c.CAgents, c.Agents)
}

// collSetup is two clusters, A and B, each with half the agents and one
// job of half the processes (jobA, jobB), every process attached.
type collSetup struct {
	w       *agenttest.World
	clients []*client.Client
	names   []string // "A:jobA.0", … in the order of clients
	agents  []*agent.Agent
	nodes   []string // of agents
	r       *Report
}

func newCollSetup(ctx context.Context, cfg CollectiveConfig) (*collSetup, error) {
	spec := agenttest.Spec{Agent: func(c *agent.Config) { c.HandlerTimeout = time.Minute }}
	for i, id := range []cluster.ID{"A", "B"} {
		var nodes []string
		for n := range cfg.Agents / 2 {
			nodes = append(nodes, fmt.Sprintf("%s%d", strings.ToLower(string(id)), n))
		}
		if i == 1 && cfg.Agents%2 == 1 {
			nodes = append(nodes, fmt.Sprintf("b%d", cfg.Agents/2))
		}
		size := cfg.Procs / 2
		if i == 1 {
			size = cfg.Procs - size
		}
		ranks := make([]string, size)
		for r := range ranks {
			ranks[r] = nodes[r%len(nodes)]
		}
		spec.Clusters = append(spec.Clusters, agenttest.Cluster{ID: id, Nodes: nodes})
		spec.Jobs = append(spec.Jobs, agenttest.Job{Cluster: id, Nspace: "job" + string(id), Nodes: ranks,
			Info: []pmix.Info{pmix.NewInfo(pmix.KeyJobSize, pmix.Uint32(uint32(size)))}})
	}
	w, err := agenttest.New(ctx, spec, "", nil)
	if err != nil {
		return nil, err
	}
	s := &collSetup{w: w}
	for _, p := range w.Procs() {
		s.clients = append(s.clients, w.Client(p.Name))
		s.names = append(s.names, p.Name)
	}
	for _, n := range w.Nodes() {
		s.agents = append(s.agents, w.Agent(n))
		s.nodes = append(s.nodes, n)
	}
	return s, nil
}

func (s *collSetup) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.w.Close(ctx)
}

// waitInterest waits, 30 s at most, until cluster id routes subject to
// the other cluster.
func (s *collSetup) waitInterest(ctx context.Context, id cluster.ID, subject string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return s.w.WaitInterest(ctx, id, subject)
}

// both names the two jobs as a client of name's cluster does.
func both(name string) []pmix.Proc {
	if strings.HasPrefix(name, "A:") {
		return []pmix.Proc{{Nspace: "jobA", Rank: pmix.RankWildcard}, {Nspace: "B:jobB", Rank: pmix.RankWildcard}}
	}
	return []pmix.Proc{{Nspace: "A:jobA", Rank: pmix.RankWildcard}, {Nspace: "jobB", Rank: pmix.RankWildcard}}
}

// all runs f for every client at once and returns the first error.
func (s *collSetup) all(f func(i int, c *client.Client) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i, c := range s.clients {
		wg.Go(func() {
			if err := f(i, c); err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("%s: %w", s.names[i], err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// tap counts the messages and bytes on the collective subjects, seen from
// an agent's connection (which may subscribe to them where NATS is
// secured).
type tap struct {
	msgs, bytes atomic.Int64
	sub         *nats.Subscription

	mu    sync.Mutex
	marks []tapMark // while marking
	mark  bool
}

// tapMark is when the tap saw a message on subject.
type tapMark struct {
	at      time.Time
	subject string
}

func (s *collSetup) tap(ctx context.Context) (*tap, error) {
	t, err := newTap(s.agents[0].NATS())
	if err != nil {
		return nil, err
	}
	// B's agents see the tap before anything is counted.
	if err := s.waitInterest(ctx, "B", collective.Prefix+".x"); err != nil {
		_ = t.sub.Unsubscribe()
		return nil, err
	}
	return t, nil
}

// newTap counts (and, while marking, marks) the messages on the
// collective subjects that nc sees.
func newTap(nc *nats.Conn) (*tap, error) {
	t := &tap{}
	sub, err := nc.Subscribe(collective.Prefix+".>", func(m *nats.Msg) {
		t.msgs.Add(1)
		t.bytes.Add(int64(len(m.Data)))
		t.mu.Lock()
		if t.mark {
			t.marks = append(t.marks, tapMark{at: time.Now(), subject: m.Subject})
		}
		t.mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	t.sub = sub
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	return t, nil
}

// settle waits until the tap has seen nothing new for a moment: the
// messages of the operation just ended are counted.
func (t *tap) settle() (msgs, bytes int64) {
	last := int64(-1)
	for t.msgs.Load() != last {
		last = t.msgs.Load()
		time.Sleep(50 * time.Millisecond)
	}
	return t.msgs.Swap(0), t.bytes.Swap(0)
}

// rawBarrier is the baseline: one connection per agent, to that agent's
// cluster; each publishes once, one collector releases all once it has
// heard from every one.
type rawBarrier struct {
	conns    []*nats.Conn
	released chan struct{}
	round    atomic.Int64
}

const (
	rawBarrierIn  = "pmix.bench.barrier.in" // pmix.>: the subjects that cross leaf links
	rawBarrierRel = "pmix.bench.barrier.rel"
)

func (s *collSetup) rawBarrier(ctx context.Context) (*rawBarrier, error) {
	rb := &rawBarrier{released: make(chan struct{}, len(s.agents))}
	key := s.w.Keys().Option(security.RoleAgent)
	for _, node := range s.nodes {
		id := cluster.ID("A")
		if strings.HasPrefix(node, "b") {
			id = "B"
		}
		nc, err := nats.Connect(s.w.URL(id), nats.Name("pmixbus bench collective raw"), key)
		if err != nil {
			rb.close()
			return nil, err
		}
		rb.conns = append(rb.conns, nc)
		if _, err := nc.Subscribe(rawBarrierRel, func(*nats.Msg) { rb.released <- struct{}{} }); err != nil {
			rb.close()
			return nil, err
		}
	}
	var got atomic.Int64
	collector := rb.conns[0]
	if _, err := collector.Subscribe(rawBarrierIn, func(*nats.Msg) {
		if got.Add(1)%int64(len(rb.conns)) == 0 {
			_ = collector.Publish(rawBarrierRel, nil)
		}
	}); err != nil {
		rb.close()
		return nil, err
	}
	for _, nc := range rb.conns {
		if err := nc.Flush(); err != nil {
			rb.close()
			return nil, err
		}
	}
	for _, w := range []struct {
		id  cluster.ID
		sub string
	}{{"B", rawBarrierIn}, {"A", rawBarrierRel}} {
		if err := s.waitInterest(ctx, w.id, w.sub); err != nil {
			rb.close()
			return nil, err
		}
	}
	return rb, nil
}

// run is one barrier: every connection publishes once, and it ends when
// every one has the release.
func (rb *rawBarrier) run(ctx context.Context) error {
	for _, nc := range rb.conns {
		if err := nc.Publish(rawBarrierIn, nil); err != nil {
			return err
		}
	}
	for range rb.conns {
		select {
		case <-rb.released:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("raw barrier: no release in 10 s")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// crossRTT times n request-replies from rb's collector (cluster A) to its
// last connection (cluster B), across the leaf link.
func (s *collSetup) crossRTT(ctx context.Context, rb *rawBarrier, n int) ([]time.Duration, error) {
	return requestRTT(ctx, rb.conns[0], rb.conns[len(rb.conns)-1], n, func(subj string) error { return s.waitInterest(ctx, "A", subj) })
}

// requestRTT times n empty request-replies from near to far, one after
// another; far answers from its subscription, and seen (if set) waits
// until near's side routes the subject to far.
func requestRTT(ctx context.Context, near, far *nats.Conn, n int, seen func(subject string) error) ([]time.Duration, error) {
	const subj = "pmix.bench.rtt"
	sub, err := far.Subscribe(subj, func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := far.Flush(); err != nil {
		return nil, err
	}
	if seen != nil {
		if err := seen(subj); err != nil {
			return nil, err
		}
	}
	var out []time.Duration
	for range n {
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := near.RequestWithContext(rctx, subj, nil)
		cancel()
		if err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

func (rb *rawBarrier) close() {
	for _, nc := range rb.conns {
		nc.Close()
	}
}

// Collective runs the collective benchmark on two clusters: the messages
// on the collective subjects per connect, against the goal of 2·A+2; a
// connect and a fence of every process as ratios to a raw NATS barrier
// over one connection per agent, interleaved round by round; the fence
// against raw request-replies across the leaf link, per level of the
// engine (fence_vs_rtt_per_level), and one fence traced from outside
// (traceFence); and a fence with PMIX_COLLECT_DATA of DataProcs
// processes of DataSize bytes each, its time and its bytes on the
// collective subjects.
//
// With CRanks, a fence of C ranks follows (fenceC); with COnly, alone.
//
// Errors: pmix.ErrBadParam for CRanks without a LibDir holding
// libpmix.so.2; the error of a measurement or of the world.
func Collective(ctx context.Context, cfg CollectiveConfig) (*Report, error) {
	cfg.defaults()
	if cfg.CRanks > 0 {
		if _, err := os.Stat(filepath.Join(cfg.LibDir, "libpmix.so.2")); cfg.LibDir == "" || err != nil {
			return nil, pmix.Errorf(pmix.ErrBadParam, "bench collective: C ranks need a directory of pmixbus's libpmix.so.2 (--pmix-lib; make builds it), not %q", cfg.LibDir)
		}
	}
	r := &Report{}
	if !cfg.COnly {
		if err := collectiveClients(ctx, cfg, r); err != nil {
			return nil, err
		}
	}
	if cfg.CRanks > 0 {
		if err := fenceC(ctx, cfg, r); err != nil {
			return nil, fmt.Errorf("fence of C ranks: %w", err)
		}
	}
	return r, nil
}

// collectiveClients is Collective's part with in-process clients.
func collectiveClients(ctx context.Context, cfg CollectiveConfig, r *Report) error {
	s, err := newCollSetup(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.close()
	s.r = r
	r.addf("collective: 2 clusters (A, B) linked by a leaf node, %d agents, %d processes (jobA, jobB) attached in-process", len(s.agents), len(s.clients))
	t, err := s.tap(ctx)
	if err != nil {
		return fmt.Errorf("counting messages: %w", err)
	}
	defer func() { _ = t.sub.Unsubscribe() }()
	connect := func(int) error {
		return s.all(func(i int, c *client.Client) error {
			_, _, err := c.Connect(ctx, both(s.names[i]), []pmix.Info{pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(60))})
			return err
		})
	}
	fence := func(int) error {
		return s.all(func(i int, c *client.Client) error {
			return c.Fence(ctx, both(s.names[i]), []pmix.Info{pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(60))})
		})
	}
	// One connect, counted (it also warms up).
	t.settle()
	if err := connect(0); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	msgs, _ := t.settle()
	a := len(s.agents)
	r.addf("messages on %s.> per connect of %d processes on %d agents: %d (goal <= 2*A+2 = %d; acknowledgements go to inboxes and the membership to one KV put per cluster, not counted)",
		collective.Prefix, len(s.clients), a, msgs, 2*a+2)
	r.Targets = append(r.Targets, Target{Name: "connect_messages_per_agent_bound", Measured: float64(msgs), Op: "<=", Goal: float64(2*a + 2)})

	rb, err := s.rawBarrier(ctx)
	if err != nil {
		return fmt.Errorf("raw barrier: %w", err)
	}
	defer rb.close()
	raw := whole(func(int) error { return rb.run(ctx) })
	stop, err := startCPUProfileIn(cfg.ProfileDir, "connect.cpu.pprof")
	if err != nil {
		return err
	}
	rawC, conn, err := paired(cfg.Rounds, raw, whole(connect))
	stop()
	if err != nil {
		return fmt.Errorf("connect against a raw barrier: %w", err)
	}
	if stop, err = startCPUProfileIn(cfg.ProfileDir, "fence.cpu.pprof"); err != nil {
		return err
	}
	rawF, fen, err := paired(cfg.Rounds, raw, whole(fence))
	stop()
	if err != nil {
		return fmt.Errorf("fence against a raw barrier: %w", err)
	}
	line := func(what string, ds []time.Duration) {
		r.addf("%-44s p50 %9v  max %9v  (%d rounds)", what, percentile(ds, 50), percentile(ds, 100), len(ds))
	}
	line(fmt.Sprintf("raw NATS barrier, %d connections", len(rb.conns)), append(rawC, rawF...))
	line(fmt.Sprintf("connect of %d processes", len(s.clients)), conn)
	line(fmt.Sprintf("fence of %d processes", len(s.clients)), fen)
	// The release check (collective/check.go) adds one request-reply across
	// the leaf link, to every agent of the other cluster at once, before a
	// release across clusters; a cut can split the sides only if it falls
	// within about one such round trip after the last answer.
	rtts, err := s.crossRTT(ctx, rb, 5*cfg.Rounds)
	if err != nil {
		return fmt.Errorf("cross-leaf round trip: %w", err)
	}
	line("raw request-reply across the leaf link", rtts)
	r.addf("release check across clusters: one such round trip, %.1f%% of the fence's p50, %.1f%% of the connect's (same run)",
		100*ratio(percentile(rtts, 50), percentile(fen, 50)), 100*ratio(percentile(rtts, 50), percentile(conn, 50)))
	// Issue 31's goal: a fence within 10 raw request-reply round trips per
	// level of the algorithm's tree. The engine is a direct exchange, a
	// tree of one level (every agent's contribution to the coordinator,
	// its one release to all: one round trip), and a fence across
	// clusters adds the release check, a second round trip before the
	// release: 2 levels on the fence's critical path.
	const levels = 2
	perLevel := ratio(percentile(fen, 50), levels*percentile(rtts, 50))
	r.addf("fence p50 per level (%d: the direct exchange's round trip and the release check's) = %.1f raw request-replies across the leaf link",
		levels, perLevel)
	if err := s.traceFence(ctx, t, fence); err != nil {
		return err
	}

	// Fence with PMIX_COLLECT_DATA: DataProcs processes, half of each job.
	value := pmix.String(strings.Repeat("x", cfg.DataSize))
	var data []int
	for i, n := range s.names {
		if (strings.HasPrefix(n, "A:") && countPrefix(s.names[:i], "A:") < cfg.DataProcs/2) ||
			(strings.HasPrefix(n, "B:") && countPrefix(s.names[:i], "B:") < cfg.DataProcs-cfg.DataProcs/2) {
			data = append(data, i)
		}
	}
	var procs []pmix.Proc
	for _, i := range data {
		p := s.w.Procs()[i]
		procs = append(procs, pmix.Proc{Nspace: cluster.Qualify(p.Cluster, p.Proc.Nspace), Rank: p.Proc.Rank})
		if err := s.clients[i].Put(pmix.ScopeGlobal, "blob", value); err != nil {
			return err
		}
		if err := s.clients[i].Commit(ctx); err != nil {
			return err
		}
	}
	t.settle()
	var collected []time.Duration
	var collectBytes int64
	for range cfg.Rounds {
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, len(data))
		for _, i := range data {
			wg.Go(func() {
				errs <- s.clients[i].Fence(ctx, procs, []pmix.Info{pmix.NewInfo(pmix.KeyCollectData, pmix.Bool(true)), pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(60))})
			})
		}
		wg.Wait()
		collected = append(collected, time.Since(start))
		close(errs)
		for err := range errs {
			if err != nil {
				return fmt.Errorf("fence with data: %w", err)
			}
		}
		_, b := t.settle()
		collectBytes = b
	}
	line(fmt.Sprintf("fence, COLLECT_DATA, %d procs x %d B", len(data), cfg.DataSize), collected)
	r.addf("bytes on %s.> per fence with COLLECT_DATA: %d (%.1f x the %d B put)", collective.Prefix, collectBytes,
		float64(collectBytes)/float64(len(data)*cfg.DataSize), len(data)*cfg.DataSize)
	r.Targets = append(r.Targets,
		Target{Name: "connect_vs_raw_barrier", Measured: ratio(percentile(conn, 50), percentile(rawC, 50)), Op: "<=", Goal: 5},
		Target{Name: "fence_vs_raw_barrier", Measured: ratio(percentile(fen, 50), percentile(rawF, 50)), Op: "<=", Goal: 5},
		Target{Name: "fence_vs_rtt_per_level", Measured: perLevel, Op: "<=", Goal: 10},
	)
	return nil
}

func countPrefix(names []string, prefix string) int {
	n := 0
	for _, s := range names {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// startCPUProfileIn profiles this process's CPU into dir/name, if dir is
// set, until the returned function is called.
func startCPUProfileIn(dir, name string) (stop func(), err error) {
	if dir == "" {
		return func() {}, nil
	}
	return startCPUProfileAt(filepath.Join(dir, name))
}

// traceFence runs one more fence and says where its time went, from its
// start (every client's Fence called at once): when the tap saw the
// first and the last agent's contribution (each agent contributes once
// all its clients' frames arrived), the release, and when the clients'
// calls returned (the release turned into a reply frame to each).
func (s *collSetup) traceFence(ctx context.Context, t *tap, fence func(int) error) error {
	t.settle()
	t.mu.Lock()
	t.marks, t.mark = nil, true
	t.mu.Unlock()
	returned := make([]time.Time, len(s.clients))
	start := time.Now()
	err := s.all(func(i int, c *client.Client) error {
		err := c.Fence(ctx, both(s.names[i]), []pmix.Info{pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(60))})
		returned[i] = time.Now()
		return err
	})
	if err != nil {
		return fmt.Errorf("traced fence: %w", err)
	}
	t.settle()
	t.mu.Lock()
	marks := t.marks
	t.marks, t.mark = nil, false
	t.mu.Unlock()
	since := func(at time.Time) string { return at.Sub(start).Round(10 * time.Microsecond).String() }
	var contribs []time.Time
	var release time.Time
	for _, m := range marks {
		switch {
		case strings.HasPrefix(m.subject, collective.Prefix+".lead."):
			contribs = append(contribs, m.at)
		case strings.HasSuffix(m.subject, ".rel") && release.IsZero():
			release = m.at
		}
	}
	slices.SortFunc(returned, func(a, b time.Time) int { return a.Compare(b) })
	if len(contribs) == 0 || release.IsZero() {
		return fmt.Errorf("traced fence: the tap saw %d contributions and no release", len(contribs))
	}
	s.r.addf("one fence of %d processes, from its start: contributions %d, first +%s, last +%s; release +%s; clients returned first +%s, median +%s, last +%s",
		len(s.clients), len(contribs), since(contribs[0]), since(contribs[len(contribs)-1]), since(release),
		since(returned[0]), since(returned[len(returned)/2]), since(returned[len(returned)-1]))
	return nil
}
