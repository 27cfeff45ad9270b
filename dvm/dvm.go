package dvm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/launch/liveness"
	"github.com/pmixbus/pmixbus/pmix"
)

// HostToken is replaced by the host's name in a launch agent template.
const HostToken = "{host}"

// Errors of Start.
var (
	// ErrAgentStart: an agent could not be started or exited before it
	// was up.
	ErrAgentStart = pmix.NewCodedError(pmix.ErrJobFailedToLaunch, "dvm.agent_start", "an agent did not start")
	// ErrNotReady: the agents were not all up within Config.Ready.
	ErrNotReady = pmix.NewCodedError(pmix.ErrTimeout, "dvm.not_ready", "the agents were not all up in time")
)

// Config configures a DVM.
type Config struct {
	// Hosts are the hosts to start an agent on, in order; Slots 0 lets
	// the agent count its CPUs. Required.
	Hosts []launch.Node
	// Cluster names the DVM's cluster. Required.
	Cluster cluster.ID
	// NATS is the URL of the cluster's NATS server; empty has the agent
	// of the first host embed one, listening on every interface.
	NATS string
	// LaunchAgent is the command, split at spaces, that runs a command
	// on a host, HostToken standing for the host: "ssh {host}", "ip netns
	// exec ns-{host}". Empty means DefaultLaunchAgent(). When its program
	// is ssh the agent's command line is quoted for the remote shell.
	LaunchAgent string
	// Program is pmixbus on the hosts. Empty means this executable.
	Program string
	// AgentArgs are more flags for every agent ("--log-level", "warn").
	AgentArgs []string
	// Connect connects to the DVM's NATS server (with the launcher's
	// key), to wait for the agents. Required.
	Connect func(url string) (*nats.Conn, error)
	// Stderr receives the agents' standard error, each line prefixed by
	// its host. Nil discards it.
	Stderr io.Writer
	// Ready bounds the wait for the agents. Zero means 60 s.
	Ready time.Duration
}

// SrunLaunchAgent is the launch agent inside a Slurm allocation: one task
// on the host, as a step of the allocation's job sharing its resources
// with the job's other steps (--overlap, Slurm 20.11 and later). The
// agent is no MPI task (--mpi=none: with MpiDefault=pmix Slurm would
// start a PMIx server for it whose PMIX_SERVER_URI* the ranks would
// inherit), is not bound to the one core a task gets (--cpu-bind=none:
// its ranks inherit its CPU mask), and gets this environment whatever a
// batch job's --export said (--export=ALL; SLURM_EXPORT_ENV=NONE would
// leave the agent without its keys and state directory). prterun's srun
// gives --mpi=none and --cpu-bind=none too. Checked against Slurm 22.05 by
// cmd/pmixbus's TestDVMUnderSlurm.
const SrunLaunchAgent = "srun --nodes=1 --ntasks=1 --overlap --mpi=none --cpu-bind=none --export=ALL --nodelist={host} --"

// DefaultLaunchAgent is SrunLaunchAgent when inside a Slurm allocation
// (SLURM_JOB_ID set), else ssh's.
func DefaultLaunchAgent() string {
	if os.Getenv("SLURM_JOB_ID") != "" {
		return SrunLaunchAgent
	}
	return "ssh -o BatchMode=yes {host}"
}

// DVM is a running set of agents that Start started.
type DVM struct {
	cfg    Config
	url    string
	agents []*agentProc // in host order; the first embeds NATS when cfg.NATS is empty
}

// agentProc is one agent's launch agent process.
type agentProc struct {
	host   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	done   chan struct{} // closed once it exited and its output was read
	urls   chan string   // the NATS URLs it printed (an embedding agent)
	mu     sync.Mutex
	tail   []string // its last stderr lines
	exited error
}

