package jobs

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
)

// TestCutOffNodeRanksNeverComeBack: a2's link to NATS is cut silently
// (nothing closed, as a switch port going down) under a --continuous run.
// The launcher declares a2 lost (its ranks TERM_WO_SYNC at a1's ranks,
// the run goes on). Back before the job's launcher grace, a2 reads that
// in the job's key and ends what it still runs of the job; cut off past
// the grace, it ends them while still cut off. Silently both ways (the
// job heard of those ranks' end already): they never come back into it.
func TestCutOffNodeRanksNeverComeBack(t *testing.T) {
	w, link := e2e.StartCuttable(t, e2e.LaunchSpec, "a2")
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	for _, tc := range []struct {
		name  string
		grace time.Duration
	}{
		{"back within the grace", time.Minute},
		{"cut off past the grace", 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &e2e.SyncBuffer{}
			lost := make(chan string, 4)
			r, err := launch.Launch(t.Context(), launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Continuous: true, Stdout: out, Stderr: out, LauncherGrace: tc.grace,
				NodeDown: func(_ cluster.ID, node string) { lost <- node },
				Jobs:     []launch.JobSpec{{N: 4, App: launch.App{Path: p, Args: []string{"-watch", "-sleep", "60s"}}}}})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Terminate(true)
			ns := r.Nspaces()[0][len("A:"):]
			for rk := range 4 {
				out.WaitFor(t, fmt.Sprintf("%d: watching", rk))
			}
			pids := ranksOn(t, nc, "a2", ns)
			link.Cut()
			select {
			case node := <-lost:
				if node != "a2" {
					t.Fatalf("the launcher declared %s lost", node)
				}
			case <-time.After(e2e.WaitTime):
				t.Fatal("the launcher never declared a2 lost")
			}
			for _, lostRank := range []int{2, 3} {
				out.WaitFor(t, fmt.Sprintf("0: event %d affected=%s.%d", pmix.ErrProcTermWOSync, ns, lostRank))
			}
			if tc.grace < e2e.WaitTime {
				clustertest.WaitFor(t, e2e.WaitTime, func() error { // still cut off
					for rk, pid := range pids {
						if syscall.Kill(pid, 0) == nil {
							return fmt.Errorf("rank %d (pid %d) still runs on a2, cut off", rk, pid)
						}
					}
					return nil
				})
			}
			link.Restore()
			clustertest.WaitFor(t, e2e.WaitTime, func() error {
				if left := ranksOn(t, nc, "a2", ns); len(left) != 0 {
					return fmt.Errorf("a2 still runs %v", left)
				}
				return nil
			})
			r.Terminate(false)
			ctx, cancel := context.WithTimeout(t.Context(), e2e.WaitTime)
			defer cancel()
			res, err := r.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range res.Jobs[0].Ends {
				if (e.Rank == 2 || e.Rank == 3) && e.State != pmix.ErrProcTermWOSync {
					t.Errorf("rank %d ended %v (%s), want went down with its node", e.Rank, e.State, e.Text)
				}
			}
		})
	}
	checkNoOrphans(t, p)
}

// ranksOn returns the pids of nspace's running ranks on node, asked of
// its agent (none when it no longer lists the job).
func ranksOn(t *testing.T, nc *nats.Conn, node, nspace string) map[pmix.Rank]int {
	t.Helper()
	pids := map[pmix.Rank]int{}
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		var reply launch.JobsReply
		if err := launch.Control(ctx, nc, "A", node, launch.OpJobs, nil, &reply); err != nil {
			return err
		}
		for _, j := range reply.Jobs {
			if j.Nspace == nspace {
				for _, rs := range j.Ranks {
					if rs.State == "running" {
						pids[rs.Rank] = rs.Pid
					}
				}
			}
		}
		return nil
	})
	return pids
}
