package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

// stdinInput is more than one request and one agent queue can take, so
// flow control paces it.
var stdinInput = bytes.Repeat([]byte("0123456789abcdef\n"), 40000) // 680000 bytes

// rankLines runs cfg with the ranks' output tagged by rank and returns
// each rank's output.
func rankLines(t *testing.T, cfg launch.Config) (launch.Result, map[pmix.Rank]string) {
	t.Helper()
	out := &e2e.SyncBuffer{}
	opts, err := iof.ParseOutput("rank")
	if err != nil {
		t.Fatal(err)
	}
	d, err := iof.NewDisplay(iof.Config{Options: opts, Stdout: out, Stderr: out})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Display = d
	res, _ := e2e.RunJob(t, cfg)
	_ = d.Close()
	got := map[pmix.Rank]string{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rank pmix.Rank
		var text string
		if _, err := fmt.Sscanf(line, "[%d]<stdout>: %s", &rank, &text); err == nil {
			got[rank] += text
		}
	}
	return res, got
}

// twoNodes are e2e.LaunchSpec's nodes of cluster A.
var twoNodes = []launch.Node{{Name: "a1", Slots: 2}, {Name: "a2", Slots: 2}}

// TestStdinTargets: by default only rank 0 reads the launcher's stdin,
// with `all` every rank (on both agents) does, with none no rank; each
// gets all of it, then EOF (wc prints its count only then).
func TestStdinTargets(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	nc := e2e.LauncherConn(t, w, "A")
	want := fmt.Sprint(len(stdinInput))
	for _, tt := range []struct {
		name   string
		target string
		counts []string
	}{
		{"default", "0", []string{want, "0", "0", "0"}},
		{"rank", "2", []string{"0", "0", want, "0"}},
		{"all", "all", []string{want, want, want, want}},
		{"none", "none", []string{"0", "0", "0", "0"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rank, none, err := launch.ParseStdinTarget(tt.target)
			if err != nil {
				t.Fatal(err)
			}
			// Named hosts: ranks 0-1 on a1, 2-3 on a2, whatever the agents'
			// liveness says of the slots the previous subtest used.
			cfg := launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{{N: 4, Hosts: twoNodes,
				App: launch.App{Path: "wc", Args: []string{"-c"}}}}}
			if !none {
				cfg.Stdin = launch.Stdin{Reader: bytes.NewReader(stdinInput), Rank: rank}
			}
			res, got := rankLines(t, cfg)
			if res.ExitCode != 0 {
				t.Fatalf("result %+v", res)
			}
			for r, c := range tt.counts {
				if got[pmix.Rank(r)] != c {
					t.Errorf("rank %d read %q bytes, want %s (all: %v)", r, got[pmix.Rank(r)], c, got)
				}
			}
		})
	}
}

// TestStdinEOFWithoutData: an empty stdin is EOF at once; cat ends.
func TestStdinEOFWithoutData(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	nc := e2e.LauncherConn(t, w, "A")
	res, _ := rankLines(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Stdin: launch.Stdin{Reader: strings.NewReader(""), Rank: pmix.RankWildcard},
		Jobs: []launch.JobSpec{{N: 2, Hosts: twoNodes, App: launch.App{Path: "cat"}}}})
	if res.ExitCode != 0 {
		t.Fatalf("result %+v", res)
	}
}

// countingReader counts what the launcher read of an endless input.
type countingReader struct{ n atomic.Int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	clear(p)
	c.n.Add(int64(len(p)))
	return len(p), nil
}