// Start starts an agent on every host and returns once they are all up.
//
// Errors: pmix.ErrBadParam for a bad config; ErrAgentStart naming the
// host and what its agent said; ErrNotReady; ctx.Err(). Whatever started
// is stopped then.
func Start(ctx context.Context, cfg Config) (*DVM, error) {
	if len(cfg.Hosts) == 0 || cfg.Connect == nil {
		return nil, pmix.Errorf(pmix.ErrBadParam, "dvm: no hosts, or no way to connect")
	}
	if err := cfg.Cluster.Validate(); err != nil {
		return nil, pmix.Errorf(pmix.ErrBadParam, "dvm: %v", err)
	}
	if cfg.LaunchAgent == "" {
		cfg.LaunchAgent = DefaultLaunchAgent()
	}
	if !strings.Contains(cfg.LaunchAgent, HostToken) {
		return nil, pmix.Errorf(pmix.ErrBadParam, "dvm: launch agent %s does not name the host (%s)", pmix.Quote(cfg.LaunchAgent), HostToken)
	}
	if cfg.Program == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, pmix.Errorf(pmix.ErrBadParam, "dvm: finding pmixbus: %v", err)
		}
		cfg.Program = exe
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	if cfg.Ready <= 0 {
		cfg.Ready = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Ready)
	defer cancel()
	d := &DVM{cfg: cfg, url: cfg.NATS}
	fail := func(err error) (*DVM, error) {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = d.Stop(sctx)
		return nil, err
	}
	hosts := cfg.Hosts
	if d.url == "" {
		a, err := d.start(hosts[0], "--nats-host", "0.0.0.0", "--port", "-1")
		if err != nil {
			return fail(err)
		}
		select {
		case d.url = <-a.urls:
		case <-a.done:
			return fail(a.failure("exited before its NATS server was up"))
		case <-ctx.Done():
			return fail(fmt.Errorf("%w: the agent of host %s did not print its NATS URLs within %v", ErrNotReady, a.host, cfg.Ready))
		}
		hosts = hosts[1:]
	}
	for _, h := range hosts {
		if _, err := d.start(h, "--nats", d.url); err != nil {
			return fail(err)
		}
	}
	if err := d.wait(ctx); err != nil {
		return fail(err)
	}
	return d, nil
}

// URL is the DVM's NATS server: a comma-separated list of its URLs, as
// nats.Connect takes it.
func (d *DVM) URL() string { return d.url }

// start starts host's agent with extra flags.
func (d *DVM) start(h launch.Node, extra ...string) (*agentProc, error) {
	args := []string{d.cfg.Program, "agent", "--cluster", string(d.cfg.Cluster), "--node", h.Name, "--stop-on-eof", "--liveness-interval", "500ms"}
	if h.Slots > 0 {
		args = append(args, "--slots", strconv.Itoa(h.Slots))
	}
	args = append(append(args, extra...), d.cfg.AgentArgs...)
	argv := launchArgv(d.cfg.LaunchAgent, h.Name, args)
	a := &agentProc{host: h.Name, cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{}), urls: make(chan string, 1)}
	stdout, err := a.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := a.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if a.stdin, err = a.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: host %s: %s: %v", ErrAgentStart, h.Name, argv[0], err)
	}
	d.agents = append(d.agents, a)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "NATS URLs: "); ok {
				select {
				case a.urls <- strings.TrimSpace(u):
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			a.mu.Lock()
			a.tail = append(a.tail, line)
			if len(a.tail) > 5 {
				a.tail = a.tail[1:]
			}
			a.mu.Unlock()
			fmt.Fprintf(d.cfg.Stderr, "[%s] %s\n", h.Name, line)
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		wg.Wait()
		err := a.cmd.Wait()
		a.mu.Lock()
		a.exited = err
		a.mu.Unlock()
		close(a.done)
	}()
	return a, nil
}

