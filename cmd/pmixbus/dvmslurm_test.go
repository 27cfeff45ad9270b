package main

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
)

// slurm is a private Slurm the test started: its own MUNGE daemon and
// key, a slurmctld on this machine and a slurmd in each of the hosts'
// network namespaces.
type slurm struct {
	dir  string   // its configuration, state and logs
	env  []string // the environment its commands need (SLURM_CONF)
	logs map[string]*clustertest.Buffer
}

// slurmPrograms are what newSlurm needs installed (Debian: slurm-wlm
// munge).
var slurmPrograms = []string{"munged", "slurmctld", "slurmd", "slurmstepd", "salloc", "srun", "sinfo", "squeue"}

// skipWithoutSlurm skips the test, saying so, where Slurm's daemons and
// commands are not installed or the test is not root (slurmd runs its
// steps as their user, and here as root in network namespaces).
func skipWithoutSlurm(t *testing.T) {
	t.Helper()
	for _, p := range slurmPrograms {
		if _, err := exec.LookPath(p); err != nil {
			if _, serr := os.Stat("/usr/sbin/" + p); serr != nil {
				t.Skipf("no %s (Debian: slurm-wlm munge): srun is not exercised", p)
			}
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("a private Slurm needs root here (slurmd, network namespaces)")
	}
}

// newSlurm starts a Slurm of the test's own whose nodes are names, one
// slurmd in each host's namespace (slurmd -N, NodeAddr its address
// there: every node has its own address and ports, as machines do, with
// no need of Slurm's multiple-slurmd build, and a rank's address tells
// its node). The controller listens on the
// hosts' bridge in this namespace. Its site settings are common ones that
// matter to a launcher: cores bound to tasks (task/affinity,
// TaskPluginParam=Cores) and PMIx for MPI (MpiDefault=pmix, where
// OpenPMIx's library is installed for Slurm to load). Everything
// lives in a temporary directory: the MUNGE key and socket, the state,
// the spool and the logs; nothing is read from /etc. It returns once every
// node is idle, and stops the daemons when the test ends.
func newSlurm(t *testing.T, hosts *netHosts, names []string) *slurm {
	t.Helper()
	dir := t.TempDir()
	// munged wants every directory above its socket searchable by all.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := &slurm{dir: dir, logs: map[string]*clustertest.Buffer{}}
	start := func(name string, argv ...string) {
		cmd := exec.Command(argv[0], argv[1:]...)
		log := &clustertest.Buffer{}
		s.logs[name] = log
		cmd.Stdout, cmd.Stderr = log, log
		cmd.Env = s.env
		// A test killed before its cleanup leaves no daemon behind.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			if t.Failed() {
				t.Logf("%s:\n%s", name, log)
			}
		})
	}
	key := filepath.Join(dir, "munge.key")
	secret := make([]byte, 1024)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "munge.socket")
	s.env = append(withoutSlurmEnv(os.Environ()), "SLURM_CONF="+filepath.Join(dir, "slurm.conf"))
	start("munged", "munged", "-F", "--key-file="+key, "--socket="+sock, "--pid-file="+filepath.Join(dir, "munged.pid"),
		"--seed-file="+filepath.Join(dir, "munged.seed"), "--log-file="+filepath.Join(dir, "munged.log"))
	clustertest.WaitFor(t, 10*time.Second, func() error {
		_, err := os.Stat(sock)
		return err
	})

	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	ctldPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".") // slurmctld knows itself by this name
	// Slurm's mpi/pmix opens OpenPMIx's libpmix.so (Debian: libpmix-dev)
	// when a step starts; without it a site cannot have MpiDefault=pmix.
	mpi := "pmix"
	if found, _ := filepath.Glob("/usr/lib/*/pmix2/lib/libpmix.so"); len(found) == 0 {
		mpi = "none"
		t.Log("no OpenPMIx library for Slurm's mpi/pmix (Debian: libpmix-dev): MpiDefault=none, Slurm's PMIx server is not exercised")
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, `ClusterName=%s
SlurmctldHost=%s(%s254)
SlurmctldPort=%d
SlurmdPort=6818
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=%s
CredType=cred/munge
StateSaveLocation=%s/state
SlurmdSpoolDir=%s/spool-%%n
SlurmctldPidFile=%s/slurmctld.pid
SlurmdPidFile=%s/slurmd-%%n.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
TaskPluginParam=Cores
MpiDefault=%s
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
`, strings.ToLower(hosts.tag), host, hosts.subnet, ctldPort, sock, dir, dir, dir, dir, mpi)
	for i, h := range names {
		fmt.Fprintf(&conf, "NodeName=%s NodeAddr=%s%d CPUs=%d State=UNKNOWN\n", h, hosts.subnet, i+1, runtime.NumCPU())
	}
	fmt.Fprintf(&conf, "PartitionName=test Nodes=%s Default=YES MaxTime=INFINITE State=UP\n", strings.Join(names, ","))
	// Slurm 22.05's slurmd loads a cgroup plugin whatever the other
	// plugins: v1 asks nothing of the machine (a namespace's /sys has no
	// cgroup file system); autodetection would fail there.
	for name, text := range map[string]string{"slurm.conf": conf.String(), "cgroup.conf": "CgroupPlugin=cgroup/v1\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range append([]string{"state"}, names...) {
		if d != "state" {
			d = "spool-" + d
		}
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	start("slurmctld", "slurmctld", "-D")
	for _, h := range names {
		start("slurmd "+h, "ip", "netns", "exec", hosts.ns(h), "slurmd", "-D", "-N", h)
	}
	clustertest.WaitFor(t, 30*time.Second, func() error {
		out, err := s.command("sinfo", "-h", "-N", "-o", "%N %t").CombinedOutput()
		if err != nil {
			return fmt.Errorf("sinfo: %v: %s", err, out)
		}
		if idle := strings.Count(string(out), " idle\n"); idle != len(names) {
			return fmt.Errorf("%d of %d nodes idle:\n%s", idle, len(names), out)
		}
		return nil
	})
	return s
}

