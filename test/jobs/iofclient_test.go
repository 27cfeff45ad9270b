package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
)

// pulled collects what an IOF pull delivers.
type pulled struct {
	mu   sync.Mutex
	out  map[pmix.Rank]string
	seqs map[pmix.Proc][]uint64 // by rank and channel (Rank, Nspace: channel)
	done map[pmix.Rank]bool
}

func newPulled() *pulled {
	return &pulled{out: map[pmix.Rank]string{}, seqs: map[pmix.Proc][]uint64{}, done: map[pmix.Rank]bool{}}
}

func (p *pulled) handle(r iof.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := pmix.Proc{Nspace: r.Channel.String(), Rank: r.Rank}
	p.seqs[k] = append(p.seqs[k], r.Seq)
	if r.Channel == iof.STDOUT {
		p.out[r.Rank] += string(r.Data)
		p.done[r.Rank] = p.done[r.Rank] || r.Complete
	}
}

// waitDone waits until every rank's stdout has ended and checks what it
// read: each record once, in order.
func (p *pulled) waitDone(t *testing.T, want map[pmix.Rank]string) {
	t.Helper()
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		for r := range want {
			if !p.done[r] {
				return fmt.Errorf("rank %d's stdout has not ended: %q", r, p.out[r])
			}
		}
		return nil
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	for r, w := range want {
		if got := strings.TrimSpace(p.out[r]); got != w {
			t.Errorf("rank %d wrote %q, want %q", r, got, w)
		}
	}
	for k, seqs := range p.seqs {
		for i, s := range seqs {
			if s != uint64(i+1) {
				t.Errorf("rank %d's %s: records %v, want 1, 2, … once each", k.Rank, k.Nspace, seqs)
				break
			}
		}
	}
}

// TestIOFPushPull: a Go tool pushes to a rank's stdin and pulls the job's
// output, as PMIx_IOF_push and PMIx_IOF_pull; a pull made after the job
// ended sees its output from the start; bad input gets clear errors.
func TestIOFPushPull(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := w.AddJob(ctx, agenttest.Job{Cluster: "A", Nspace: "tool", Nodes: []string{"a2"}}); err != nil {
		t.Fatal(err)
	}
	tool := w.Client("A:tool.0")
	nc := e2e.LauncherConn(t, w, "A")
	// The launcher's own stdin never ends: rank 0's input comes from the
	// tool, and so does its EOF.
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	r, err := launch.Launch(ctx, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Stdin: launch.Stdin{Reader: pr, Rank: 0},
		Jobs: []launch.JobSpec{{N: 2, App: launch.App{Path: "wc", Args: []string{"-c"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	ns := r.Nspaces()[0]
	all := []pmix.Proc{{Nspace: ns, Rank: pmix.RankWildcard}}
	live := newPulled()
	id, err := tool.IOFPull(ctx, all, iof.STDOUT, live.handle)
	if err != nil {
		t.Fatal(err)
	}

	checkPushErr(t, tool, "rank 1 reads the null device", pmix.Proc{Nspace: ns, Rank: 1}, launch.ErrNoStdin)
	checkPushErr(t, tool, "no rank 5", pmix.Proc{Nspace: ns, Rank: 5}, pmix.ErrNotFound)
	checkPushErr(t, tool, "no such job", pmix.Proc{Nspace: "A:nosuch", Rank: 0}, pmix.ErrNotFound)
	checkPushErr(t, tool, "bad rank", pmix.Proc{Nspace: ns, Rank: pmix.RankUndef}, pmix.ErrBadParam)

	data := bytes.Repeat([]byte("pushed\n"), 50000) // past the agent's queue: flow control
	if err := tool.IOFPush(ctx, []pmix.Proc{{Nspace: ns, Rank: 0}}, data, false); err != nil {
		t.Fatal(err)
	}
	if err := tool.IOFPush(ctx, []pmix.Proc{{Nspace: ns, Rank: 0}}, nil, true); err != nil {
		t.Fatal(err)
	}
	res, err := r.Wait(ctx)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("wait: %v, result %+v", err, res)
	}
	want := map[pmix.Rank]string{0: fmt.Sprint(len(data)), 1: "0"}
	live.waitDone(t, want)
	if err := tool.IOFDeregister(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := tool.IOFDeregister(ctx, id); !errors.Is(err, pmix.ErrNotFound) {
		t.Errorf("deregistering twice: %v, want PMIX_ERR_NOT_FOUND", err)
	}

	late := newPulled()
	if _, err := tool.IOFPull(ctx, all, iof.STDOUT|iof.STDERR, late.handle); err != nil {
		t.Fatal(err)
	}
	late.waitDone(t, want)

	if err := tool.IOFPush(ctx, []pmix.Proc{{Nspace: ns, Rank: 0}}, []byte("x"), false); !errors.Is(err, pmix.ErrNotFound) {
		t.Errorf("push to an ended job: %v, want PMIX_ERR_NOT_FOUND", err)
	}
	for name, ch := range map[string]iof.Channel{"stdin": iof.STDIN, "no channel": 0} {
		if _, err := tool.IOFPull(ctx, all, ch, late.handle); !errors.Is(err, pmix.ErrBadParam) {
			t.Errorf("pull of %s: %v, want PMIX_ERR_BAD_PARAM", name, err)
		}
	}
	if err := tool.IOFPush(ctx, nil, []byte("x"), false); !errors.Is(err, pmix.ErrBadParam) {
		t.Errorf("push to no proc: %v, want PMIX_ERR_BAD_PARAM", err)
	}
}

func checkPushErr(t *testing.T, c *client.Client, what string, p pmix.Proc, want error) {
	t.Helper()
	err := c.IOFPush(t.Context(), []pmix.Proc{p}, []byte("x\n"), false)
	if !errors.Is(err, want) {
		t.Errorf("push (%s): %v, want %v", what, err, want)
	}
}
