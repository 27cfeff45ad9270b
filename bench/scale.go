package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/pmix"
)

// ScaleConfig sizes the scale benchmark.
type ScaleConfig struct {
	// Clients lists how many clients are attached at each step, in
	// increasing order (default 1000, 5000, 10000). Each step attaches
	// clients until there are that many.
	Clients []int
	// RegisterRounds is how many registrations are timed at each step
	// (default 200).
	RegisterRounds int
	// EventRounds is how many events are sent to every client at each
	// step (default 5); the median is reported.
	EventRounds int
	// Burst is how many events are then sent to every client at once
	// (default 16), after which the memory is measured again: what the
	// agent and the clients keep once a burst is over.
	Burst int
	// Helper is the command line of the helper processes, which hold the
	// NATS server and the clients: it runs ScaleHelper on its standard
	// input and output; its standard error is this process's. "pmixbus
	// bench scale" gives "pmixbus bench-scale-helper".
	Helper []string
	// ProfileDir, if set, receives heap profiles of each process at each
	// step, once the clients are attached and once the burst is over:
	// agent-<n>.pprof, nats-<n>.pprof, clients-<n>.pprof, and the same
	// with -<n>-burst; and CPU profiles of the agent's process and the
	// clients' while events go to every client, agent-<n>.cpu.pprof and
	// clients-<n>.cpu.pprof.
	ProfileDir string
}

func (c *ScaleConfig) defaults() {
	if len(c.Clients) == 0 {
		c.Clients = []int{1000, 5000, 10000}
	}
	if c.RegisterRounds <= 0 {
		c.RegisterRounds = 200
	}
	if c.EventRounds <= 0 {
		c.EventRounds = 5
	}
	if c.Burst <= 0 {
		c.Burst = 16
	}
}

func (c *ScaleConfig) validate() error {
	if len(c.Helper) == 0 {
		return errors.New("scale: no helper command to run the clients with")
	}
	for i, n := range c.Clients {
		if n < 1 || (i > 0 && n <= c.Clients[i-1]) {
			return fmt.Errorf("scale: client counts %v: want positive counts in increasing order", c.Clients)
		}
	}
	return nil
}

// The scale benchmark's goals (issue 12, item 8).
const (
	goalHeapPerClientKiB = 16  // the agent's heap per attached client
	goalRegisterGrowth   = 2   // register p50 at the most clients over at the fewest
	goalDeliverAllMs     = 100 // one event to every client, at the most clients
)

// scaleJobName names the job of the clients a step adds.
func scaleJobName(step int) string { return "scale" + strconv.Itoa(step) }

// scaleJobOf is the job of step: size ranks, all on the one node.
func scaleJobOf(step, size int) agent.Job {
	procs := make(map[pmix.Rank]string, size)
	for r := range size {
		procs[pmix.Rank(r)] = "n0"
	}
	return agent.Job{Nspace: scaleJobName(step), Session: "s", Procs: procs}
}

// The codes the scale benchmark's clients register for: every client for
// scaleCode, which the events carry; the timed registrations for
// scaleCode, which needs no new subscription, and for freshCode, which no
// other client takes, so that each one subscribes and waits for NATS.
const (
	scaleCode = pmix.ExternalErrBase - 10
	freshCode = pmix.ExternalErrBase - 11
)

// fileReserve is the descriptors a process of the benchmark needs beyond
// one per client: NATS, its store, the listener, the pipes.
const fileReserve = 256

