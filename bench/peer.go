package bench

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

//go:embed peer/pmixops.c peer/mpiinit.c peer/mpispawn.c peer/nodelay.c
var peerSources embed.FS

// PeerConfig sizes the side-by-side benchmark against OpenPMIx under
// mpirun.
type PeerConfig struct {
	// LibDir holds pmixbus's libpmix.so.2, which the ranks of the pmixbus
	// side load (the agents put it first on their LD_LIBRARY_PATH).
	// Required.
	LibDir string
	// Include is a directory of PMIx headers to compile the programs
	// against where OpenPMIx's (pkg-config pmix) are not installed:
	// pmixbus's cabi/include.
	Include string
	// Sizes are the rank counts of the fence measurement (default 4, 16,
	// 64).
	Sizes []int
	// Fences, Notifies and Lines are the operations timed in each run
	// (defaults 200, 500, 200); the medians are compared.
	Fences, Notifies, Lines int
	// Launch is the number of ranks of the MPI launch (default 16).
	Launch int
	// FanoutRanks and FanoutEvents size the fan-out: one rank sends
	// FanoutEvents events of range LOCAL, the others count them (defaults
	// 64 and 1000).
	FanoutRanks, FanoutEvents int
	// GroupRanks is the size of the group construct measurement, on
	// GroupAgents agents (defaults 64 and 4), and Groups the constructs
	// timed in each run (default 20).
	GroupRanks, GroupAgents, Groups int
	// Idle is how long an initialised rank sleeps while its library's
	// threads' context switches are counted (default 2 s; reported per
	// 10 s).
	Idle time.Duration
	// Rounds runs of every measurement on each side, alternating; the
	// medians of the rounds are compared (default 3).
	Rounds int
	// Mpirun is the peer's launcher (default: mpirun on PATH). The peer
	// side is skipped, and said so, without it or without OpenPMIx's
	// headers.
	Mpirun string
	// Only names the measurements to run, of PeerMeasurements (default:
	// all of them).
	Only []string
	// ProfileDir, if set, receives a CPU profile of this process (the
	// agent, its NATS server and the launcher) over the fan-out
	// measurement: fanout.cpu.pprof (the process idles while mpirun's
	// runs go).
	ProfileDir string
}

// PeerMeasurements are the measurements of Peer, by the names
// PeerConfig.Only takes: the fences (with and without data), MPI_Init and
// the MPI launch and spawn, a rank's footprint, one output line, notify
// and its fan-out, and the group construct.
var PeerMeasurements = []string{"fence", "mpi", "footprint", "output", "notify", "fanout", "group"}

// wants says whether the measurement named is to run.
func (c *PeerConfig) wants(name string) bool {
	return len(c.Only) == 0 || slices.Contains(c.Only, name)
}

func (c *PeerConfig) defaults() {
	if len(c.Sizes) == 0 {
		c.Sizes = []int{4, 16, 64}
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Fences, 200)
	def(&c.Notifies, 500)
	def(&c.Lines, 200)
	def(&c.Launch, 16)
	def(&c.FanoutRanks, 64)
	def(&c.FanoutEvents, 1000)
	def(&c.GroupRanks, 64)
	def(&c.GroupAgents, 4)
	def(&c.Groups, 20)
	def(&c.Rounds, 3)
	if c.Idle <= 0 {
		c.Idle = 2 * time.Second
	}
	if c.Mpirun == "" {
		c.Mpirun, _ = exec.LookPath("mpirun")
	}
}