// failure is ErrAgentStart for an agent that ended early, with what it
// said last.
func (a *agentProc) failure(what string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	said := ""
	if len(a.tail) > 0 {
		said = ": " + strings.Join(a.tail, " / ")
	}
	return fmt.Errorf("%w: the agent of host %s %s (%v)%s", ErrAgentStart, a.host, what, a.exited, said)
}

// launchArgv is the launch agent's command line that runs args on host.
func launchArgv(template, host string, args []string) []string {
	var argv []string
	for _, f := range strings.Fields(template) {
		argv = append(argv, strings.ReplaceAll(f, HostToken, host))
	}
	if filepath.Base(argv[0]) == "ssh" {
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = ShellQuote(a)
		}
		return append(argv, strings.Join(quoted, " "))
	}
	return append(argv, args...)
}

// ShellQuote quotes s for a POSIX shell when it needs it.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// wait waits until every host's agent is up in the cluster's liveness
// bucket, or one of them exits.
func (d *DVM) wait(ctx context.Context) error {
	nc, err := d.cfg.Connect(d.url)
	if err != nil {
		return fmt.Errorf("%w: connecting to the DVM's NATS server %s: %v", ErrAgentStart, d.url, err)
	}
	defer nc.Close()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	missing := []string{"all"}
	var readErr error
	for {
		for _, a := range d.agents {
			select {
			case <-a.done:
				return a.failure("exited before it was up")
			default:
			}
		}
		entries, err := liveness.ReadAgents(ctx, nc, d.cfg.Cluster)
		readErr = err
		if err == nil {
			up := map[string]bool{}
			for _, e := range entries {
				up[e.Node] = e.State == liveness.Up
			}
			missing = missing[:0]
			for _, h := range d.cfg.Hosts {
				if !up[h.Name] {
					missing = append(missing, h.Name)
				}
			}
			if len(missing) == 0 && d.answering(ctx, nc) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if readErr != nil {
				return fmt.Errorf("%w: reading the agents' liveness bucket: %v", ErrNotReady, readErr)
			}
			return fmt.Errorf("%w: not up within %v: %s", ErrNotReady, d.cfg.Ready, strings.Join(missing, ", "))
		case <-t.C:
		}
	}
}

// answering reports whether every host's agent answers the launcher's
// control requests: its liveness key may be up before its launch
// service listens.
func (d *DVM) answering(ctx context.Context, nc *nats.Conn) bool {
	for _, h := range d.cfg.Hosts {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err := launch.Control(cctx, nc, d.cfg.Cluster, h.Name, launch.OpJobs, nil, &launch.JobsReply{})
		cancel()
		if err != nil {
			return false
		}
	}
	return true
}

// Stop stops the agents: the others first, the one embedding NATS last,
// each by closing its standard input (a clean stop: its ranks are ended,
// its liveness key deleted), then SIGKILL to the launch agent if it does
// not exit within ctx's time. It is safe to call twice.
//
// Errors: ctx.Err() when a launch agent had to be killed.
func (d *DVM) Stop(ctx context.Context) error {
	agents := slices.Clone(d.agents)
	if d.cfg.NATS == "" && len(agents) > 1 {
		agents = append(agents[1:], agents[0]) // NATS last
	}
	var errs []error
	stop := func(group []*agentProc) {
		for _, a := range group {
			_ = a.stdin.Close()
		}
		for _, a := range group {
			select {
			case <-a.done:
				continue
			case <-ctx.Done():
			}
			// Asked to stop and did not (cut off from NATS, its clean
			// stop cannot finish): its ranks die with it (PDEATHSIG).
			_ = a.cmd.Process.Kill()
			<-a.done
			errs = append(errs, fmt.Errorf("the agent of host %s did not stop in time and was killed: %w", a.host, ctx.Err()))
		}
	}
	if d.cfg.NATS == "" && len(agents) > 1 {
		stop(agents[:len(agents)-1])
		stop(agents[len(agents)-1:])
	} else {
		stop(agents)
	}
	return errors.Join(errs...)
}
