package cabi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent/agenttest"
)

// The end-to-end tests run C programs linked against libpmix.so.2 under
// agents of an agenttest world: Detached jobs, each rank a subprocess
// launched with World.Env's environment.

// started is a C program running in the background.
type started struct {
	cmd    *exec.Cmd
	out    *bufio.Reader
	rest   bytes.Buffer // what was read after the line waited for
	stderr bytes.Buffer
	stdin  io.WriteCloser // closed by wait: a program may wait for its EOF
	done   chan error
}

// start starts bin with env and waits until it prints the line ready.
func start(t testing.TB, ctx context.Context, bin string, env map[string]string, ready string, args ...string) *started {
	t.Helper()
	s := &started{cmd: exec.CommandContext(ctx, bin, args...), done: make(chan error, 1)}
	s.cmd.Env = cmdEnv(t, env)
	s.cmd.Stderr = &s.stderr
	pipe, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.cmd.Process.Kill(); <-s.done })
	s.out = bufio.NewReader(pipe)
	var seen strings.Builder
	for {
		line, err := s.out.ReadString('\n')
		seen.WriteString(line)
		if strings.TrimSpace(line) == ready {
			break
		}
		if err != nil {
			err = s.cmd.Wait()
			s.done <- err
			t.Fatalf("%s exited before %q: %v\nstdout:\n%s\nstderr:\n%s", bin, ready, err, seen.String(), s.stderr.String())
		}
	}
	go func() {
		_, _ = io.Copy(&s.rest, s.out)
		s.done <- s.cmd.Wait()
	}()
	return s
}

// wait waits for the program to exit and returns the rest of its output.
func (s *started) wait(t testing.TB) string {
	t.Helper()
	_ = s.stdin.Close()
	err := <-s.done
	s.done <- err // for the cleanup
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, s.rest.String(), s.stderr.String())
	}
	return s.rest.String()
}

// forEachHeader runs body once for each header set (headers): with src
// compiled against it and linked against the library, in a new world of
// spec.
func forEachHeader(t *testing.T, src string, spec agenttest.Spec, body func(t *testing.T, bin string, w *agenttest.World)) {
	for _, h := range headers(t) {
		t.Run(h.name, func(t *testing.T) {
			bin := compile(t, src, h, true)
			body(t, bin, agenttest.Start(t, spec))
		})
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestEvents registers three handlers from C (LAST, FIRST and a default
// one, the last without blocking) in a process on one node, and notifies
// three events from a C process on another: every event reaches the
// handlers in chain order, the events arrive in the order notified, a
// handler completing from another thread passes its results down the
// chain, and a blocking call made inside a handler returns
// PMIX_ERR_WOULD_BLOCK instead of deadlocking.
func TestEvents(t *testing.T) {
	forEachHeader(t, "events.c", agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "capp", Nodes: []string{"n1", "n2"}, Detached: true}},
	}, func(t *testing.T, bin string, w *agenttest.World) {
		ctx := testContext(t)
		listener := start(t, ctx, bin, w.Env("A:capp.0"), "ready", "listen")
		if out := run(t, ctx, bin, w.Env("A:capp.1"), "notify"); !strings.Contains(out, "notified") {
			t.Fatalf("notifier: %s", out)
		}
		out := listener.wait(t)
		checkChains(t, out, "capp.1", true)
		for _, want := range []string{"publish-in-handler -15", "get-in-handler -15", "fence-in-handler -15",
			"lookup-in-handler -15", "unpublish-in-handler -15", "connect-in-handler -15", "disconnect-in-handler -15",
			"register-in-handler -15", "deregister-in-handler -15", "notify-in-handler -15",
			"init-in-handler 0", "finalize-in-handler 0"} {
			if n := countLines(out, want); n != 3 {
				t.Errorf("%q %d times, want 3 (a blocking call inside a handler returns PMIX_ERR_WOULD_BLOCK; a nested Init/Finalize only counts):\n%s", want, n, out)
			}
		}
	})
}

// countLines counts the lines of out that are want, whole.
func countLines(out, want string) int {
	n := 0
	for line := range strings.Lines(out) {
		if strings.TrimSuffix(line, "\n") == want {
			n++
		}
	}
	return n
}