// Peer runs the same C programs under mpirun with Debian's OpenPMIx and
// under pmixbus (pmixbus bench peer), one agent on one embedded NATS
// server and its libpmix.so.2, alternating rounds, and compares medians:
//
//   - fence: the median of Fences PMIx_Fence calls without data, rank 0's
//     view, at each of Sizes ranks (goal: at most 0.5x mpirun's);
//   - fence with data: the first PMIx_Fence with PMIX_COLLECT_DATA after a
//     put of 64 bytes by every rank, at the smallest size (goal: 1.0x);
//   - MPI_Init: the slowest rank's MPI_Init of an Open MPI program, 2
//     ranks (goal: 0.8x), and the launch of Launch ranks of it to their
//     exit (goal: 0.8x), where mpicc is installed;
//   - one output line: a rank's line to the launcher's stdout, the median
//     of Lines lines 5 ms apart (goal: 1.0x);
//   - group construct: the median of Groups PMIx_Group_construct of
//     GroupRanks ranks with PMIX_GROUP_ASSIGN_CONTEXT_ID, each followed by
//     its destruct, on GroupAgents agents (goal: 1.0x); mpirun's ORTE (Open
//     MPI 4.1) has no group operations, which the report says;
//   - a rank's footprint: after Init and a fence, its peak RSS (goal: at
//     most OpenPMIx's), its threads (at most 2) and the context switches
//     of its threads but the main one while it sleeps Idle (at most 2 per
//     10 s);
//   - fan-out: FanoutEvents LOCAL-range events from one rank to
//     FanoutRanks-1 others, deliveries per second, the peer with
//     TCP_NODELAY (goal: at least 3x OpenPMIx's);
//   - notify: the median round trip of a LOCAL-range event and its answer
//     sent from the handler, two ranks; the peer with TCP_NODELAY forced
//     on its loopback sockets (stock OpenPMIx waits for Nagle's delayed
//     acknowledgement; its time is printed too) (goal: 1.0x).
//
// The programs are compiled once, against OpenPMIx's headers where
// installed, with OpenPMIx's library as their run path; the pmixbus side
// runs the same binaries, which load pmixbus's library from the
// LD_LIBRARY_PATH the agent gives them.
//
// Errors: pmix.ErrBadParam without LibDir or with no libpmix.so.2 in it;
// a compiler's or a run's error.
func Peer(ctx context.Context, cfg PeerConfig) (*Report, error) {
	if cfg.LibDir == "" {
		return nil, pmix.Errorf(pmix.ErrBadParam, "bench peer: no directory of pmixbus's libpmix.so.2")
	}
	for _, name := range cfg.Only {
		if !slices.Contains(PeerMeasurements, name) {
			return nil, pmix.Errorf(pmix.ErrBadParam, "bench peer: no measurement %q (there are %s)", name, strings.Join(PeerMeasurements, ", "))
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.LibDir, "libpmix.so.2")); err != nil {
		return nil, pmix.Errorf(pmix.ErrBadParam, "bench peer: %s holds no libpmix.so.2 (build it first: make): %v", cfg.LibDir, err)
	}
	cfg.defaults()
	dir, err := os.MkdirTemp("", "pmixbus-bench-peer-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p, err := buildPeer(ctx, cfg, dir)
	if err != nil {
		return nil, err
	}
	lc := LaunchConfig{Rank: []string{p.pmixops}, Sizes: []int{max(slices.Max(cfg.Sizes), cfg.Launch, 2)}, Kills: 1, LibDir: cfg.LibDir, Agents: max(2, cfg.GroupAgents), PeerSizes: []int{1}}
	lc.defaults()
	s, err := newLaunchSetup(ctx, lc)
	if err != nil {
		return nil, err
	}
	defer s.close()
	r := &Report{}
	if p.mpirun == "" {
		r.addf("peer: skipped, %s (apt-get install openmpi-bin libopenmpi-dev libpmix-dev)", p.why)
	}
	m := peerMeasure{cfg: cfg, p: p, s: s, r: r}
	return r, m.all(ctx)
}

// peerPrograms are the compiled programs and the peer's launcher ("" when
// the peer side is skipped, and why).
type peerPrograms struct {
	pmixops, mpiinit, mpispawn, nodelay string
	mpirun, why                         string
}

func buildPeer(ctx context.Context, cfg PeerConfig, dir string) (peerPrograms, error) {
	p := peerPrograms{mpirun: cfg.Mpirun}
	if _, err := exec.LookPath("gcc"); err != nil {
		return p, pmix.Errorf(pmix.ErrNotSupported, "bench peer: gcc is needed to build its programs: %v", err)
	}
	for _, name := range []string{"pmixops.c", "mpiinit.c", "mpispawn.c", "nodelay.c"} {
		src, err := peerSources.ReadFile("peer/" + name)
		if err != nil {
			return p, err
		}
		if err := os.WriteFile(filepath.Join(dir, name), src, 0o644); err != nil {
			return p, err
		}
	}
	run := func(name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("bench peer: %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return nil
	}
	p.pmixops = filepath.Join(dir, "pmixops")
	flags, err := exec.CommandContext(ctx, "pkg-config", "--cflags", "--libs", "pmix").Output()
	switch {
	case err == nil:
		args := append([]string{"-O2", "-o", p.pmixops, "pmixops.c"}, strings.Fields(string(flags))...)
		if err := run("gcc", append(args, "-lpthread")...); err != nil {
			return p, err
		}
	case cfg.Include != "":
		p.mpirun, p.why = "", "OpenPMIx's headers are not installed (pkg-config pmix)"
		if err := run("gcc", "-O2", "-I", cfg.Include, "-o", p.pmixops, "pmixops.c", "-L", cfg.LibDir, "-l:libpmix.so.2", "-lpthread"); err != nil {
			return p, err
		}
	default:
		return p, pmix.Errorf(pmix.ErrNotSupported, "bench peer: no PMIx headers: install libpmix-dev or name pmixbus's (--pmix-include cabi/include)")
	}
	if p.mpirun == "" && p.why == "" {
		p.why = "mpirun is not installed"
	}
	if _, err := exec.LookPath("mpicc"); err == nil {
		p.mpiinit = filepath.Join(dir, "mpiinit")
		if err := run("mpicc", "-O2", "-o", p.mpiinit, "mpiinit.c"); err != nil {
			return p, err
		}
		p.mpispawn = filepath.Join(dir, "mpispawn")
		if err := run("mpicc", "-O2", "-o", p.mpispawn, "mpispawn.c"); err != nil {
			return p, err
		}
	}
	p.nodelay = filepath.Join(dir, "nodelay.so")
	if err := run("gcc", "-O2", "-shared", "-fPIC", "-o", p.nodelay, "nodelay.c", "-ldl"); err != nil {
		return p, err
	}
	return p, nil
}

// peerMeasure runs the measurements of one Peer call.
type peerMeasure struct {
	cfg PeerConfig
	p   peerPrograms
	s   *launchSetup
	r   *Report
}

// peerRun is what one run printed (rank 0's "<name> <ns>" lines), its
// output lines' delays and how long it took from launch to exit.
type peerRun struct {
	values map[string]time.Duration
	delays []time.Duration
	took   time.Duration
}

func (m *peerMeasure) all(ctx context.Context) error {
	// In PeerMeasurements' order.
	runs := map[string]func(context.Context) error{
		"fence": m.fences, "mpi": m.mpi, "footprint": m.footprint, "output": m.output,
		"notify": m.notify, "fanout": m.fanout, "group": m.group,
	}
	for _, name := range PeerMeasurements {
		if !m.cfg.wants(name) {
			continue
		}
		if err := runs[name](ctx); err != nil {
			return err
		}
	}
	return nil
}

// fences compares PMIx_Fence without data at each of Sizes ranks, and the
// first one with data at the smallest.
func (m *peerMeasure) fences(ctx context.Context) error {
	small := slices.Min(m.cfg.Sizes)
	for _, n := range m.cfg.Sizes {
		args := []string{"fence", strconv.Itoa(m.cfg.Fences)}
		peer, ours, err := m.compare(ctx, n, m.p.pmixops, args, nil, func(r peerRun) time.Duration { return r.values["fence"] })
		if err != nil {
			return err
		}
		m.line(fmt.Sprintf("fence, %d ranks, p50", n), fmt.Sprintf("peer_fence_%d_vs_mpirun", n), peer, ours, 0.5)
		if n == small {
			peers, ourss, err := m.compareAll(ctx, n, m.p.pmixops, args, nil, value("fence_data"), fromLastCall)
			if err != nil {
				return err
			}
			m.line(fmt.Sprintf("first fence with PMIX_COLLECT_DATA, %d ranks, rank 0", n), "", peers[0], ourss[0], 0)
			m.line("the same, from the last call to the last return", fmt.Sprintf("peer_fence_data_%d_vs_mpirun", n), peers[1], ourss[1], 1.0)
		}
	}
	return nil
}

// mpi compares an Open MPI program's MPI_Init, launch and spawn, where
// mpicc is installed.
func (m *peerMeasure) mpi(ctx context.Context) error {
	if m.p.mpiinit != "" {
		peer, ours, err := m.compare(ctx, 2, m.p.mpiinit, nil, nil, value("mpi_init"))
		if err != nil {
			return err
		}
		m.line("MPI_Init, 2 ranks, the slowest", "peer_mpi_init_2_vs_mpirun", peer, ours, 0.8)
		peers, ourss, err := m.compareAll(ctx, m.cfg.Launch, m.p.mpiinit, nil, nil, value("mpi_init"), func(r peerRun) time.Duration { return r.took })
		if err != nil {
			return err
		}
		m.line(fmt.Sprintf("MPI_Init, %d ranks, the slowest", m.cfg.Launch), fmt.Sprintf("peer_mpi_init_%d_vs_mpirun", m.cfg.Launch), peers[0], ourss[0], 0.8)
		m.line(fmt.Sprintf("MPI program of %d ranks, launch to exit", m.cfg.Launch), fmt.Sprintf("peer_mpi_launch_%d_vs_mpirun", m.cfg.Launch), peers[1], ourss[1], 0.8)
		// The children connect back over publish/lookup and connect:
		// MPI_Comm_spawn returns once they have.
		peer, ours, err = m.compare(ctx, 1, m.p.mpispawn, []string{"4"}, nil, value("mpi_spawn"))
		if err != nil {
			return err
		}
		m.line("MPI_Comm_spawn of 4 children, to the intercomm", "peer_mpi_spawn_4_vs_mpirun", peer, ours, 1.0)
	} else {
		m.r.addf("MPI_Init: skipped, mpicc is not installed")
	}
	return nil
}

// footprint compares a rank's peak RSS, threads and idle context
// switches.
func (m *peerMeasure) footprint(ctx context.Context) error {
	idle := []string{"idle", strconv.Itoa(int(m.cfg.Idle / time.Millisecond))}
	peers, ourss, err := m.compareAll(ctx, 2, m.p.pmixops, idle, nil, value("rss_kb"), value("threads"), value("idle_switches"))
	if err != nil {
		return err
	}
	m.count("peak RSS of a rank after Init and a fence, kB", peers[0], ourss[0])
	if peers[0] > 0 {
		m.r.Targets = append(m.r.Targets, Target{Name: "peer_rank_rss_vs_openpmix", Measured: float64(ourss[0]) / float64(peers[0]), Op: "<=", Goal: 1})
	}
	m.count("threads of a rank after Init", peers[1], ourss[1])
	m.count(fmt.Sprintf("context switches of an idle rank per 10 s (%v idle)", m.cfg.Idle), peers[2], ourss[2])
	m.r.Targets = append(m.r.Targets,
		Target{Name: "rank_threads_after_init", Measured: float64(ourss[1]), Op: "<=", Goal: 2},
		Target{Name: "rank_idle_switches_per_10s", Measured: float64(ourss[2]), Op: "<=", Goal: 2})
	return nil
}

// output compares one output line's way from a rank to the launcher's
// stdout.
func (m *peerMeasure) output(ctx context.Context) error {
	lines := []string{"lines", strconv.Itoa(m.cfg.Lines)}
	peer, ours, err := m.compare(ctx, 1, m.p.pmixops, lines, nil, func(r peerRun) time.Duration { return percentile(r.delays, 50) })
	if err != nil {
		return err
	}
	m.line("one output line, rank to launcher's stdout, p50", "peer_output_line_vs_mpirun", peer, ours, 1.0)
	floor, err := m.oneWay(ctx)
	if err != nil {
		return err
	}
	m.r.addf("%-52s nats   %9s  (pmixbus's line is this, a pipe and the agent's and launcher's handling)", "its floor: one NATS message between two clients, p50", us(floor))
	return nil
}

// oneWay is the floor under pmixbus's output line: the median delay of
// Lines NATS messages, 5 ms apart as the rank's lines are, from one
// client of the agents' server to a subscriber on another (an agent's
// connection to the launcher's, without the stream, the pipe or either
// end's work).
func (m *peerMeasure) oneWay(ctx context.Context) (time.Duration, error) {
	url := m.s.nc.ConnectedUrl()
	pub, err := nats.Connect(url, m.s.w.Keys().Option(security.RoleAgent))
	if err != nil {
		return 0, err
	}
	defer pub.Close()
	sub, err := nats.Connect(url, m.s.w.Keys().Option(security.RoleAgent))
	if err != nil {
		return 0, err
	}
	defer sub.Close()
	ch := make(chan *nats.Msg, 1)
	subj := "pmixbus.bench.peer.oneway"
	if _, err := sub.ChanSubscribe(subj, ch); err != nil {
		return 0, err
	}
	if err := sub.FlushTimeout(5 * time.Second); err != nil {
		return 0, err
	}
	d := make([]time.Duration, 0, m.cfg.Lines)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for range m.cfg.Lines {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		start := time.Now()
		if err := pub.Publish(subj, []byte("t 1234567890123456789\n")); err != nil {
			return 0, err
		}
		select {
		case <-ch:
			d = append(d, time.Since(start))
		case <-time.After(5 * time.Second):
			return 0, fmt.Errorf("bench peer: a NATS message to a subscriber of the same server took over 5 s")
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return percentile(d, 50), nil
}

// notify compares a LOCAL-range event's round trip between two ranks.
func (m *peerMeasure) notify(ctx context.Context) error {
	notify := []string{"notify", strconv.Itoa(m.cfg.Notifies)}
	rtt := func(r peerRun) time.Duration { return r.values["notify_rtt"] }
	if m.p.mpirun != "" {
		// Stock OpenPMIx, for the record: Nagle's delay makes every round
		// trip tens of milliseconds, so a few do.
		stock, err := m.runPeer(ctx, 2, m.p.pmixops, []string{"notify", "5"}, nil)
		if err != nil {
			return err
		}
		m.r.addf("%-52s mpirun %9s (stock OpenPMIx, without TCP_NODELAY)", "notify round trip, LOCAL range, p50", us(rtt(stock)))
	}
	peer, ours, err := m.compare(ctx, 2, m.p.pmixops, notify, []string{"LD_PRELOAD=" + m.p.nodelay}, rtt)
	if err != nil {
		return err
	}
	m.line("notify round trip, LOCAL range, p50 (TCP_NODELAY)", "peer_notify_vs_openpmix", peer, ours, 1.0)
	// The same events with PMIX_EVENT_DO_NOT_CACHE: no store in the
	// events stream on their path, which is what the cached round trip
	// pays beyond it (docs/cache.md).
	var bare []time.Duration
	for range m.cfg.Rounds {
		r, err := m.runOurs(ctx, 2, m.p.pmixops, append(slices.Clone(notify), "nocache"))
		if err != nil {
			return err
		}
		bare = append(bare, rtt(r))
	}
	b := percentile(bare, 50)
	if peer > 0 {
		m.r.addf("%-52s %17s pmixbus %9s  ratio %.2f  (no store on the path; no target)", "the same, PMIX_EVENT_DO_NOT_CACHE", "", us(b), float64(b)/float64(peer))
	} else {
		m.r.addf("%-52s %17s pmixbus %9s  (no store on the path)", "the same, PMIX_EVENT_DO_NOT_CACHE", "", us(b))
	}
	return nil
}

// fanout compares the deliveries per second of FanoutEvents events of
// range LOCAL from one rank to FanoutRanks-1 others on one node, sent
// back to back, from the first send to the end of a fence the receivers
// join once they have them all; the peer with TCP_NODELAY, as for notify.
func (m *peerMeasure) fanout(ctx context.Context) error {
	n, args := m.cfg.FanoutRanks, []string{"fanout", strconv.Itoa(m.cfg.FanoutEvents)}
	rate := func(r peerRun) (float64, error) {
		var got int64 // counts, read as the values' durations are
		for k, v := range r.values {
			if strings.HasPrefix(k, "fanout_got.") {
				got += int64(v)
			}
		}
		if want := int64(m.cfg.FanoutEvents * (n - 1)); got != want {
			return 0, fmt.Errorf("bench peer: fan-out: %d of %d deliveries", got, want)
		}
		if r.values["fanout_took"] <= 0 {
			return 0, errors.New("bench peer: fan-out: no time printed")
		}
		return float64(got) / r.values["fanout_took"].Seconds(), nil
	}
	if m.cfg.ProfileDir != "" {
		if err := os.MkdirAll(m.cfg.ProfileDir, 0o755); err != nil {
			return err
		}
	}
	stop, err := startCPUProfileIn(m.cfg.ProfileDir, "fanout.cpu.pprof")
	if err != nil {
		return err
	}
	defer stop()
	var peers, ours []float64
	for range m.cfg.Rounds {
		if m.p.mpirun != "" {
			r, err := m.runPeer(ctx, n, m.p.pmixops, args, []string{"LD_PRELOAD=" + m.p.nodelay})
			if err != nil {
				return err
			}
			v, err := rate(r)
			if err != nil {
				return err
			}
			peers = append(peers, v)
		}
		r, err := m.runOurs(ctx, n, m.p.pmixops, args)
		if err != nil {
			return err
		}
		v, err := rate(r)
		if err != nil {
			return err
		}
		ours = append(ours, v)
	}
	what := fmt.Sprintf("fan-out, LOCAL, 1 rank to %d, deliveries/s", n-1)
	median := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	if len(peers) == 0 {
		m.r.addf("%-52s pmixbus %9.0f", what, median(ours))
		return nil
	}
	ratio := median(ours) / median(peers)
	m.r.addf("%-52s mpirun %9.0f  pmixbus %9.0f  ratio %.2f", what, median(peers), median(ours), ratio)
	m.r.Targets = append(m.r.Targets, Target{Name: "peer_fanout_vs_openpmix", Measured: ratio, Op: ">=", Goal: 3})
	return nil
}

// group measures PMIx_Group_construct of GroupRanks ranks spread over
// GroupAgents agents, against mpirun's where it has groups.
func (m *peerMeasure) group(ctx context.Context) error {
	n, agents := m.cfg.GroupRanks, min(m.cfg.GroupAgents, len(launchNodes))
	args := []string{"group", strconv.Itoa(m.cfg.Groups)}
	var peers, ours []time.Duration
	unsupported := false
	for range m.cfg.Rounds {
		if m.p.mpirun != "" && !unsupported {
			r, err := m.runPeer(ctx, n, m.p.pmixops, args, nil)
			if err != nil {
				return err
			}
			if r.values["group_unsupported"] != 0 {
				unsupported = true
			} else {
				peers = append(peers, r.values["group"])
			}
		}
		r, err := m.runOursOn(ctx, agents, n, m.p.pmixops, args)
		if err != nil {
			return err
		}
		ours = append(ours, r.values["group"])
	}
	what := fmt.Sprintf("group construct, %d ranks on %d agents, p50", n, agents)
	if unsupported {
		m.r.addf("%-52s mpirun: not supported (ORTE)  pmixbus %9s", what, us(percentile(ours, 50)))
		return nil
	}
	m.line(what, fmt.Sprintf("peer_group_construct_%d_vs_mpirun", n), percentile(peers, 50), percentile(ours, 50), 1.0)
	return nil
}

// compare runs args on n ranks Rounds times on each side, alternating,
// and returns the medians of what pick takes from each run (peer 0 when
// the peer side is skipped). peerEnv is added to the peer's environment.
func (m *peerMeasure) compare(ctx context.Context, n int, prog string, args, peerEnv []string, pick func(peerRun) time.Duration) (peer, ours time.Duration, err error) {
	peers, ourss, err := m.compareAll(ctx, n, prog, args, peerEnv, pick)
	if err != nil {
		return 0, 0, err
	}
	return peers[0], ourss[0], nil
}

// compareAll is compare with several picks from the same runs: the
// medians of each, in the order of picks.
func (m *peerMeasure) compareAll(ctx context.Context, n int, prog string, args, peerEnv []string, picks ...func(peerRun) time.Duration) (peer, ours []time.Duration, err error) {
	peers, ourss := make([][]time.Duration, len(picks)), make([][]time.Duration, len(picks))
	for range m.cfg.Rounds {
		if m.p.mpirun != "" {
			r, err := m.runPeer(ctx, n, prog, args, peerEnv)
			if err != nil {
				return nil, nil, err
			}
			for i, pick := range picks {
				peers[i] = append(peers[i], pick(r))
			}
		}
		r, err := m.runOurs(ctx, n, prog, args)
		if err != nil {
			return nil, nil, err
		}
		for i, pick := range picks {
			ourss[i] = append(ourss[i], pick(r))
		}
	}
	for i := range picks {
		peer = append(peer, percentile(peers[i], 50))
		ours = append(ours, percentile(ourss[i], 50))
	}
	return peer, ours, nil
}

// fromLastCall picks the first fence with data from the last rank's call
// to the last rank's return (every rank prints both, on the realtime
// clock of the one machine): rank 0's own time also holds the wait for
// the ranks started after it.
func fromLastCall(r peerRun) time.Duration {
	var in, out time.Duration
	for k, v := range r.values {
		switch {
		case strings.HasPrefix(k, "fence_data_in."):
			in = max(in, v)
		case strings.HasPrefix(k, "fence_data_out."):
			out = max(out, v)
		}
	}
	if in == 0 || out < in {
		return 0
	}
	return out - in
}

// value picks a "<name> <n>" line's n from a run.
func value(name string) func(peerRun) time.Duration {
	return func(r peerRun) time.Duration { return r.values[name] }
}

// line reports one comparison, and its target when the peer ran and
// target is named.
func (m *peerMeasure) line(what, target string, peer, ours time.Duration, goal float64) {
	if peer == 0 || target == "" {
		if peer != 0 {
			m.r.addf("%-52s mpirun %9s  pmixbus %9s  ratio %.2f", what, us(peer), us(ours), float64(ours)/float64(peer))
			return
		}
		m.r.addf("%-52s pmixbus %9s", what, us(ours))
		return
	}
	ratio := float64(ours) / float64(peer)
	m.r.addf("%-52s mpirun %9s  pmixbus %9s  ratio %.2f", what, us(peer), us(ours), ratio)
	m.r.Targets = append(m.r.Targets, Target{Name: target, Measured: ratio, Op: "<=", Goal: goal})
}

// us prints a time in the unit that suits it.
// count reports a measurement that is a number, not a time.
func (m *peerMeasure) count(what string, peer, ours time.Duration) {
	if m.p.mpirun == "" {
		m.r.addf("%-52s pmixbus %9d", what, int64(ours))
		return
	}
	m.r.addf("%-52s mpirun %9d  pmixbus %9d", what, int64(peer), int64(ours))
}

func us(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.1f µs", float64(d)/1e3)
}

// peerTimeout bounds one run on either side: a hung run is an error, not
// a hung benchmark.
const peerTimeout = 2 * time.Minute

func (m *peerMeasure) runPeer(ctx context.Context, n int, prog string, args, env []string) (peerRun, error) {
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	out := &peerOutput{}
	var errs bytes.Buffer
	cmd := exec.CommandContext(ctx, m.p.mpirun, append([]string{"--oversubscribe", "-n", strconv.Itoa(n), prog}, args...)...)
	cmd.Stdout, cmd.Stderr, cmd.WaitDelay = out, &errs, 5*time.Second
	// mpirun refuses root unless told; CI runs as root.
	cmd.Env = append(os.Environ(), append([]string{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}, env...)...)
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		return peerRun{}, fmt.Errorf("bench peer: mpirun -n %d %s %s: %v\n%s", n, filepath.Base(prog), strings.Join(args, " "), err, errs.String())
	}
	return out.run(took)
}

func (m *peerMeasure) runOurs(ctx context.Context, n int, prog string, args []string) (peerRun, error) {
	return m.runOursOn(ctx, 1, n, prog, args)
}

// runOursOn runs n ranks of prog over the first agents of the setup's
// nodes, by slot: as many on each (the last ones fewer when n does not
// divide). The run's ranks are ended on any error.
func (m *peerMeasure) runOursOn(ctx context.Context, agents, n int, prog string, args []string) (peerRun, error) {
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	out := &peerOutput{}
	var errs bytes.Buffer
	hosts := make([]launch.Node, agents)
	for i := range hosts {
		hosts[i] = launch.Node{Name: m.s.nodes[i], Slots: (n + agents - 1) / agents}
	}
	app := launch.App{Path: prog, Args: args}
	if agents > 1 {
		// The agents are one machine: Open MPI's shared memory (vader)
		// names its segment files by the hostname, the job and the local
		// rank, so the ranks of local rank 0 on a1 and on a2 would share
		// one. Between agents, as between nodes, they use TCP.
		app.Env = map[string]string{"OMPI_MCA_btl": "self,tcp"}
	}
	start := time.Now()
	run, err := launch.Launch(ctx, launch.Config{SignIn: m.s.w.SignIn(m.s.nc.ConnectedUrl()), Stdout: out, Stderr: &errs,
		Jobs: []launch.JobSpec{{N: n, App: app, Hosts: hosts, Oversubscribe: true}}}) // as mpirun --oversubscribe: a spawn's children too
	if err != nil {
		return peerRun{}, err
	}
	res, err := run.Wait(ctx)
	took := time.Since(start)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d", res.ExitCode)
		if res.First != nil {
			err = fmt.Errorf("exit %d, first abnormal end %+v", res.ExitCode, *res.First)
		}
	}
	if err != nil {
		run.Terminate(true)
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_, _ = run.Wait(wctx)
		cancel()
		return peerRun{}, fmt.Errorf("bench peer: pmixbus run -n %d %s %s: %v\n%s", n, filepath.Base(prog), strings.Join(args, " "), err, firstLines(errs.String(), 20))
	}
	return out.run(took)
}

// firstLines is text's first n lines, and how many more there were.
func firstLines(text string, n int) string {
	lines := strings.SplitAfter(text, "\n")
	if len(lines) <= n+1 {
		return text
	}
	return strings.Join(lines[:n], "") + fmt.Sprintf("(%d more lines)\n", len(lines)-n-1)
}

// peerOutput collects a run's stdout: timed lines ("t <unix ns>") as
// delays at arrival, the rest as "<name> <ns>" values.
type peerOutput struct {
	latencies
	rest bytes.Buffer
}

func (o *peerOutput) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte("t ")) {
		return o.latencies.Write(p)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.rest.Write(p)
}

func (o *peerOutput) run(took time.Duration) (peerRun, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := peerRun{values: map[string]time.Duration{}, delays: o.d, took: took}
	for _, l := range strings.Split(strings.TrimSpace(o.rest.String()), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			r.values[f[0]] = time.Duration(v)
		}
	}
	if len(r.values) == 0 && len(r.delays) == 0 {
		return r, errors.New("bench peer: the run printed nothing measured:\n" + o.rest.String())
	}
	return r, nil
}

var _ io.Writer = (*peerOutput)(nil)