// Scale runs the scale benchmark: one agent with 1k, 5k and 10k attached
// clients, each with one registration, measuring at each step the agent's
// heap per client, the latency of one more registration, and the time one
// event takes to reach every client's handler.
//
// The NATS server and the clients live in helper processes (cfg.Helper),
// so that the agent's memory is measured apart from the server's and the
// client library's, and so that 10k clients fit under the limit on open
// files: a process holding both ends of every socket would need two
// descriptors per client.
func Scale(ctx context.Context, cfg ScaleConfig) (*Report, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.ProfileDir != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return nil, err
		}
	}
	most := cfg.Clients[len(cfg.Clients)-1]
	if err := raiseFileLimit(uint64(most + fileReserve)); err != nil {
		return nil, fmt.Errorf("scale: %d clients: %w", most, err)
	}
	natsH, err := startScaleHelper(ctx, cfg.Helper)
	if err != nil {
		return nil, err
	}
	defer natsH.close()
	rep, err := natsH.call(ctx, scaleRequest{Op: opNATS}, time.Minute)
	if err != nil {
		return nil, err
	}
	natsH.base = rep.Memory
	w, err := agenttest.New(ctx, agenttest.Spec{Clusters: []agenttest.Cluster{{ID: benchCluster, Nodes: []string{"n0"}, URL: rep.URL}}}, "", nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		_ = w.Close(cctx)
	}()
	a := w.Agent("n0")
	// The clients a step adds are a job of their own, so that every job is
	// attached in full once measured: the agent retains a job's events
	// while some of its clients are not attached. The probe, the client in
	// this process whose registrations are timed, is the last rank of the
	// first job.
	if err := a.RegisterJob(ctx, scaleJobOf(0, cfg.Clients[0]+1)); err != nil {
		return nil, err
	}
	env, err := a.RegisterClient(ctx, pmix.Proc{Nspace: scaleJobName(0), Rank: pmix.Rank(cfg.Clients[0])})
	if err != nil {
		return nil, err
	}
	probe, err := client.Init(ctx, client.WithEnv(env))
	if err != nil {
		return nil, fmt.Errorf("probe client: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = probe.Finalize(cctx)
	}()
	h, err := startScaleHelper(ctx, cfg.Helper)
	if err != nil {
		return nil, err
	}
	defer h.close()
	agentBase := measureMemory()
	helpers := scaleHelpers{nats: natsH, clients: h}

	r := &Report{}
	r.addf("scale: one agent; the NATS server and the clients, one registration each, in two helper processes (%s)", filepath.Base(cfg.Helper[0]))
	r.addf("memory: each process's live heap after GC, less what it held before the first client; per client")
	var steps []scaleStep
	attached := 0
	for i, n := range cfg.Clients {
		st, err := scaleTo(ctx, cfg, a, probe, helpers, i, attached, n, agentBase)
		if err != nil {
			return nil, fmt.Errorf("scale: %d clients: %w", n, err)
		}
		attached = n
		steps = append(steps, st)
		st.print(r)
	}
	first, last := steps[0], steps[len(steps)-1]
	for _, st := range steps {
		r.Targets = append(r.Targets, Target{Name: "heap_per_client_kib_" + countLabel(st.n), Measured: st.agent.heapPerClient() / 1024, Op: "<=", Goal: goalHeapPerClientKiB})
	}
	r.Targets = append(r.Targets,
		Target{Name: "register_p50_" + countLabel(last.n) + "_vs_" + countLabel(first.n), Measured: ratio(last.register50, first.register50), Op: "<=", Goal: goalRegisterGrowth},
		Target{Name: "deliver_all_ms_" + countLabel(last.n), Measured: ms(last.deliver50), Op: "<=", Goal: goalDeliverAllMs},
	)
	return r, nil
}

// scaleHelpers are the helper processes: the NATS server's, the clients'.
type scaleHelpers struct{ nats, clients *scaleHelper }

// scaleStep is what one step measured.
type scaleStep struct {
	n                        int
	attach                   time.Duration // of the clients this step added
	added                    int
	agent, nats, clients     memoryUse
	burst                    time.Duration
	burstEvents              int
	agentAfter, clientsAfter memoryUse // once the burst was delivered
	register50, register99   time.Duration
	fresh50, fresh99         time.Duration
	deliver                  []time.Duration // notify → the last client's handler ran
	deliver50                time.Duration
	firstRan, lastRan        time.Duration // in the median round, by the helper's clock
}

