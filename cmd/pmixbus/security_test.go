package main

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

// TestSecuredCommands sets a hub and a cluster up as docs/security.md
// does: a hub server and an agent with its embedded server, linked over
// mutual TLS with certificates given by flags, every NATS user signed in
// with the keys the first server created. notify sends with the rm key,
// watch reads with the watch key; the watch key cannot send, and nothing
// signs in without a key.
func TestSecuredCommands(t *testing.T) {
	files := clustertest.LeafTLS(t)
	tlsFlags := []string{"--leaf-tls-cert", files.Cert, "--leaf-tls-key", files.Key, "--leaf-tls-ca", files.CA}
	hub := startServerCmd(t, append([]string{"--port", "-1", "--cluster", "hub", "--store", t.TempDir(), "--leaf-port", "-1",
		"--leaf-tls-verify", "--log-level", "off"}, tlsFlags...)...)
	dir := agenttest.SocketDir(t)
	a := startCmd(t, hasLine("NATS URL: "), append([]string{"agent", "--cluster", "A", "--node", "n1", "--port", "-1", "--store", t.TempDir(),
		"--leaf-remote", hub.url("leaf"), "--listen", "unix:" + dir + "/a.sock", "--log-level", "off",
		"--job", "j::0=n1", "--client", "j.0"}, tlsFlags...)...)
	urlA := a.line("NATS URL: ")

	for _, url := range []string{hub.url("client"), urlA} {
		clustertest.Refused(t, url)
	}

	c, err := client.Init(t.Context(), client.WithEnv(clientEnvs(t, a.stdout.String())["j.0"]))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Finalize(t.Context())
	ran := make(chan *bus.Call, 1)
	if _, err := c.RegisterEventHandler(t.Context(), []pmix.Status{pmix.EventNodeDown}, nil, func(call *bus.Call, done bus.Done) {
		ran <- call
		done(pmix.EventActionComplete, nil)
	}); err != nil {
		t.Fatal(err)
	}

	// The hub sees A's GLOBAL events once the link is up: watch there,
	// and send until one arrives.
	w := startCmd(t, subscribed, "watch", "--nats", hub.url("client"), "--count", "1", "--range", "global")
	clustertest.WaitFor(t, 20*time.Second, func() error {
		if code, stdout, stderr := runCmd(t, "notify", "--nats", urlA, "--cluster", "A", "--node", "n1",
			"--code", "EVENT_NODE_DOWN", "--range", "global"); code != 0 {
			t.Fatalf("notify: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
		select {
		case code := <-w.code:
			w.code <- code
			return nil
		case <-time.After(200 * time.Millisecond):
			return errors.New("watch on the hub saw nothing yet")
		}
	})
	if code := w.wait(t, false); code != 0 || !strings.Contains(w.stdout.String(), "pmix.evt.global.A.-231") {
		t.Fatalf("watch: exit %d\nstdout: %s\nstderr: %s", code, w.stdout, w.stderr)
	}
	select {
	case <-ran:
	case <-time.After(20 * time.Second):
		t.Fatal("the client's handler never ran")
	}

	// From the hub, which has no events stream of its own, a GLOBAL event
	// is sent as a cluster's RM, into that cluster's stream; naming a
	// cluster that has none is an error, not a silent loss.
	const hubCode = pmix.ExternalErrBase - 7
	fromHub := make(chan *bus.Call, 4)
	if _, err := c.RegisterEventHandler(t.Context(), []pmix.Status{hubCode}, nil, func(call *bus.Call, done bus.Done) {
		fromHub <- call
		done(pmix.EventActionComplete, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := runCmd(t, "notify", "--nats", hub.url("client"), "--cluster", "A", "--node", "tool",
		"--code", strconv.Itoa(int(hubCode)), "--range", "global"); code != 0 {
		t.Fatalf("notify from the hub as A: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	select {
	case <-fromHub:
	case <-time.After(20 * time.Second):
		t.Fatal("the event sent from the hub as A never ran the client's handler")
	}
	code, stdout, stderr := runCmd(t, "notify", "--nats", hub.url("client"), "--cluster", "hub", "--node", "tool",
		"--code", strconv.Itoa(int(hubCode)), "--range", "global", "--timeout", "5s")
	if code != exitFail || !strings.Contains(stderr, "no event cache stored") || !strings.Contains(stderr, "PMIXBUS_EVENTS_hub") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("notify from the hub naming no cluster with agents: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}

	watchKey := security.KeyFile(os.Getenv(security.EnvKeysDir), security.RoleWatch)
	code, stdout, stderr = runCmd(t, "notify", "--nats", urlA, "--cluster", "A", "--node", "n1", "--nkey", watchKey,
		"--code", "EVENT_NODE_DOWN", "--range", "global")
	if code != exitFail || !strings.Contains(stderr, "permissions violation") || !strings.Contains(stderr, watchKey) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("notify with the watch key: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	rmKey := security.KeyFile(os.Getenv(security.EnvKeysDir), security.RoleRM)
	code, _, stderr = runCmd(t, "watch", "--nats", urlA, "--nkey", rmKey)
	if code != exitFail || !strings.Contains(stderr, "permissions violation") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("watch with the rm key: exit %d, stderr %s", code, stderr)
	}
	code, _, stderr = runCmd(t, "watch", "--nats", urlA, "--nkey", dir+"/absent.nk")
	if code != exitUsage || !strings.Contains(stderr, "--nkey") {
		t.Errorf("watch with a missing key file: exit %d, stderr %s", code, stderr)
	}
}

// TestKeysCommand: "pmixbus keys" creates the keys in the directory it is
// given and prints each role's file and public key; --nats-conf prints
// the authorization block, without a secret.
func TestKeysCommand(t *testing.T) {
	dir := t.TempDir() + "/keys"
	code, stdout, stderr := runCmd(t, "keys", "--keys", dir)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	keys, err := security.LoadKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range security.Roles() {
		pub, err := keys.PublicKey(r)
		if err != nil {
			t.Fatal(err)
		}
		if want := security.KeyFile(dir, r) + " " + pub + "\n"; !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	code, conf, stderr := runCmd(t, "keys", "--keys", dir, "--nats-conf")
	if code != 0 || stderr != "" || !strings.Contains(conf, "authorization {") || strings.Contains(conf, `"SU`) {
		t.Fatalf("--nats-conf: exit %d, stderr %s\n%s", code, stderr, conf)
	}
}
