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
)

// netHosts are hosts made of network namespaces on this machine, each
// with an address on a bridge the test's own namespace is on too.
type netHosts struct {
	tag    string // prefix of every name the test creates
	subnet string // "10.213.N."
}

// newNetHosts makes n hosts h1…hn (namespaces <tag>-h1…) and removes them
// when the test ends, failed or not: their processes killed, the
// namespaces, links and bridge deleted. It skips the test, saying why,
// where network namespaces are not permitted.
func newNetHosts(t *testing.T, n int) *netHosts {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command: network namespaces cannot be made here")
	}
	pid := os.Getpid()
	h := &netHosts{tag: fmt.Sprintf("pmx%d", pid%100000), subnet: fmt.Sprintf("10.213.%d.", pid%250+1)}
	ip := func(args ...string) error {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	br := h.tag + "br"
	t.Cleanup(func() {
		for i := 1; i <= n; i++ {
			ns := h.ns(fmt.Sprintf("h%d", i))
			if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
				for _, p := range strings.Fields(string(out)) {
					_ = exec.Command("kill", "-9", p).Run()
				}
			}
			_ = ip("netns", "del", ns)
			_ = ip("link", "del", h.veth(i))
		}
		_ = ip("link", "del", br)
	})
	if err := ip("link", "add", br, "type", "bridge"); err != nil {
		t.Skipf("network namespaces are not permitted here (making a bridge): %v", err)
	}
	steps := [][]string{{"addr", "add", h.subnet + "254/24", "dev", br}, {"link", "set", br, "up"}}
	for i := 1; i <= n; i++ {
		ns, veth, peer := h.ns(fmt.Sprintf("h%d", i)), h.veth(i), h.veth(i)+"p"
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"link", "add", veth, "type", "veth", "peer", "name", peer},
			[]string{"link", "set", peer, "netns", ns},
			[]string{"link", "set", veth, "master", br},
			[]string{"link", "set", veth, "up"},
			[]string{"netns", "exec", ns, "ip", "addr", "add", fmt.Sprintf("%s%d/24", h.subnet, i), "dev", peer},
			[]string{"netns", "exec", ns, "ip", "link", "set", peer, "up"},
			[]string{"netns", "exec", ns, "ip", "link", "set", "lo", "up"})
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			t.Skipf("network namespaces are not permitted here: %v", err)
		}
	}
	return h
}

func (h *netHosts) ns(host string) string { return h.tag + "-" + host }
func (h *netHosts) veth(i int) string     { return fmt.Sprintf("%sv%d", h.tag, i) }

// template is the launch agent that enters a host's namespace.
func (h *netHosts) template() string { return "ip netns exec " + h.tag + "-{host}" }

// pids lists the processes left in host's namespace.
func (h *netHosts) pids(host string) string {
	out, _ := exec.Command("ip", "netns", "pids", h.ns(host)).Output()
	return strings.TrimSpace(string(out))
}

// TestDVMAcrossNetns: pmixbus run --hostfile starts the agents of three
// hosts (network namespaces) through a launch agent that enters them, the
// first embedding NATS; runs a job across them; stops them, leaving
// nothing. Then a host cut off mid-job is reported as lost (exit 68).
func TestDVMAcrossNetns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three agents in network namespaces")
	}
	hosts := newNetHosts(t, 3)
	state := t.TempDir()
	hostfile := filepath.Join(state, "hosts")
	if err := os.WriteFile(hostfile, []byte("h1 slots=2\nh2 slots=2\nh3 slots=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dvmArgs := []string{"run", "--hostfile", hostfile, "--launch-agent", hosts.template(), "--cluster", "D" + hosts.tag}
	where := "echo rank $PMIX_RANK at $(ip -o -4 addr show scope global | awk '{print $4}')"
	run := startPmixbus(t, state, append(dvmArgs, "--map-by", "node", "-n", "3", "/bin/sh", "-c", where)...)
	if code := run.exit(t, 60*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, run.stdout, run.stderr)
	}
	for r := 0; r < 3; r++ {
		if want := fmt.Sprintf("rank %d at %s%d/24\n", r, hosts.subnet, r+1); !strings.Contains(run.stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, run.stdout)
		}
	}
	hosts.waitEmpty(t)

	// A host cut off mid-job (its link down: no connection is closed, the
	// agent just stops answering).
	run = startPmixbus(t, state, append(append(dvmArgs, "--map-by", "node", "-n", "3"), sleepers...)...)
	run.count(t, "started", 3)
	if out, err := exec.Command("ip", "link", "set", hosts.veth(3), "down").CombinedOutput(); err != nil {
		t.Fatalf("cutting h3 off: %v: %s", err, out)
	}
	cut := time.Now()
	clustertest.WaitFor(t, 30*time.Second, func() error {
		if !strings.Contains(run.stderr.String(), "node h3 of cluster") {
			return fmt.Errorf("no report of the host yet: %s", run.stderr)
		}
		return nil
	})
	reported := time.Since(cut)
	code := run.exit(t, 60*time.Second)
	t.Logf("host cut off: reported %v later, run ended %v later (stopping the agents)", reported.Round(100*time.Millisecond), time.Since(cut).Round(100*time.Millisecond))
	if code != exitNodeLost || !strings.Contains(run.stderr.String(), "on node h3 went down with its node") {
		t.Fatalf("exit %d:\n%s", code, run.stderr)
	}
	hosts.waitEmpty(t)

	// A DVM that stays: dvm start on the two hosts still linked, two runs
	// through it (found by its registration), dvm stop.
	c := "P" + hosts.tag
	t.Cleanup(func() { startPmixbus(t, state, "dvm", "stop", "--cluster", c).exit(t, 30*time.Second) })
	start := startPmixbus(t, state, "dvm", "start", "-H", "h1:2,h2:2", "--launch-agent", hosts.template(), "--cluster", c)
	if code := start.exit(t, 60*time.Second); code != 0 || !strings.Contains(start.stdout.String(), "agents up") {
		t.Fatalf("dvm start: exit %d\n%s%s", code, start.stdout, start.stderr)
	}
	for i := 0; i < 2; i++ {
		run := startPmixbus(t, state, "run", "--cluster", c, "--map-by", "node", "-n", "4", "/bin/sh", "-c", where)
		if code := run.exit(t, 30*time.Second); code != 0 || strings.Count(run.stdout.String(), "rank ") != 4 || !strings.Contains(run.stdout.String(), "rank 3 at "+hosts.subnet+"2/24") {
			t.Fatalf("run %d through the DVM: exit %d\n%s%s", i, code, run.stdout, run.stderr)
		}
	}
	stop := startPmixbus(t, state, "dvm", "stop", "--cluster", c)
	if code := stop.exit(t, 30*time.Second); code != 0 {
		t.Fatalf("dvm stop: exit %d\n%s%s", code, stop.stdout, stop.stderr)
	}
	hosts.waitEmpty(t)
}

// waitEmpty waits until no process is left in the hosts' namespaces.
func (h *netHosts) waitEmpty(t *testing.T) {
	t.Helper()
	clustertest.WaitFor(t, 20*time.Second, func() error {
		for _, host := range []string{"h1", "h2", "h3"} {
			if p := h.pids(host); p != "" {
				return fmt.Errorf("processes left on host %s: %s", host, p)
			}
		}
		return nil
	})
}