// scaleTo attaches clients from attached up to n, as the job of step,
// then measures.
func scaleTo(ctx context.Context, cfg ScaleConfig, a *agent.Agent, probe *client.Client, hs scaleHelpers, step, attached, n int, agentBase memoryStats) (scaleStep, error) {
	h := hs.clients
	st := scaleStep{n: n, added: n - attached}
	if step > 0 {
		if err := a.RegisterJob(ctx, scaleJobOf(step, n-attached)); err != nil {
			return st, err
		}
	}
	envs := make([]map[string]string, 0, n-attached)
	for rank := range n - attached {
		env, err := a.RegisterClient(ctx, pmix.Proc{Nspace: scaleJobName(step), Rank: pmix.Rank(rank)})
		if err != nil {
			return st, err
		}
		envs = append(envs, env)
	}
	start := time.Now()
	rep, err := h.call(ctx, scaleRequest{Op: opAttach, Envs: envs, Code: scaleCode}, 30*time.Minute)
	if err != nil {
		return st, err
	}
	st.attach = time.Since(start)
	envs = nil
	if got := a.Stats().ClientsAttached; got != n+1 {
		return st, fmt.Errorf("the agent has %d clients attached, want %d and the probe", got, n)
	}
	st.agent = measureMemory().since(agentBase, n)
	st.clients = rep.Memory.since(h.base, n)
	nrep, err := hs.nats.call(ctx, scaleRequest{Op: opMemory}, time.Minute)
	if err != nil {
		return st, err
	}
	st.nats = nrep.Memory.since(hs.nats.base, n)
	if err := writeProfiles(ctx, cfg.ProfileDir, hs, strconv.Itoa(n)); err != nil {
		return st, err
	}

	reg, err := timeRegistrations(ctx, a, probe, scaleCode, cfg.RegisterRounds)
	if err != nil {
		return st, fmt.Errorf("registering: %w", err)
	}
	fresh, err := timeRegistrations(ctx, a, probe, freshCode, cfg.RegisterRounds)
	if err != nil {
		return st, fmt.Errorf("registering a new code: %w", err)
	}
	st.register50, st.register99 = percentile(reg, 50), percentile(reg, 99)
	st.fresh50, st.fresh99 = percentile(fresh, 50), percentile(fresh, 99)

	stopCPU, err := startCPUProfile(ctx, cfg.ProfileDir, n, h)
	if err != nil {
		return st, err
	}
	defer stopCPU()
	type round struct{ all, first, last time.Duration }
	var rounds []round
	for i := range cfg.EventRounds + 1 { // the first warms up
		all, first, last, err := deliverToAll(ctx, a, h)
		if err != nil {
			return st, fmt.Errorf("event %d: %w", i, err)
		}
		if i > 0 {
			rounds = append(rounds, round{all, first, last})
		}
	}
	slices.SortFunc(rounds, func(x, y round) int { return cmp.Compare(x.all, y.all) })
	for _, rd := range rounds {
		st.deliver = append(st.deliver, rd.all)
	}
	mid := rounds[(len(rounds)-1)/2]
	st.deliver50, st.firstRan, st.lastRan = mid.all, mid.first, mid.last

	st.burstEvents = cfg.Burst
	if st.burst, err = burstToAll(ctx, a, h, cfg.Burst); err != nil {
		return st, fmt.Errorf("burst: %w", err)
	}
	if err := chainsEnded(ctx, a); err != nil {
		return st, err
	}
	stopCPU()
	st.agentAfter = measureMemory().since(agentBase, n)
	rep, err = h.call(ctx, scaleRequest{Op: opMemory}, time.Minute)
	if err != nil {
		return st, err
	}
	st.clientsAfter = rep.Memory.since(h.base, n)
	if err := writeProfiles(ctx, cfg.ProfileDir, hs, fmt.Sprintf("%d-burst", n)); err != nil {
		return st, err
	}
	return st, nil
}

// startCPUProfile profiles the agent's process into dir, if set, as
// agent-<n>.cpu.pprof, and the clients' process (h) as
// clients-<n>.cpu.pprof, until the returned function is first called.
func startCPUProfile(ctx context.Context, dir string, n int, h *scaleHelper) (stop func(), err error) {
	if dir == "" {
		return func() {}, nil
	}
	stopAgent, err := startCPUProfileAt(filepath.Join(dir, fmt.Sprintf("agent-%d.cpu.pprof", n)))
	if err != nil {
		return nil, err
	}
	path, err := filepath.Abs(filepath.Join(dir, fmt.Sprintf("clients-%d.cpu.pprof", n)))
	if err == nil {
		_, err = h.call(ctx, scaleRequest{Op: opCPU, Path: path}, time.Minute)
	}
	if err != nil {
		stopAgent()
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			stopAgent()
			_, _ = h.call(ctx, scaleRequest{Op: opCPU}, time.Minute)
		})
	}, nil
}

