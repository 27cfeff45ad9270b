package jobs

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// directSpec: a1 listens on a Unix socket, as an agent of the launcher's
// machine does, and holds one connection without hello at most (so a
// test can keep the launcher from attaching); a2 listens on TCP, which
// the launcher never attaches to: an agent of another node, reached
// through NATS only.
var directSpec = agenttest.Spec{
	Clusters: []agenttest.Cluster{{ID: "A", Nodes: []string{"a1", "a2"}}},
	Agent: func(c *agent.Config) {
		c.HandlerTimeout = 10 * time.Second
		c.Slots = 2
		c.KillGrace = time.Second
		c.LivenessInterval, c.LivenessTTL = e2e.LiveInterval, e2e.LiveTTL
		if c.Node == "a1" {
			c.MaxPendingHello = 1
		} else {
			c.Listen = "tcp:127.0.0.1:0"
		}
	},
}

// The launcher takes a local agent's output from its socket as well as
// from NATS, and shows every line once, in order; from an agent it
// cannot attach to, all of it comes from NATS. With both, tags and the
// ends of the ranks are as before.
func TestOutputDirectPath(t *testing.T) {
	w := agenttest.Start(t, directSpec)
	nc := e2e.LauncherConn(t, w, "A")
	const lines = 300
	for _, c := range []struct {
		node   string
		direct bool
	}{{"a1", true}, {"a2", false}} {
		t.Run(c.node, func(t *testing.T) {
			out := &e2e.SyncBuffer{}
			// The second half once the launcher attached: it comes both ways.
			file := filepath.Join(t.TempDir(), "release")
			job := shJob(2, halfThenRest(file, lines))
			job.Hosts = []launch.Node{{Name: c.node, Slots: 2}}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			r, err := launch.Launch(ctx, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Stdout: out, Stderr: out, Jobs: []launch.JobSpec{job}})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.DirectNodes(); (len(got) == 1) != c.direct {
				t.Errorf("direct paths %v, want one: %v", got, c.direct)
			}
			releaseAndCheck(ctx, t, r, file, out, lines)
			if n := r.DirectRecords(); (n > 0) != c.direct {
				t.Errorf("%d records shown from the direct path; want some: %v", n, c.direct)
			}
			if got := r.DirectNodes(); len(got) != 0 {
				t.Errorf("direct paths %v open after the run", got)
			}
		})
	}
}

// A launcher that could not attach at first (the agent took no more
// connections) has the first half of the output from NATS alone; it
// attaches at a later poll, and the rest comes from both paths: every
// line once, in order.
func TestOutputDirectPathLate(t *testing.T) {
	w := agenttest.Start(t, directSpec)
	nc := e2e.LauncherConn(t, w, "A")
	// The one connection a1 lets wait for its hello: the launcher's
	// attach is refused while it is open.
	sock := strings.TrimPrefix(w.Agent("a1").Addr(), "unix:")
	blocker, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	clustertest.WaitFor(t, e2e.WaitTime, func() error { // accepted and counted
		c, err := net.Dial("unix", sock)
		if err != nil {
			return nil
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil {
			return fmt.Errorf("a second connection was not refused: %v", err)
		}
		return nil
	})
	const lines = 400
	file := filepath.Join(t.TempDir(), "release")
	job := shJob(2, halfThenRest(file, lines))
	job.Hosts = []launch.Node{{Name: "a1", Slots: 2}}
	out := &e2e.SyncBuffer{}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := launch.Launch(ctx, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Stdout: out, Stderr: out, Poll: 200 * time.Millisecond, Jobs: []launch.JobSpec{job}})
	if err != nil {
		t.Fatal(err)
	}
	for rank := range 2 {
		out.WaitFor(t, fmt.Sprintf("%d %d\n", rank, lines/2-1))
	}
	if got := r.DirectNodes(); len(got) != 0 || r.DirectRecords() != 0 {
		t.Fatalf("attached while the agent took no connection: %v, %d records", got, r.DirectRecords())
	}
	_ = blocker.Close()
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		if got := r.DirectNodes(); !slices.Equal(got, []string{"A:a1"}) {
			return fmt.Errorf("direct paths %v", got)
		}
		return nil
	})
	releaseAndCheck(ctx, t, r, file, out, lines)
	if r.DirectRecords() == 0 {
		t.Error("no record shown from the direct path once attached")
	}
}

// releaseAndCheck lets the ranks of halfThenRest(file, lines) write the
// rest, waits for the run, and checks that every line was shown once, in
// order.
func releaseAndCheck(ctx context.Context, t *testing.T, r *launch.Run, file string, out *e2e.SyncBuffer, lines int) {
	t.Helper()
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := r.Wait(ctx)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("result %+v, %v\n%s", res, err, out)
	}
	checkNumberedLines(t, out.String(), 2, lines)
}

// Only the launcher of a job attaches for its output: an output-attach
// with another token, or for a job the agent does not run, gets an error
// frame and the connection closes.
func TestOutputDirectPathRefused(t *testing.T) {
	w := agenttest.Start(t, directSpec)
	nc := e2e.LauncherConn(t, w, "A")
	file := filepath.Join(t.TempDir(), "release")
	job := shJob(1, "until [ -e "+file+" ]; do sleep 0.01; done")
	job.Hosts = []launch.Node{{Name: "a1", Slots: 2}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := launch.Launch(ctx, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{job}})
	if err != nil {
		t.Fatal(err)
	}
	sock := strings.TrimPrefix(w.Agent("a1").Addr(), "unix:")
	for _, c := range []struct {
		nspace, token string
		want          pmix.Status
	}{
		{r.Nspace(), "0123456789abcdef0123456789abcdef", pmix.ErrInvalidCred},
		{r.Nspace(), "", pmix.ErrInvalidCred},
		{"no-such-job", "0123456789abcdef0123456789abcdef", pmix.ErrNotFound},
	} {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(e2e.WaitTime))
		if err := proto.WriteFrame(conn, &proto.Frame{Type: proto.TypeOutputAttach, Seq: 1, Nspace: c.nspace, Credential: c.token}); err != nil {
			t.Fatal(err)
		}
		f, err := proto.ReadFrame(conn, 1<<16)
		if err != nil || f.Type != proto.TypeError || f.Status != c.want {
			t.Errorf("attach to %s with token %q: %+v, %v; want an error frame with %v", c.nspace, c.token, f, err, c.want)
		}
		if _, err := proto.ReadFrame(conn, 1<<16); err == nil {
			t.Errorf("attach to %s with token %q: the connection stays open", c.nspace, c.token)
		}
		_ = conn.Close()
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if res, err := r.Wait(ctx); err != nil || res.ExitCode != 0 {
		t.Fatalf("result %+v, %v", res, err)
	}
}
