package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/launch/liveness"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

// LaunchConfig sizes the launch benchmark.
type LaunchConfig struct {
	// Rank is the command a rank runs: an executable and its arguments,
	// to which the rank's mode is appended (LaunchRankCommand). Required.
	Rank []string
	// Sizes are the numbers of ranks launched over the two agents
	// (default 2, 16, 64).
	Sizes []int
	// Rounds launches of each size are timed, alternating with as many
	// floors; the medians are reported (default 5).
	Rounds int
	// Kills ranks are killed with SIGKILL, one at a time, after one
	// unmeasured (default 10).
	Kills int
	// NodeDowns agents are killed, one at a time (default 3).
	NodeDowns int
	// LivenessInterval and LivenessTTL are the agents' liveness knobs
	// (defaults liveness.DefaultInterval, DefaultTTL).
	LivenessInterval, LivenessTTL time.Duration
	// LibDir, if set, is the agents' PMIxLibDir: the directory of the
	// libpmix.so.2 the ranks load. Without it the comparison with mpirun
	// is skipped, saying so.
	LibDir string
	// Agents is the number of agents of the cluster, 2 to 4 (default 4):
	// the trivial launches spread over all, the comparison with mpirun
	// runs over 1 and over all, the last one's link is the one cut.
	Agents int
	// PeerSizes are the ranks of an MPI program launched under mpirun and
	// under pmixbus (default 16, 64); Include and Mpirun as PeerConfig's.
	PeerSizes       []int
	Include, Mpirun string
	// Cuts is the number of times the last agent's link to NATS is cut
	// silently under a running job (default 3).
	Cuts int
}

func (c *LaunchConfig) defaults() {
	if len(c.Sizes) == 0 {
		c.Sizes = []int{2, 16, 64}
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Rounds, 5)
	def(&c.Kills, 10)
	def(&c.NodeDowns, 3)
	def(&c.Cuts, 3)
	def(&c.Agents, len(launchNodes))
	c.Agents = min(max(c.Agents, 2), len(launchNodes))
	if len(c.PeerSizes) == 0 {
		c.PeerSizes = []int{16, 64}
	}
	if c.LivenessInterval <= 0 {
		c.LivenessInterval = liveness.DefaultInterval
	}
	if c.LivenessTTL <= 0 {
		c.LivenessTTL = liveness.DefaultTTL
	}
}

// launchCluster is the benchmark's cluster: one NATS server, agents
// launchNodes[0] to [Agents-1]; the kill and node-down measurements use
// the first two.
const launchCluster = "A"

var launchNodes = []string{"a1", "a2", "a3", "a4"}

// launchSetup is the benchmark's world and the launcher's connection.
type launchSetup struct {
	cfg LaunchConfig
	w   *agenttest.World
	nc  *nats.Conn
	// nodes are the agents' nodes, in order.
	nodes []string
	// link is the last agent's link to NATS, which cutLatency cuts.
	link    *clustertest.CutProxy
	cutNode string
}

func newLaunchSetup(ctx context.Context, cfg LaunchConfig) (*launchSetup, error) {
	nodes := launchNodes[:max(cfg.Agents, 2)]
	return newLaunchSetupOn(ctx, cfg, nodes, nodes[len(nodes)-1])
}