// command is a Slurm command run against this Slurm.
func (s *slurm) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = s.env
	return cmd
}

// withoutSlurmEnv is env without Slurm's variables: the test may itself
// run inside a Slurm job, not the one it starts.
func withoutSlurmEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "SLURM_") {
			out = append(out, kv)
		}
	}
	return out
}

// TestDVMUnderSlurm: inside a Slurm allocation of two nodes (a private
// Slurm: munged, slurmctld, a slurmd in each of two network namespaces),
// pmixbus run, given no hosts, starts its agents on the allocation's
// nodes through srun, its default launch agent there, runs a job across
// the nodes and stops them; then
// dvm start, a run through it and dvm stop, in the same allocation. The
// ranks run on the allocated nodes, as steps of the allocation's job; a
// site's core binding does not confine them to the one core srun's single
// task would get; Slurm's own PMIx server (MpiDefault=pmix) is not what
// they see; a batch job's --export=NONE (SLURM_EXPORT_ENV) does not strip
// the agents' environment. Nothing is left afterwards: no step, no job,
// no process on the nodes but their slurmd.
func TestDVMUnderSlurm(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Slurm of its own, with two nodes in network namespaces")
	}
	skipWithoutSlurm(t)
	hosts := newNetHosts(t, 2)
	names := []string{"h1", "h2"}
	s := newSlurm(t, hosts, names)
	state := t.TempDir()
	hostfile := filepath.Join(state, "hosts")
	if err := os.WriteFile(hostfile, []byte("h1 slots=1\nh2 slots=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	allowed := regexp.MustCompile(`Cpus_allowed_list:\s*(\S+)`).FindSubmatch(self)[1]
	where := fmt.Sprintf(`echo rank $PMIX_RANK on $SLURMD_NODENAME at $(ip -o -4 addr show scope global | awk '{print $4}') job $SLURM_JOB_ID cpus $(awk '/Cpus_allowed_list/ {print $2}' /proc/self/status) slurm-pmix $(env | grep -c -e %s/spool- -e slurm.pmix)`, s.dir)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a, b := "U"+hosts.tag, "V"+hosts.tag
	script := `set -e
"$0" run --cluster "$2" --map-by node -n 2 /bin/sh -c "$4"
"$0" dvm start --hostfile "$1" --cluster "$3"
"$0" run --cluster "$3" --map-by node -n 2 /bin/sh -c "$4"
"$0" dvm stop --cluster "$3"`
	alloc := s.command("salloc", "-N2", "--exclusive", "-J", "pmixbus-test", "/bin/sh", "-c", script, exe, hostfile, a, b, where)
	// SLURM_EXPORT_ENV=NONE is what a batch job submitted with
	// --export=NONE hands its sruns.
	alloc.Env = append(alloc.Env, asPmixbusEnv+"=1", "XDG_STATE_HOME="+state, "SLURM_EXPORT_ENV=NONE")
	var out, errOut clustertest.Buffer
	alloc.Stdout, alloc.Stderr = &out, &errOut
	if err := alloc.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- alloc.Wait() }()
	t.Cleanup(func() {
		_ = alloc.Process.Kill()
		<-done
	})
	select {
	case err = <-done:
		done <- err
	case <-time.After(120 * time.Second):
		t.Fatalf("salloc still running after 120 s:\n%s\n%s", &out, &errOut)
	}
	if err != nil {
		t.Fatalf("salloc: %v:\n%s\n%s", err, &out, &errOut)
	}
	m := regexp.MustCompile(`Granted job allocation (\d+)`).FindStringSubmatch(errOut.String())
	if m == nil {
		t.Fatalf("salloc granted no allocation:\n%s", &errOut)
	}
	for r := range 2 {
		want := fmt.Sprintf("rank %d on h%d at %s%d/24 job %s cpus %s slurm-pmix 0\n", r, r+1, hosts.subnet, r+1, m[1], allowed)
		if n := strings.Count(out.String(), want); n != 2 {
			t.Errorf("stdout has %q %d times, want 2 (run on the allocation, then through dvm start):\n%s\n%s", want, n, &out, &errOut)
		}
	}
	// Left: no job, no step, and on the nodes only their slurmd.
	clustertest.WaitFor(t, 30*time.Second, func() error {
		if out, err := s.command("squeue", "-h", "-s").CombinedOutput(); err != nil || len(out) > 0 {
			return fmt.Errorf("squeue -s: %v: %s", err, out)
		}
		if out, err := s.command("squeue", "-h").CombinedOutput(); err != nil || len(out) > 0 {
			return fmt.Errorf("squeue: %v: %s", err, out)
		}
		for _, h := range names {
			for _, p := range strings.Fields(hosts.pids(h)) {
				if c := cmdline(p); !strings.HasPrefix(c, "slurmd ") {
					return fmt.Errorf("left on node %s: pid %s (%s)", h, p, c)
				}
			}
		}
		return nil
	})
	if pids := processesNaming(a, b); len(pids) > 0 {
		t.Errorf("left here: %s", strings.Join(pids, "; "))
	}
}

// processesNaming lists the processes whose command line holds one of
// words, with their command lines.
func processesNaming(words ...string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		if _, err := fmt.Sscan(e.Name(), new(int)); err != nil || e.Name() == fmt.Sprint(os.Getpid()) {
			continue
		}
		c := cmdline(e.Name())
		for _, w := range words {
			if strings.Contains(c, w) {
				found = append(found, e.Name()+" "+c)
				break
			}
		}
	}
	return found
}