// startCPUProfileAt profiles this process's CPU into path until the
// returned function is first called.
func startCPUProfileAt(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		})
	}, nil
}

// writeProfiles writes heap profiles of the three processes to dir, if
// set: agent-<label>.pprof, nats-<label>.pprof, clients-<label>.pprof.
func writeProfiles(ctx context.Context, dir string, hs scaleHelpers, label string) error {
	if dir == "" {
		return nil
	}
	if err := writeHeapProfile(filepath.Join(dir, "agent-"+label+".pprof")); err != nil {
		return err
	}
	for name, h := range map[string]*scaleHelper{"clients": hs.clients, "nats": hs.nats} {
		path, err := filepath.Abs(filepath.Join(dir, name+"-"+label+".pprof"))
		if err != nil {
			return err
		}
		if _, err := h.call(ctx, scaleRequest{Op: opProfile, Path: path}, time.Minute); err != nil {
			return err
		}
	}
	return nil
}

func (st scaleStep) print(r *Report) {
	r.addf("%d clients (%d added in %v, %.0f/s):", st.n, st.added, st.attach.Round(time.Millisecond), float64(st.added)/st.attach.Seconds())
	r.addf("  agent process  heap %6.1f KiB  stacks %5.1f KiB  goroutines %.1f", st.agent.heapPerClient()/1024, st.agent.stackPerClient()/1024, st.agent.goroutinesPerClient())
	r.addf("  NATS server    heap %6.1f KiB  stacks %5.1f KiB  goroutines %.1f", st.nats.heapPerClient()/1024, st.nats.stackPerClient()/1024, st.nats.goroutinesPerClient())
	r.addf("  client process heap %6.1f KiB  stacks %5.1f KiB  goroutines %.1f  (the client library)", st.clients.heapPerClient()/1024, st.clients.stackPerClient()/1024, st.clients.goroutinesPerClient())
	r.addf("  register, code others took         p50 %8v  p99 %8v", st.register50, st.register99)
	r.addf("  register, code nobody took (subscribes) p50 %8v  p99 %8v", st.fresh50, st.fresh99)
	r.addf("  a burst of %d events to all: %v; then agent heap %.1f KiB, client process heap %.1f KiB", st.burstEvents, st.burst.Round(time.Millisecond), st.agentAfter.heapPerClient()/1024, st.clientsAfter.heapPerClient()/1024)
	r.addf("  one event to all %d handlers: median %v (min %v, max %v, %d rounds); in the median round the first handler ran after %v, the last after %v",
		st.n, st.deliver50.Round(10*time.Microsecond), st.deliver[0].Round(10*time.Microsecond), st.deliver[len(st.deliver)-1].Round(10*time.Microsecond), len(st.deliver),
		st.firstRan.Round(10*time.Microsecond), st.lastRan.Round(10*time.Microsecond))
}

// timeRegistrations times rounds registrations of c for code, each
// deregistered before the next, after a tenth as many to warm up. Each
// starts once the agent holds no registration: one made while the
// client's previous one is still held returns at once, without its
// cache read (docs/cache.md), and timing those too made the p50 land on
// either kind from run to run.
func timeRegistrations(ctx context.Context, a *agent.Agent, c *client.Client, code pmix.Status, rounds int) ([]time.Duration, error) {
	h := func(_ *bus.Call, done bus.Done) { done(pmix.EventNoActionTaken, nil) }
	out := make([]time.Duration, 0, rounds)
	for i := range rounds + rounds/10 {
		if err := noneHeld(ctx, a); err != nil {
			return nil, err
		}
		start := time.Now()
		id, err := c.RegisterEventHandler(ctx, []pmix.Status{code}, nil, h)
		d := time.Since(start)
		if err != nil {
			return nil, err
		}
		if err := c.DeregisterEventHandler(ctx, id); err != nil {
			return nil, err
		}
		if i >= rounds/10 {
			out = append(out, d)
		}
	}
	return out, nil
}