// newLaunchSetupOn is newLaunchSetup with an agent on each of nodes, the
// link of cutNode's through a CutProxy (none if "": every agent straight
// to NATS).
func newLaunchSetupOn(ctx context.Context, cfg LaunchConfig, nodes []string, cutNode string) (*launchSetup, error) {
	slots := max(slices.Max(cfg.Sizes), cfg.Kills+1, slices.Max(append(slices.Clone(cfg.PeerSizes), 0)))
	link, err := clustertest.NewCutProxy()
	if err != nil {
		return nil, err
	}
	w, err := agenttest.New(ctx, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: launchCluster, Nodes: nodes}},
		Agent: func(c *agent.Config) {
			c.HandlerTimeout = 10 * time.Second
			c.Slots = slots
			c.KillGrace = time.Second
			c.LivenessInterval, c.LivenessTTL = cfg.LivenessInterval, cfg.LivenessTTL
			c.PMIxLibDir = cfg.LibDir
			if cutNode != "" && c.Node == cutNode {
				if u, err := link.Via(c.URL); err == nil {
					c.URL = u
				}
			}
		},
	}, "", nil)
	if err != nil {
		link.Close()
		return nil, err
	}
	nc, err := nats.Connect(w.URL(launchCluster), w.Keys().Option(security.RoleLauncher), nats.CustomInboxPrefix(security.LauncherInboxPrefix))
	if err != nil {
		_ = w.Close(ctx)
		return nil, err
	}
	return &launchSetup{cfg: cfg, w: w, nc: nc, nodes: nodes, link: link, cutNode: cutNode}, nil
}

func (s *launchSetup) close() {
	s.nc.Close()
	s.link.Restore()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.w.Close(ctx)
	s.link.Close()
}

func (s *launchSetup) app(mode string) launch.App {
	args := slices.Clone(s.cfg.Rank[1:])
	if mode != rankTrivial {
		args = append(args, mode)
	}
	return launch.App{Path: s.cfg.Rank[0], Args: args}
}

// launchAll launches n trivial ranks, spread over the two agents, and
// waits until every one has ended: the time `pmixbus run -n n` takes.
func (s *launchSetup) launchAll(ctx context.Context, n int) (time.Duration, error) {
	var out bytes.Buffer
	start := time.Now()
	r, err := launch.Launch(ctx, launch.Config{SignIn: s.w.SignIn(s.nc.ConnectedUrl()), Stdout: &out, Stderr: &out,
		Jobs: []launch.JobSpec{{N: n, MapBy: launch.MapByNode, App: s.app(rankTrivial)}}})
	if err != nil {
		return 0, err
	}
	res, err := r.Wait(ctx)
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	if res.ExitCode != 0 {
		return 0, fmt.Errorf("%d ranks: exit %d, first abnormal end %+v\n%s", n, res.ExitCode, res.First, out.String())
	}
	return took, nil
}

// forkAll starts n processes of the rank's program from this one, each
// exiting at once, and waits for them all: the floor.
func (s *launchSetup) forkAll(n int) (time.Duration, error) {
	start := time.Now()
	cmds := make([]*exec.Cmd, n)
	for i := range cmds {
		args := append(slices.Clone(s.cfg.Rank[1:]), rankPlain)
		cmds[i] = exec.Command(s.cfg.Rank[0], args...)
		if err := cmds[i].Start(); err != nil {
			return 0, err
		}
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// lines collects what the ranks print, whole lines, and signals each new
// one.
type lines struct {
	mu   sync.Mutex
	all  []string
	more chan struct{}
}

func newLines() *lines { return &lines{more: make(chan struct{}, 1)} }

func (l *lines) Write(p []byte) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(p))
	l.mu.Lock()
	for sc.Scan() {
		l.all = append(l.all, sc.Text())
	}
	l.mu.Unlock()
	select {
	case l.more <- struct{}{}:
	default:
	}
	return len(p), nil
}