// TestRendezvous has two C processes on different nodes meet through
// publish/lookup: the client waits (PMIX_WAIT) for data the server
// publishes after it started, reads a second key with PMIx_Lookup_nb,
// answers with PMIx_Publish_nb, which the server is waiting for, and both
// unpublish (the client a scratch key only: the server may still be
// waiting for its answer).
func TestRendezvous(t *testing.T) {
	forEachHeader(t, "rendezvous.c", agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "rdv", Nodes: []string{"n1", "n2"}, Detached: true}},
	}, func(t *testing.T, bin string, w *agenttest.World) {
		ctx := testContext(t)
		client := start(t, ctx, bin, w.Env("A:rdv.1"), "waiting", "client")
		server := start(t, ctx, bin, w.Env("A:rdv.0"), "published", "server")
		cout, sout := client.wait(t), server.wait(t)
		for _, want := range []string{
			"lookup svc.uri=tcp://svc:4711 from rdv.0",
			"lookup_nb svc.port=4711 from rdv.0",
			"unpublish_nb 0",
			"lookup-after-unpublish -46",
		} {
			if !strings.Contains(cout, want+"\n") {
				t.Errorf("client output lacks %q:\n%s", want, cout)
			}
		}
		for _, want := range []string{"answer hello from rdv.1", "unpublish 0"} {
			if !strings.Contains(sout, want+"\n") {
				t.Errorf("server output lacks %q:\n%s", want, sout)
			}
		}
		if strings.Contains(cout+sout, "FAIL") {
			t.Errorf("client:\n%s\nserver:\n%s", cout, sout)
		}
	})
}

// TestAbort: PMIx_Abort of a process no launch service started (a
// detached rank): the agent raises PMIX_ERR_PROC_REQUESTED_ABORT (-8) for
// the caller, with its message, to its namespace; with no procs the caller
// is among those aborted and exits with the status given; with procs
// that leave it out, it goes on (TestLaunchedAbort has the agent kill).
func TestAbort(t *testing.T) {
	bin := compile(t, "abort.c", headers(t)[0], true)
	for _, tc := range []struct {
		mode, text, out string
		exit            int
	}{
		{mode: "abort", text: "bye", exit: 3},
		{mode: "tell", text: "you", out: "abort-returned 0\n"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			w := agenttest.Start(t, agenttest.Spec{
				Clusters: []agenttest.Cluster{{ID: "A"}},
				Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "ab", Nodes: []string{"n1", "n2"}, Detached: true}},
			})
			ctx := testContext(t)
			watcher := start(t, ctx, bin, w.Env("A:ab.0"), "ready", "watch")
			cmd := exec.CommandContext(ctx, bin, tc.mode)
			cmd.Env = cmdEnv(t, w.Env("A:ab.1"))
			out, err := cmd.Output()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.exit || string(out) != tc.out {
				t.Errorf("%s: exit status %d, output %q; want %d, %q", tc.mode, code, out, tc.exit, tc.out)
			}
			if got := watcher.wait(t); !strings.Contains(got, "event -8 from ab.1 text="+tc.text+"\n") {
				t.Errorf("watcher output:\n%s", got)
			}
		})
	}
}

// TestThreads has eight C threads register, notify PROC_LOCAL, put,
// commit and get, deregister and initialise/finalize (nested) at once,
// fifty times each, and publish, look up and unpublish in five of them:
// every entry point is safe from any thread.
func TestThreads(t *testing.T) {
	h := headers(t)[0]
	bin := compile(t, "threads.c", h, true)
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "thr", Nodes: []string{"n1"}, Detached: true}},
	})
	out := run(t, testContext(t), bin, w.Env("A:thr.0"))
	if strings.Contains(out, "FAIL") || !strings.Contains(out, "finalize 0\ninitialized 0\n") {
		t.Errorf("output:\n%s", out)
	}
}

