package main

import (
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
)

// TestPublishLookupCommands publishes, looks up and unpublishes with the
// commands, as two clients of an agent started by "pmixbus agent" in a
// cluster linked to a hub (where GLOBAL data lives).
func TestPublishLookupCommands(t *testing.T) {
	mc := clustertest.StartMultiCluster(t, cluster.ClusterSpec{ID: "A", Servers: 1})
	a := startCmd(t, hasLine("listen: "), "agent", "--cluster", "A", "--node", "n1", "--nats", mc.Cluster("A").URL(),
		"--listen", "tcp:127.0.0.1:0", "--log-level", "off", "--job", "sim:s1:0-1=n1", "--client", "sim.0", "--client", "sim.1")
	envs := clientEnvs(t, a.stdout.String())
	as := func(proc string, args ...string) (int, string, string) {
		t.Helper()
		for k, v := range envs[proc] {
			t.Setenv(k, v)
		}
		return runCmd(t, args...)
	}
	expect := func(code int, stdout, stderr string, wantCode int, want string) {
		t.Helper()
		if code != wantCode || !strings.Contains(stdout+stderr, want) {
			t.Fatalf("exit %d (want %d), want %q in\nstdout: %s\nstderr: %s", code, wantCode, want, stdout, stderr)
		}
		// What a user reads: no package prefixes, a status named once.
		for _, internal := range []string{"publishlookup: ", "jetstream: ", "bus: ", "agent: "} {
			if strings.Contains(stderr, internal) {
				t.Errorf("stderr %q has the package prefix %q", stderr, internal)
			}
		}
		if strings.Count(stderr, "(PMIX_") > 1 {
			t.Errorf("stderr %q names a status twice", stderr)
		}
	}
	code, out, errOut := as("sim.0", "publish", "--range", "namespace", "--persistence", "indef", "port=tcp://n1:7000", "size:int32=4")
	expect(code, out, errOut, 0, "published port as sim.0")
	code, out, errOut = as("sim.1", "lookup", "port", "size")
	expect(code, out, errOut, 0, "port=tcp://n1:7000 (published by sim.0)\nsize=4 (published by sim.0)\n")
	code, out, errOut = as("sim.1", "lookup", "--json", "size")
	expect(code, out, errOut, 0, `{"key":"size","proc":"sim.0","type":"int32","value":4}`)
	code, out, errOut = as("sim.1", "publish", "--range", "namespace", "port=other")
	expect(code, out, errOut, 1, "PMIX_ERR_DUPLICATE_KEY")
	code, out, errOut = as("sim.1", "lookup", "port", "absent")
	expect(code, out, errOut, 1, "PMIX_ERR_PARTIAL_SUCCESS")
	code, out, errOut = as("sim.0", "publish", "--range", "global", "rendezvous=A:sim")
	expect(code, out, errOut, 0, "published rendezvous")
	code, out, errOut = as("sim.1", "lookup", "--range", "global", "--wait", "1", "rendezvous")
	expect(code, out, errOut, 0, "rendezvous=A:sim (published by sim.0)")
	code, out, errOut = as("sim.1", "lookup", "--wait", "all", "--timeout", "1s", "absent")
	expect(code, out, errOut, 1, "PMIX_ERR_TIMEOUT")
	code, out, errOut = as("sim.1", "unpublish", "port")
	expect(code, out, errOut, 1, "PMIX_ERR_NO_PERMISSIONS")
	code, out, errOut = as("sim.0", "unpublish")
	expect(code, out, errOut, 0, "unpublished everything sim.0 published")
	code, out, errOut = as("sim.1", "lookup", "port")
	expect(code, out, errOut, 1, "PMIX_ERR_NOT_FOUND")

	code, out, errOut = as("sim.0", "publish", strings.Repeat("k", 3000)+"=v")
	expect(code, out, errOut, 1, "key too long: 3000 bytes, at most 511")
	if len(errOut) > 300 {
		t.Errorf("%d bytes of error for a long key: %.100q…", len(errOut), errOut)
	}

	code, out, errOut = runCmd(t, "publish")
	expect(code, out, errOut, 2, "nothing to publish")
	code, out, errOut = runCmd(t, "lookup", "--wait", "some", "k")
	expect(code, out, errOut, 2, "--wait")
	if code := a.wait(t, true); code != 0 {
		t.Fatalf("agent exit %d: %s", code, a.stderr)
	}
}

// TestPublishGlobalAsHelpSays sets two clusters up as "pmixbus server -h"
// and "pmixbus agent -h" describe — cluster A's server is the hub, no
// server is named "hub" — and rendezvous at GLOBAL range, as in
// "pmixbus publish -h". A key published nowhere, or unpublished already, is
// PMIX_ERR_NOT_FOUND.
func TestPublishGlobalAsHelpSays(t *testing.T) {
	hub := startServerCmd(t, "--port", "-1", "--cluster", "A", "--store", t.TempDir(), "--leaf-port", "-1", "--log-level", "off")
	leaf := startServerCmd(t, "--port", "-1", "--cluster", "B", "--store", t.TempDir(), "--leaf-remote", hub.url("leaf"), "--log-level", "off")
	envs := map[string]map[string]string{}
	for _, s := range []struct{ cluster, url string }{{"A", hub.url("client")}, {"B", leaf.url("client")}} {
		job := "job" + s.cluster
		a := startCmd(t, hasLine("listen: "), "agent", "--cluster", s.cluster, "--node", "n1", "--nats", s.url,
			"--listen", "tcp:127.0.0.1:0", "--log-level", "off", "--job", job+":0=n1", "--client", job+".0")
		envs[s.cluster] = clientEnvs(t, a.stdout.String())[job+".0"]
	}
	as := func(cluster string, wantCode int, want string, args ...string) {
		t.Helper()
		for k, v := range envs[cluster] {
			t.Setenv(k, v)
		}
		code, stdout, stderr := runCmd(t, args...)
		if code != wantCode || !strings.Contains(stdout+stderr, want) {
			t.Fatalf("%v in %s: exit %d (want %d), want %q in\nstdout: %s\nstderr: %s", args, cluster, code, wantCode, want, stdout, stderr)
		}
	}
	as("B", 0, "published myrendezvouskey as jobB.0", "publish", "--range", "global", "myrendezvouskey=B:jobB")
	as("A", 0, "myrendezvouskey=B:jobB (published by B:jobB.0)", "lookup", "myrendezvouskey")
	as("A", 1, `PMIX_ERR_NOT_FOUND`, "lookup", "--range", "global", "absent")
	as("A", 1, `"absent"`, "lookup", "myrendezvouskey", "absent")
	as("B", 0, "unpublished myrendezvouskey", "unpublish", "myrendezvouskey")
	as("B", 1, "PMIX_ERR_NOT_FOUND", "unpublish", "myrendezvouskey")
}