// TestStdinNotRead: a rank that never reads its stdin while the launcher
// has an endless input: the launcher reads only what the agent's bounded
// queue and one request hold, and the run ends when the rank does.
func TestStdinNotRead(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	nc := e2e.LauncherConn(t, w, "A")
	release := filepath.Join(t.TempDir(), "release")
	in := &countingReader{}
	r, err := launch.Launch(t.Context(), launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Stdin: launch.Stdin{Reader: in, Rank: 0},
		Jobs: []launch.JobSpec{{N: 1, App: launch.App{Path: "sh", Args: []string{"-c", "until [ -e " + release + " ]; do sleep 0.05; done"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	// The queue fills: the launcher has read at least its capacity.
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		if n := in.n.Load(); n < launch.StdinBuffers*launch.StdinBuffer {
			return fmt.Errorf("the launcher read %d bytes", n)
		}
		return nil
	})
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := r.Wait(ctx)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("wait: %v, result %+v", err, res)
	}
	// The agent's queue, the pipe, a request and a read piece: far below
	// what an unbounded queue would have read.
	if n := in.n.Load(); n > 1<<20 {
		t.Errorf("the launcher read %d bytes of stdin for a rank that never read it; want at most 1 MiB", n)
	}
}

// TestStdinRankEndsEarly: a rank that reads a little and exits while the
// launcher pushes: the launcher stops sending to it and the run ends.
func TestStdinRankEndsEarly(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	nc := e2e.LauncherConn(t, w, "A")
	in := &countingReader{}
	res, got := rankLines(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Stdin: launch.Stdin{Reader: in, Rank: pmix.RankWildcard},
		Jobs: []launch.JobSpec{{N: 2, App: launch.App{Path: "sh", Args: []string{"-c", "head -c 10000 | wc -c"}}}}})
	if res.ExitCode != 0 || got[0] != "10000" || got[1] != "10000" {
		t.Fatalf("result %+v, read %v", res, got)
	}
}

// TestStdinBadTarget: a rank outside the first job is refused before
// anything starts.
func TestStdinBadTarget(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	nc := e2e.LauncherConn(t, w, "A")
	_, err := launch.Launch(t.Context(), launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Stdin: launch.Stdin{Reader: strings.NewReader("x"), Rank: 5},
		Jobs: []launch.JobSpec{{N: 2, App: launch.App{Path: "cat"}}}})
	if pmix.StatusOf(err) != pmix.ErrBadParam {
		t.Fatalf("launch with stdin to rank 5 of 2: %v, want PMIX_ERR_BAD_PARAM", err)
	}
	if _, _, err := launch.ParseStdinTarget("first"); pmix.StatusOf(err) != pmix.ErrBadParam {
		t.Errorf("--stdin first: %v", err)
	}
}

// TestStdinAllAcrossClusters: with `all`, the ranks of every app context
// read the launcher's stdin, in both clusters.
func TestStdinAllAcrossClusters(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	nc := e2e.LauncherConn(t, w, "A")
	wc := launch.App{Path: "wc", Args: []string{"-c"}}
	res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Stdin: launch.Stdin{Reader: bytes.NewReader(stdinInput), Rank: pmix.RankWildcard},
		Jobs: []launch.JobSpec{{N: 1, App: wc}, {N: 1, Cluster: "B", App: wc}}})
	if want := fmt.Sprintf("%d\n", len(stdinInput)); res.ExitCode != 0 || strings.Count(out.String(), want) != 2 {
		t.Fatalf("result %+v; want %q twice in:\n%s", res, want, out)
	}
}

// TestStdinRequestChecked: an agent refuses a stdin request it cannot
// take, with a PMIx status that says why, and queues nothing.
func TestStdinRequestChecked(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	nc := e2e.LauncherConn(t, w, "A")
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	r, err := launch.Launch(t.Context(), launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Stdin: launch.Stdin{Reader: pr, Rank: 0},
		Jobs: []launch.JobSpec{{N: 2, Hosts: twoNodes[:1], App: launch.App{Path: "cat"}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Terminate(true)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = r.Wait(ctx)
	})
	ns := r.Nspaces()[0][len("A:"):]
	// Sent as an agent does for a client's PMIx_IOF_push: whatever job
	// it names (a launcher's credential may name its own job only).
	agentNC := clustertest.Connect(t, w.URL("A"), w.Keys().Option(security.RoleAgent))
	for _, tt := range []struct {
		name string
		req  launch.StdinRequest
		want error
	}{
		{"too much", launch.StdinRequest{Nspace: ns, Ranks: []pmix.Rank{0}, Writer: "w", Data: make([]byte, launch.MaxStdinData+1)}, pmix.ErrBadParam},
		{"no writer", launch.StdinRequest{Nspace: ns, Ranks: []pmix.Rank{0}, Data: []byte("x")}, pmix.ErrBadParam},
		{"negative offset", launch.StdinRequest{Nspace: ns, Ranks: []pmix.Rank{0}, Writer: "w", Offset: -1}, pmix.ErrBadParam},
		{"no rank", launch.StdinRequest{Nspace: ns, Writer: "w"}, pmix.ErrBadParam},
		{"unknown job", launch.StdinRequest{Nspace: "nosuch", Ranks: []pmix.Rank{0}, Writer: "w"}, launch.ErrUnknownJob},
		{"no stdin", launch.StdinRequest{Nspace: ns, Ranks: []pmix.Rank{1}, Writer: "w", Data: []byte("x")}, launch.ErrNoStdin},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var reply launch.StdinReply
			err := launch.Control(t.Context(), agentNC, "A", "a1", launch.OpStdin, tt.req, &reply)
			if !errors.Is(err, tt.want) {
				t.Fatalf("%v, want %v", err, tt.want)
			}
		})
	}
	// A rank the node does not run is no error: it is not held.
	reply, err := launch.DeliverStdin(t.Context(), agentNC, "A", "a1", launch.StdinRequest{Nspace: ns, Ranks: []pmix.Rank{0, 7}, Writer: "w", Data: []byte("x")})
	if err != nil || !slices.Equal(reply.Held, []pmix.Rank{0}) {
		t.Fatalf("held %v, %v; want rank 0 only", reply.Held, err)
	}
}