// waitFor waits until a line satisfies ok, 10 s at most, and returns it.
func (l *lines) waitFor(ctx context.Context, what string, ok func(string) bool) (string, error) {
	timeout := time.After(10 * time.Second)
	for {
		l.mu.Lock()
		for _, s := range l.all {
			if ok(s) {
				l.mu.Unlock()
				return s, nil
			}
		}
		l.mu.Unlock()
		select {
		case <-l.more:
		case <-timeout:
			return "", fmt.Errorf("no %s within 10 s", what)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// killLatency launches a continuous job: rank 0 on the first agent
// watches, the others on the second wait. It kills them one by one with
// SIGKILL and measures, for each, the time until rank 0's handler sees
// its PMIX_ERR_PROC_ABORTED_BY_SIG; the first kill warms up. Another
// code heard first about a killed rank (a TERM_WO_SYNC for its lost
// socket, say) is an error: the event would be misclassified.
func (s *launchSetup) killLatency(ctx context.Context) ([]time.Duration, error) {
	victims := s.cfg.Kills + 1
	out := newLines()
	r, err := launch.Launch(ctx, launch.Config{SignIn: s.w.SignIn(s.nc.ConnectedUrl()), Continuous: true, Stdout: out, Stderr: out,
		Jobs: []launch.JobSpec{{N: 1 + victims, App: s.app(rankWatch),
			Hosts: []launch.Node{{Name: launchNodes[0], Slots: 1}, {Name: launchNodes[1], Slots: victims}}}}})
	if err != nil {
		return nil, err
	}
	defer func() {
		r.Terminate(false)
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = r.Wait(wctx)
	}()
	nspace := strings.TrimPrefix(r.Nspaces()[0], launchCluster+":")
	for rank := range 1 + victims {
		if _, err := out.waitFor(ctx, fmt.Sprintf("rank %d ready", rank), func(l string) bool { return l == fmt.Sprintf(readyLine, rank) }); err != nil {
			return nil, err
		}
	}
	pids, err := s.pids(ctx, launchNodes[1], nspace)
	if err != nil {
		return nil, err
	}
	var took []time.Duration
	for rank := 1; rank <= victims; rank++ {
		pid, ok := pids[pmix.Rank(rank)]
		if !ok {
			return nil, fmt.Errorf("node %s does not list rank %d of %s", launchNodes[1], rank, nspace)
		}
		killed := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return nil, fmt.Errorf("killing rank %d (pid %d): %w", rank, pid, err)
		}
		prefix := fmt.Sprintf("event %d %s.%d ", pmix.ErrProcAbortedBySig, nspace, rank)
		line, err := out.waitFor(ctx, "PMIX_ERR_PROC_ABORTED_BY_SIG at rank 0 for rank "+strconv.Itoa(rank), func(l string) bool { return strings.HasPrefix(l, prefix) })
		if err != nil {
			return nil, err
		}
		ns, err := strconv.ParseInt(strings.TrimPrefix(line, prefix), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("rank 0 printed %q", line)
		}
		if rank > 1 {
			took = append(took, time.Unix(0, ns).Sub(killed))
		}
		if first := out.firstEvent(fmt.Sprintf("%s.%d", nspace, rank)); first != pmix.ErrProcAbortedBySig {
			return nil, fmt.Errorf("rank 0 heard of rank %d's end first as %v, not PMIX_ERR_PROC_ABORTED_BY_SIG", rank, first)
		}
	}
	return took, nil
}

// firstEvent is the code of the first event line about proc ("ns.3").
func (l *lines) firstEvent(proc string) pmix.Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.all {
		var code int
		var about string
		var at int64
		if n, _ := fmt.Sscanf(s, eventLine, &code, &about, &at); n == 3 && about == proc {
			return pmix.Status(code)
		}
	}
	return pmix.Success
}

// pids are the processes of job nspace's ranks on node (none when it no
// longer runs the job).
func (s *launchSetup) pids(ctx context.Context, node, nspace string) (map[pmix.Rank]int, error) {
	var reply launch.JobsReply
	if err := launch.Control(ctx, s.nc, launchCluster, node, launch.OpJobs, nil, &reply); err != nil {
		return nil, err
	}
	pids := map[pmix.Rank]int{}
	for _, j := range reply.Jobs {
		if j.Nspace == nspace {
			for _, rs := range j.Ranks {
				pids[rs.Rank] = rs.Pid
			}
		}
	}
	return pids, nil
}

// nodeDownLatency registers a job with a rank on each agent, its rank 0
// attached here with a handler for PMIX_EVENT_NODE_DOWN, and kills the
// second agent abruptly, as a crash does: its NATS connection closed, no
// Shutdown, so its liveness key expires. It measures the time until the
// handler runs, then starts the agent again, NodeDowns times.
func (s *launchSetup) nodeDownLatency(ctx context.Context) ([]time.Duration, error) {
	job := agenttest.Job{Cluster: launchCluster, Nspace: "nodedown", Session: "s", Nodes: launchNodes[:2]}
	if err := s.w.AddJob(ctx, job); err != nil {
		return nil, err
	}
	got := make(chan time.Time, 8)
	c := s.w.Client(launchCluster + ":nodedown.0")
	if _, err := c.RegisterEventHandler(ctx, []pmix.Status{pmix.EventNodeDown}, nil, func(_ *bus.Call, done bus.Done) {
		got <- time.Now()
		done(pmix.EventNoActionTaken, nil)
	}); err != nil {
		return nil, err
	}
	watcher, victim := launchNodes[0], launchNodes[1]
	var took []time.Duration
	for i := range s.cfg.NodeDowns {
		if err := s.waitHosting(ctx, watcher, victim); err != nil {
			return nil, err
		}
		old := s.w.Agent(victim)
		killed := time.Now()
		old.NATS().Close()
		select {
		case at := <-got:
			took = append(took, at.Sub(killed))
		case <-time.After(10 * s.cfg.LivenessTTL):
			return nil, fmt.Errorf("agent kill %d: no NODE_DOWN within 10 TTLs", i+1)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = old.Shutdown(sctx) // its key is gone already
		cancel()
		a, err := s.w.StartAgent(ctx, victim)
		if err != nil {
			return nil, err
		}
		if err := a.RegisterJob(ctx, agent.Job{Nspace: job.Nspace, Session: job.Session,
			Procs: map[pmix.Rank]string{0: watcher, 1: victim}}); err != nil {
			return nil, err
		}
	}
	return took, nil
}

// waitHosting waits, 10 s at most, until node watcher sees node victim up
// and hosting a job: a kill then declares it down with procs.
func (s *launchSetup) waitHosting(ctx context.Context, watcher, victim string) error {
	return poll(ctx, 20*time.Millisecond, 10*time.Second, func() error {
		for _, e := range s.w.Agent(watcher).Agents() {
			if e.Node == victim && e.State == liveness.Up && e.Record != nil && len(e.Record.Jobs) > 0 {
				return nil
			}
		}
		return fmt.Errorf("%s does not see %s up with a job", watcher, victim)
	})
}

// Launch runs the launch benchmark on one cluster of two agents: the time
// to launch N trivial ranks and see them all end, against N fork/execs of
// the same program from one process; kill -9 of a rank → the termination
// event at a rank on the other agent; an agent killed → NODE_DOWN at a
// handler, against the liveness TTL.
//
// Errors: pmix.ErrBadParam without cfg.Rank; the error of a launch or of
// the world.
func Launch(ctx context.Context, cfg LaunchConfig) (*Report, error) {
	if len(cfg.Rank) == 0 {
		return nil, pmix.Errorf(pmix.ErrBadParam, "bench launch: no rank command")
	}
	cfg.defaults()
	s, err := newLaunchSetup(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer s.close()
	r := &Report{}
	r.addf("launch: one cluster, one embedded NATS server, agents %s; each rank runs %q: Init, Finalize, exit",
		strings.Join(launchNodes[:cfg.Agents], ", "), strings.Join(append(slices.Clone(cfg.Rank), "[mode]"), " "))
	r.addf("  floor: as many processes of the same program (exiting at once, no agent to Init with) started with os/exec, all, then waited for")
	r.addf("%6s  %12s  %12s  %6s   (median of %d rounds, interleaved)", "ranks", "floor", "launch+wait", "ratio", cfg.Rounds)
	target := cfg.Sizes[len(cfg.Sizes)-1]
	if slices.Contains(cfg.Sizes, 16) {
		target = 16
	}
	for _, n := range cfg.Sizes {
		var floors, launches []time.Duration
		if _, err := s.launchAll(ctx, n); err != nil { // warm-up: page cache, connections
			return nil, err
		}
		for range cfg.Rounds {
			f, err := s.forkAll(n)
			if err != nil {
				return nil, fmt.Errorf("floor of %d: %w", n, err)
			}
			l, err := s.launchAll(ctx, n)
			if err != nil {
				return nil, fmt.Errorf("launch of %d: %w", n, err)
			}
			floors, launches = append(floors, f), append(launches, l)
		}
		f50, l50 := percentile(floors, 50), percentile(launches, 50)
		r.addf("%6d  %12v  %12v  %6.2f", n, f50.Round(10*time.Microsecond), l50.Round(10*time.Microsecond), ratio(l50, f50))
		if n == target {
			r.Targets = append(r.Targets, Target{Name: fmt.Sprintf("launch_%d_vs_floor", n), Measured: ratio(l50, f50), Op: "<=", Goal: 2})
		}
	}

	if err := s.versusMpirun(ctx, r); err != nil {
		return nil, fmt.Errorf("launch vs mpirun: %w", err)
	}

	kills, err := s.killLatency(ctx)
	if err != nil {
		return nil, fmt.Errorf("kill -9 of a rank: %w", err)
	}
	k50 := percentile(kills, 50)
	r.addf("kill -9 of a rank on %s -> PMIX_ERR_PROC_ABORTED_BY_SIG at rank 0's handler on %s: min %v  p50 %v  max %v  (%d kills)",
		launchNodes[1], launchNodes[0], kills[0].Round(10*time.Microsecond), k50.Round(10*time.Microsecond), kills[len(kills)-1].Round(10*time.Microsecond), len(kills))
	r.Targets = append(r.Targets, Target{Name: "kill9_event_p50_ms", Measured: float64(k50) / float64(time.Millisecond), Op: "<=", Goal: 20})

	downs, err := s.nodeDownLatency(ctx)
	if err != nil {
		return nil, fmt.Errorf("agent killed: %w", err)
	}
	slices.Sort(downs)
	worst := downs[len(downs)-1]
	r.addf("agent %s killed (connection closed, no Shutdown) -> PMIX_EVENT_NODE_DOWN at a handler on %s: min %v  p50 %v  max %v  (%d kills); liveness TTL %v, interval %v: max/TTL %.2f",
		launchNodes[1], launchNodes[0], downs[0].Round(time.Millisecond), percentile(downs, 50).Round(time.Millisecond), worst.Round(time.Millisecond),
		len(downs), cfg.LivenessTTL, cfg.LivenessInterval, ratio(worst, cfg.LivenessTTL))
	r.Targets = append(r.Targets, Target{Name: "nodedown_max_vs_ttl", Measured: ratio(worst, cfg.LivenessTTL), Op: "<=", Goal: 2})

	reports, waits, err := s.cutLatency(ctx)
	if err != nil {
		return nil, fmt.Errorf("link cut: %w", err)
	}
	slices.Sort(reports)
	slices.Sort(waits)
	worst = reports[len(reports)-1]
	r.addf("agent %s's link to NATS cut silently under a run -> the run reports the node lost: min %v  p50 %v  max %v; its Wait returns: p50 %v  (%d cuts); job TTL %v: max - TTL %v",
		s.cutNode, reports[0].Round(time.Millisecond), percentile(reports, 50).Round(time.Millisecond), worst.Round(time.Millisecond),
		percentile(waits, 50).Round(time.Millisecond), len(reports), launch.DefaultJobTTL, (worst - launch.DefaultJobTTL).Round(time.Millisecond))
	r.Targets = append(r.Targets, Target{Name: "cut_report_max_minus_jobttl_s", Measured: (worst - launch.DefaultJobTTL).Seconds(), Op: "<=", Goal: 1})
	return r, nil
}