// checkChains checks the listener's output of testdata/events.c: nine
// invocations from source, each event's chain in order with the middle
// handler's result passed down, and, with arrivalOrder, the first handler
// seeing the events in the order notified (asked of one cluster only:
// the codes travel on subjects of their own, and whether their order
// holds across leaf links is not what this package tests). The agent runs the chains of different
// events side by side, so only each chain keeps its order.
func checkChains(t *testing.T, out, source string, arrivalOrder bool) {
	t.Helper()
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "FAIL") {
			t.Error(line)
		}
		if strings.HasPrefix(line, "event ") {
			got = append(got, line)
		}
	}
	pos := map[string]int{}
	for i, line := range got {
		pos[line] = i
	}
	var firsts []string
	for _, line := range got {
		if strings.HasPrefix(line, "event first ") {
			firsts = append(firsts, strings.Fields(line)[2])
		}
	}
	if arrivalOrder && strings.Join(firsts, " ") != "-3001 -3002 -3003" {
		t.Errorf("the first handler saw %v, want -3001 -3002 -3003", firsts)
	}
	for _, code := range []string{"-3001", "-3002", "-3003"} {
		chain := []string{
			"event first " + code + " " + source,
			"event middle " + code + " " + source,
			"event last " + code + " " + source + " text=n" + code[1:] + " middle.saw=1",
		}
		for i, line := range chain {
			p, ok := pos[line]
			if !ok {
				t.Errorf("missing %q in:\n%s", line, strings.Join(got, "\n"))
			} else if i > 0 && p < pos[chain[i-1]] {
				t.Errorf("%q ran before %q", line, chain[i-1])
			}
		}
	}
	if len(got) != 9 {
		t.Errorf("%d handler invocations, want 9:\n%s", len(got), strings.Join(got, "\n"))
	}
}

// TestEventsAcrossClusters: the same handlers in a C process of cluster A
// receive PMIX_RANGE_GLOBAL events notified by a C process of cluster B,
// through the hub's leaf links.
func TestEventsAcrossClusters(t *testing.T) {
	h := headers(t)[0]
	bin := compile(t, "events.c", h, true)
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}, {ID: "B"}},
		Jobs: []agenttest.Job{
			{Cluster: "A", Nspace: "capp", Nodes: []string{"a1"}, Detached: true},
			{Cluster: "B", Nspace: "bapp", Nodes: []string{"b1"}, Detached: true},
		},
	})
	ctx := testContext(t)
	listener := start(t, ctx, bin, w.Env("A:capp.0"), "ready", "listen")
	if err := w.WaitSourced(ctx); err != nil {
		t.Fatal(err)
	}
	if out := run(t, ctx, bin, w.Env("B:bapp.0"), "notify", "global"); !strings.Contains(out, "notified") {
		t.Fatalf("notifier: %s", out)
	}
	out := listener.wait(t)
	source := "bapp.0"
	if i := strings.Index(out, "event first -3001 "); i >= 0 {
		source = strings.Fields(out[i:])[3] // as the agent names a proc of another cluster
	}
	if !strings.HasSuffix(source, "bapp.0") {
		t.Errorf("source %q, want bapp.0 of cluster B", source)
	}
	t.Logf("source as the handlers see it: %s", source)
	checkChains(t, out, source, false)
}

// TestOrder registers seven C handlers with every placement attribute
// (FIRST, LAST, BEFORE and AFTER a named one, APPEND, and the default,
// which prepends: RFC0018) and has the agent run their chain, before and
// after one is deregistered.
func TestOrder(t *testing.T) {
	bin := compile(t, "order.c", headers(t)[0], true)
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs: []agenttest.Job{{Cluster: "A", Nspace: "ord", Nodes: []string{"n1"}, Detached: true},
			{Cluster: "A", Nspace: "ordlocal", Nodes: []string{"n1"}, Detached: true}},
	})
	// The agent runs the chain of a NAMESPACE event; the library runs a
	// PROC_LOCAL one itself (src/events.c): both in bus/'s order. Each in
	// a job of its own: the agent replays a job's cached events to later
	// registrations.
	for mode, proc := range map[string]string{"agent": "A:ord.0", "local": "A:ordlocal.0"} {
		out := run(t, testContext(t), bin, w.Env(proc), mode)
		got := lines(out)
		// b; c prepended before it; e BEFORE b; f AFTER c; g appended; d
		// FIRST and a LAST around them.
		if got["chain"] == "" || strings.Contains(out, "FAIL") {
			t.Fatalf("%s: output:\n%s", mode, out)
		}
		want := "chain 1: dcfebga\nchain 2: dcfeba\n"
		if !strings.Contains(out, want) {
			t.Errorf("%s: chains:\n%s\nwant:\n%s", mode, out, want)
		}
	}
}
