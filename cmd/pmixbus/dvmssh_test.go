package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/security"
)

// sshHosts runs an OpenSSH server in each of hosts' namespaces, and
// returns the launch agent template that reaches them through ssh for
// real: a client configuration naming each host by its address, a key of
// the test's own, no known_hosts. The servers stop when the test ends.
// It skips, saying so, where OpenSSH's server is not installed or the
// test does not run as root (sshd wants its privilege separation
// directory and a root-owned configuration).
func sshHosts(t *testing.T, hosts *netHosts, names []string) (template string, sshdPids map[string]int) {
	t.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/sshd"); serr != nil {
			t.Skip("no sshd (Debian: openssh-server): ssh is not exercised")
		}
		sshd = "/usr/sbin/sshd"
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client (Debian: openssh-client)")
	}
	if os.Geteuid() != 0 {
		t.Skip("sshd needs root here (its privilege separation directory)")
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Skipf("sshd's privilege separation directory: %v", err)
	}
	dir := t.TempDir()
	keygen := func(name string) string {
		p := filepath.Join(dir, name)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", p).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
		return p
	}
	hostKey, userKey := keygen("host_key"), keygen("user_key")
	pub, err := os.ReadFile(userKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	auth := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(auth, pub, 0o600); err != nil {
		t.Fatal(err)
	}
	var client strings.Builder
	sshdPids = map[string]int{}
	for i, h := range names {
		cfg := filepath.Join(dir, "sshd_config_"+h)
		conf := fmt.Sprintf("ListenAddress %s%d\nHostKey %s\nAuthorizedKeysFile %s\nStrictModes no\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nPidFile %s\n",
			hosts.subnet, i+1, hostKey, auth, filepath.Join(dir, "sshd_"+h+".pid"))
		if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("ip", "netns", "exec", hosts.ns(h), sshd, "-D", "-e", "-f", cfg)
		var log clustertest.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatalf("sshd on %s: %v", h, err)
		}
		sshdPids[h] = cmd.Process.Pid
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("sshd on %s:\n%s", h, log.String())
			}
		})
		fmt.Fprintf(&client, "Host %s\n  HostName %s%d\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n  BatchMode yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n",
			h, hosts.subnet, i+1, userKey)
	}
	clientCfg := filepath.Join(dir, "ssh_config")
	if err := os.WriteFile(clientCfg, []byte(client.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, h := range names {
		clustertest.WaitFor(t, 20*time.Second, func() error {
			if out, err := exec.Command("ssh", "-F", clientCfg, h, "true").CombinedOutput(); err != nil {
				return fmt.Errorf("ssh to %s: %v: %s", h, err, out)
			}
			return nil
		})
	}
	return "ssh -F " + clientCfg + " {host}", sshdPids
}

// TestDVMOverSSH: pmixbus run --hostfile starts the agents of two hosts
// (network namespaces, each with its own OpenSSH server) through ssh
// itself, the default launch agent's program, as prterun starts its
// daemons: the agent's command line quoted for the remote shell, its
// standard input held open through ssh and closed to stop it. A job
// across both hosts runs, and nothing is left on them afterwards but their
// ssh servers. The remote login shell starts with a clean environment, so
// the launch agent passes what the test binary needs to act as pmixbus
// (env …), as a site would pass PATH or a module load.
func TestDVMOverSSH(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two ssh servers and two agents in network namespaces")
	}
	hosts := newNetHosts(t, 2)
	names := []string{"h1", "h2"}
	template, sshd := sshHosts(t, hosts, names)
	state := t.TempDir()
	template += fmt.Sprintf(" env %s=1 XDG_STATE_HOME=%s %s=%s", asPmixbusEnv, state, security.EnvKeysDir, os.Getenv(security.EnvKeysDir))
	hostfile := filepath.Join(state, "hosts")
	if err := os.WriteFile(hostfile, []byte("h1 slots=2\nh2 slots=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	where := "echo rank $PMIX_RANK at $(ip -o -4 addr show scope global | awk '{print $4}')"
	run := startPmixbus(t, state, "run", "--hostfile", hostfile, "--launch-agent", template, "--cluster", "S"+hosts.tag,
		"--map-by", "node", "-n", "2", "/bin/sh", "-c", where)
	if code := run.exit(t, 90*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, run.stdout, run.stderr)
	}
	for r := range 2 {
		if want := fmt.Sprintf("rank %d at %s%d/24\n", r, hosts.subnet, r+1); !strings.Contains(run.stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, run.stdout)
		}
	}
	// Left on the hosts: their ssh servers only (the agents, the ranks
	// and the sessions' shells are gone).
	clustertest.WaitFor(t, 20*time.Second, func() error {
		for _, h := range names {
			for _, p := range strings.Fields(hosts.pids(h)) {
				if p != fmt.Sprint(sshd[h]) { // ip netns exec became sshd, in place
					return fmt.Errorf("left on host %s: pid %s (%s)", h, p, cmdline(p))
				}
			}
		}
		return nil
	})
}

// cmdline is a process's command line, for messages.
func cmdline(pid string) string {
	b, _ := os.ReadFile("/proc/" + pid + "/cmdline")
	return strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
}
