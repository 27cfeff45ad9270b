package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/security"
)

// runningServer is a "pmixbus server" run in-process by startServerCmd.
type runningServer struct {
	stdout, stderr *clustertest.Buffer
	stop           context.CancelFunc
	code           chan int
}

// startServerCmd runs "pmixbus server args..." until the test ends (or stop
// is called) and waits until it prints its client URL.
func startServerCmd(t *testing.T, args ...string) *runningServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningServer{stdout: &clustertest.Buffer{}, stderr: &clustertest.Buffer{}, stop: cancel, code: make(chan int, 1)}
	go func() { r.code <- run(ctx, append([]string{"server"}, args...), r.stdout, r.stderr) }()
	t.Cleanup(func() {
		cancel()
		<-r.code
	})
	clustertest.WaitFor(t, 30*time.Second, func() error {
		select {
		case code := <-r.code:
			r.code <- code
			t.Fatalf("server exited with %d:\n%s", code, r.stderr.String())
		default:
		}
		if r.url("client") == "" {
			return fmt.Errorf("no client URL printed yet; stdout: %q", r.stdout.String())
		}
		return nil
	})
	return r
}

// url returns the "<what> URL: " line's URL printed on stdout, or "".
func (r *runningServer) url(what string) string { return r.line(what + " URL: ") }

// line returns the rest of the first stdout line starting with prefix, or
// "".
func (r *runningServer) line(prefix string) string {
	sc := bufio.NewScanner(strings.NewReader(r.stdout.String()))
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return u
		}
	}
	return ""
}

// wait stops the server and returns its exit code.
func (r *runningServer) wait(t *testing.T) int {
	t.Helper()
	r.stop()
	select {
	case code := <-r.code:
		r.code <- code // for the cleanup
		return code
	case <-time.After(30 * time.Second):
		t.Fatal("server did not stop")
		return -1
	}
}

func TestServerCommand(t *testing.T) {
	clustertest.CheckGoroutines(t)
	store := t.TempDir()
	s := startServerCmd(t, "--port", "-1", "--cluster", "A", "--store", store, "--monitor-port", "-1", "--log-level", "off")

	if !strings.HasPrefix(s.url("client"), "nats://127.0.0.1:") {
		t.Fatalf("client URL %q", s.url("client"))
	}
	if !strings.Contains(s.stdout.String(), `JetStream domain "A"`) || !strings.Contains(s.stdout.String(), store) {
		t.Errorf("ready line does not name the domain and store:\n%s", s.stdout)
	}
	if s.url("monitor") == "" || s.url("leaf") != "" {
		t.Errorf("monitor URL %q, leaf URL %q", s.url("monitor"), s.url("leaf"))
	}

	if got := s.line("keys: "); got != os.Getenv(security.EnvKeysDir) {
		t.Errorf("keys line %q", got)
	}
	clustertest.Refused(t, s.url("client"))

	ctx := t.Context()
	nc := clustertest.Connect(t, s.url("client"), keysOption(t, security.RoleAgent))
	js, err := jetstream.NewWithDomain(nc, "A")
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PutString(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, "k"); err != nil || string(e.Value()) != "v" {
		t.Fatalf("Get = %v, %v", e, err)
	}
	nc.Close()

	if code := s.wait(t); code != 0 {
		t.Fatalf("exit code %d after stop; stderr:\n%s", code, s.stderr)
	}
	if s.stderr.String() != "" {
		t.Errorf("stderr with --log-level off: %s", s.stderr)
	}
}

// TestServerCommandHubAndLeaf joins two server commands as hub and leaf and
// uses the leaf cluster's JetStream from a client of the hub.
func TestServerCommandHubAndLeaf(t *testing.T) {
	hub := startServerCmd(t, "--port", "-1", "--cluster", "hub", "--store", t.TempDir(), "--leaf-port", "-1", "--log-level", "warn")
	leafURL := hub.url("leaf")
	if !strings.HasPrefix(leafURL, "nats-leaf://") {
		t.Fatalf("hub leaf URL %q", leafURL)
	}
	startServerCmd(t, "--port", "-1", "--cluster", "A", "--store", t.TempDir(), "--leaf-remote", leafURL, "--log-level", "warn")

	nc := clustertest.Connect(t, hub.url("client"), keysOption(t, security.RoleAgent))
	js, err := jetstream.NewWithDomain(nc, "A")
	if err != nil {
		t.Fatal(err)
	}
	// The link comes up after the leaf server is ready.
	clustertest.WaitFor(t, 10*time.Second, func() error {
		_, err := js.AccountInfo(t.Context())
		return err
	})
	if _, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "from-hub"}); err != nil {
		t.Fatal(err)
	}
}

func TestServerCommandStartFailure(t *testing.T) {
	// A store that is a file cannot be created.
	file := t.TempDir() + "/file"
	if err := writeFile(file); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	code := run(t.Context(), []string{"server", "--port", "-1", "--store", file + "/sub", "--log-level", "off"}, io.Discard, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "pmixbus server:") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

func writeFile(path string) error { return os.WriteFile(path, []byte("x"), 0o644) }

// TestServerCommandPortTaken: a server on a port another process holds
// says so, with the cause, in its one error line.
func TestServerCommandPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	var stderr bytes.Buffer
	code := run(t.Context(), []string{"server", "--port", port, "--store", t.TempDir(), "--log-level", "off"}, io.Discard, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "address already in use") || !strings.Contains(stderr.String(), port) || strings.Count(stderr.String(), "\n") != 1 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}
