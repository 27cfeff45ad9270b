package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/dvm"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

func init() {
	register(&command{
		name:    "dvm",
		summary: "start or stop agents on the hosts of a hostfile, for many runs (as prte)",
		run:     runDVM,
	})
}

const dvmDescription = `
"pmixbus dvm start" starts an agent on every host of --hostfile (or --host)
through a launch agent, as "pmixbus run --hostfile" does for one run, and
leaves them running, held by a background process of its own: "pmixbus run"
without --nats then runs through them (the DVM registers its NATS URL as
the local agents do, under its --cluster). "pmixbus dvm stop" stops the
agents and that process. docs/launch.md, "A DVM that starts itself".

    pmixbus dvm start --hostfile hosts
    pmixbus run -n 8 ./prog
    pmixbus dvm stop`

// dvmReady is what the background process prints once its agents are up.
const dvmReady = "DVM ready: "

func runDVM(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fs := newFlagSet("dvm", "start|stop [flags]", dvmDescription)
		dvmFlags(fs)
		fs.SetOutput(stdout)
		fs.Usage()
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	verb, rest := args[0], args[1:]
	fs := newFlagSet("dvm "+verb, "[flags]", dvmDescription)
	f := dvmFlags(fs)
	if code, done := parseFlags(fs, rest, stdout, stderr); done {
		return code
	}
	if code, done := noArgs(fs, stderr); done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "pmixbus dvm %s: "+format+"\n", append([]any{verb}, a...)...)
		return exitFail
	}
	c, err := cluster.ParseID(*f.cluster)
	if err != nil {
		return usageError(fs, stderr, "--cluster: %v", err)
	}
	switch verb {
	case "start":
		return dvmStart(ctx, fs, f, rest, stdout, stderr, fail)
	case "serve":
		return dvmServe(ctx, fs, f, c, stdout, stderr, fail)
	case "stop":
		return dvmStop(c, stdout, fail)
	}
	return usageError(fs, stderr, "unknown verb %q; want start or stop", verb)
}

type dvmFlagValues struct {
	hostfile, hosts, launchAgent, cluster, natsURL, nkey *string
}

func dvmFlags(fs *flag.FlagSet) *dvmFlagValues {
	defer addAliases(fs) // -H, --machinefile, as run's
	return &dvmFlagValues{
		hostfile:    fs.String("hostfile", "", "start an agent on each host of `file` (Open MPI's hostfile: \"name [slots=N]\" a line)"),
		hosts:       fs.String("host", "", "or on these `hosts`: node[:slots],…"),
		launchAgent: fs.String("launch-agent", "", "the `command` that runs a command on a host, {host} standing for it (default: "+dvm.DefaultLaunchAgent()+")"),
		cluster:     fs.String("cluster", "dvm", "the agents' `cluster`"),
		natsURL:     fs.String("nats", "", "connect the agents to this NATS `URL`; default: the agent of the first host embeds the server"),
		nkey:        fs.String("nkey", defaultKeyFile(security.RoleLauncher), "sign in with the NATS key in `file` to wait for the agents"),
	}
}

// dvmStart starts "pmixbus dvm serve" in the background, in a session of
// its own, and returns once it says its agents are up (or fails).
func dvmStart(ctx context.Context, fs *flag.FlagSet, f *dvmFlagValues, args []string, stdout, stderr io.Writer, fail func(string, ...any) int) int {
	if *f.hostfile == "" && *f.hosts == "" && os.Getenv("SLURM_JOB_ID") == "" {
		return usageError(fs, stderr, "give the hosts: --hostfile or --host (inside a Slurm allocation, its nodes are taken)")
	}
	if others, _ := localEndpoints(*f.cluster); len(others) > 0 {
		return fail("cluster %s already runs here: %s", *f.cluster, others[0])
	}
	exe, err := os.Executable()
	if err != nil {
		return fail("%v", err)
	}
	state, err := defaultStateDir()
	if err != nil {
		return fail("%v", err)
	}
	logFile := filepath.Join(state, "dvm-"+*f.cluster+".log")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return fail("%v", err)
	}
	log, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fail("%v", err)
	}
	defer log.Close()
	cmd := exec.Command(exe, append([]string{"dvm", "serve"}, args...)...)
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fail("%v", err)
	}
	if err := cmd.Start(); err != nil {
		return fail("%v", err)
	}
	go func() { _ = cmd.Wait() }() // reaped if it fails; it outlives us otherwise
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), dvmReady); ok {
			fmt.Fprintf(stdout, "pmixbus dvm %s: agents up, NATS %s, log %s\n", *f.cluster, u, logFile)
			return exitOK
		}
	}
	b, _ := os.ReadFile(logFile)
	return fail("the agents did not start (log %s):\n%s", logFile, strings.TrimSpace(string(b)))
}