// noneHeld waits until the agent holds no registration for its replay.
func noneHeld(ctx context.Context, a *agent.Agent) error {
	return poll(ctx, 100*time.Microsecond, time.Minute, func() error {
		if n := a.Stats().RegistrationsHeld; n > 0 {
			return fmt.Errorf("%d registrations still held", n)
		}
		return nil
	})
}

// chainsEnded waits until every chain the agent started has ended: a
// handler ran in the client before its completion reached the agent.
func chainsEnded(ctx context.Context, a *agent.Agent) error {
	return poll(ctx, 10*time.Millisecond, time.Minute, func() error {
		if s := a.Stats(); s.ChainsCompleted < s.ChainsStarted+s.ChainsReplayed {
			return fmt.Errorf("%d chains still running", s.ChainsStarted+s.ChainsReplayed-s.ChainsCompleted)
		}
		return nil
	})
}

// burstToAll has the host notify n events to the node as fast as it can
// and returns the time until every client's handler ran for each.
func burstToAll(ctx context.Context, a *agent.Agent, h *scaleHelper, n int) (time.Duration, error) {
	if _, err := h.call(ctx, scaleRequest{Op: opArm, Events: n}, time.Minute); err != nil {
		return 0, err
	}
	info := []pmix.Info{pmix.NewInfo(pmix.KeyEventDoNotCache, pmix.Bool(true))}
	start := time.Now()
	for range n {
		if _, err := a.Notify(ctx, scaleCode, pmix.RangeLocal, false, info); err != nil {
			return 0, err
		}
	}
	if _, err := h.next(ctx, opDelivered, 5*time.Minute); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// deliverToAll has the host notify one event to the node and returns the
// time until the helper reports that the last of its clients' handlers
// ran, and, by the wall clock of both processes, when the first and the
// last ran after the notify.
func deliverToAll(ctx context.Context, a *agent.Agent, h *scaleHelper) (all, first, last time.Duration, err error) {
	if _, err := h.call(ctx, scaleRequest{Op: opArm}, time.Minute); err != nil {
		return 0, 0, 0, err
	}
	info := []pmix.Info{pmix.NewInfo(pmix.KeyEventDoNotCache, pmix.Bool(true))}
	start := time.Now()
	wall := start.UnixNano()
	if _, err := a.Notify(ctx, scaleCode, pmix.RangeLocal, false, info); err != nil {
		return 0, 0, 0, err
	}
	rep, err := h.next(ctx, opDelivered, time.Minute)
	if err != nil {
		return 0, 0, 0, err
	}
	return time.Since(start), time.Duration(rep.First - wall), time.Duration(rep.Last - wall), nil
}

// memoryStats is a process's memory as the Go runtime sees it.
type memoryStats struct {
	Heap       uint64 // live heap after two collections: pools emptied too
	Stack      uint64
	Goroutines int
}

func measureMemory() memoryStats {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memoryStats{Heap: ms.HeapAlloc, Stack: ms.StackInuse, Goroutines: runtime.NumGoroutine()}
}

// memoryUse is the growth of a process's memory over n clients.
type memoryUse struct {
	heap, stack, goroutines float64
	n                       int
}

func (m memoryStats) since(base memoryStats, n int) memoryUse {
	return memoryUse{
		heap:       float64(m.Heap) - float64(base.Heap),
		stack:      float64(m.Stack) - float64(base.Stack),
		goroutines: float64(m.Goroutines - base.Goroutines),
		n:          n,
	}
}

func (u memoryUse) heapPerClient() float64       { return u.heap / float64(u.n) }
func (u memoryUse) stackPerClient() float64      { return u.stack / float64(u.n) }
func (u memoryUse) goroutinesPerClient() float64 { return u.goroutines / float64(u.n) }

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// countLabel names a client count in a target: 1000 is "1k".
func countLabel(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