// dvmServe starts the agents, registers the DVM and holds them until
// SIGINT or SIGTERM.
func dvmServe(ctx context.Context, fs *flag.FlagSet, f *dvmFlagValues, c cluster.ID, stdout, stderr io.Writer, fail func(string, ...any) int) int {
	rf := &runFlags{hostfile: f.hostfile, hosts: f.hosts}
	hosts, err := rf.placeHosts()
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if len(hosts) == 0 {
		if hosts, err = dvm.SlurmAllocation(ctx); err != nil {
			return fail("%v", pmix.MessageOf(err))
		}
		if len(hosts) == 0 {
			return usageError(fs, stderr, "give the hosts: --hostfile or --host")
		}
	}
	if *f.natsURL == "" {
		if err := ensureAgentKeys(); err != nil {
			return fail("%v", err)
		}
	}
	key, _, err := toolKey(*f.nkey, given(fs, "nkey"))
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	d, stop, err := startAgents(ctx, hosts, c, *f.natsURL, *f.launchAgent, key, given(fs, "nkey"), "dvm", stderr)
	if err != nil {
		return fail("%v", pmix.MessageOf(err))
	}
	defer stop()
	remove, err := registerLocal(localEndpoint{Kind: "dvm", Cluster: string(c), Name: string(c), URL: d.URL()})
	if err != nil {
		return fail("registering the DVM: %v", err)
	}
	defer remove()
	fmt.Fprintf(stdout, "%s%s\n", dvmReady, d.URL())
	if f, ok := stdout.(*os.File); ok {
		_ = f.Close() // dvm start stops reading here
	}
	<-ctx.Done()
	return exitOK
}

// dvmStop stops the DVM of cluster c that dvm start started here.
func dvmStop(c cluster.ID, stdout io.Writer, fail func(string, ...any) int) int {
	eps, dir := localEndpoints(string(c))
	for _, e := range eps {
		if e.Kind != "dvm" {
			continue
		}
		if err := syscall.Kill(e.Pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fail("%v", err)
		}
		deadline := time.Now().Add(dvmStopWait + 5*time.Second)
		for processAlive(e.Pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if processAlive(e.Pid) {
			return fail("the DVM (pid %d) did not stop within %v", e.Pid, dvmStopWait+5*time.Second)
		}
		fmt.Fprintf(stdout, "pmixbus dvm %s: stopped\n", c)
		return exitOK
	}
	return fail("no DVM of cluster %s runs here (none registered in %s)", c, dir)
}

// ensureAgentKeys makes the keys of the default keys directory: the agent
// of the first host will secure its server with them (the directory is
// shared with the hosts), and the launcher signs in with its own.
func ensureAgentKeys() error {
	dir, err := keysDir("")
	if err == nil {
		_, err = security.EnsureKeys(dir)
	}
	if err != nil {
		return fmt.Errorf("the keys for the agents: %w", err)
	}
	return nil
}

// startAgents starts the agents of a DVM on hosts (package dvm), for
// command name (run, dvm), and returns it with the function that stops
// them, within dvmStopWait: an agent that stops cleanly does in well
// under a second; one cut off from NATS cannot, and is killed then.
func startAgents(ctx context.Context, hosts []launch.Node, c cluster.ID, natsURL, launchAgent string, key nats.Option, explicitKey bool, name string, stderr io.Writer) (*dvm.DVM, func(), error) {
	d, err := dvm.Start(ctx, dvm.Config{Hosts: hosts, Cluster: c, NATS: natsURL, LaunchAgent: launchAgent,
		AgentArgs: []string{"--log-level", "warn"}, Stderr: stderr,
		Connect: func(url string) (*nats.Conn, error) {
			return connectTool(url, key, explicitKey, stderr, name, nats.Name("pmixbus "+name+" (dvm)"), nats.Timeout(5*time.Second),
				nats.CustomInboxPrefix(security.LauncherInboxPrefix))
		}})
	if err != nil {
		return nil, nil, err
	}
	return d, func() {
		sctx, cancel := context.WithTimeout(context.Background(), dvmStopWait)
		defer cancel()
		if err := d.Stop(sctx); err != nil {
			fmt.Fprintf(stderr, "pmixbus %s: stopping the agents: %v\n", name, err)
		}
	}, nil
}
