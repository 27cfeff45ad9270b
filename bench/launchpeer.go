package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/launch/liveness"
)

// versusMpirun launches the same MPI program (the peer benchmark's
// mpiinit.c, built with mpicc: MPI_Init, a reduce, MPI_Finalize) at each
// of PeerSizes ranks under mpirun and under pmixbus over one agent and
// over all of them, Rounds times each, alternating, and reports the
// medians from launch to the last exit. mpirun runs on one node (this
// machine), so the 1-agent line is the like-for-like one; the all-agents
// line adds what spreading over agents costs.
func (s *launchSetup) versusMpirun(ctx context.Context, r *Report) error {
	if s.cfg.LibDir == "" {
		r.addf("launch vs mpirun: skipped, no directory of pmixbus's libpmix.so.2 (--pmix-lib; make builds it)")
		return nil
	}
	dir, err := os.MkdirTemp("", "pmixbus-bench-launch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pc := PeerConfig{LibDir: s.cfg.LibDir, Include: s.cfg.Include, Mpirun: s.cfg.Mpirun, Rounds: s.cfg.Rounds}
	pc.defaults()
	p, err := buildPeer(ctx, pc, dir)
	if err != nil {
		return err
	}
	switch {
	case p.mpiinit == "":
		r.addf("launch vs mpirun: skipped, mpicc is not installed (apt-get install openmpi-bin libopenmpi-dev libpmix-dev)")
		return nil
	case p.mpirun == "":
		r.addf("launch vs mpirun: skipped, %s (apt-get install openmpi-bin libopenmpi-dev libpmix-dev)", p.why)
		return nil
	}
	m := peerMeasure{cfg: pc, p: p, s: s, r: r}
	r.addf("launch vs mpirun: an MPI program (MPI_Init, a reduce, MPI_Finalize) from launch to the last exit; mpirun on this one node, pmixbus over 1 and %d agents (median of %d rounds, interleaved)", s.cfg.Agents, s.cfg.Rounds)
	r.addf("%6s  %12s  %12s  %6s  %12s  %6s", "ranks", "mpirun", "1 agent", "ratio", fmt.Sprintf("%d agents", s.cfg.Agents), "ratio")
	for _, n := range s.cfg.PeerSizes {
		// One unmeasured run of each: the page cache, the agents'
		// connections.
		if _, err := m.runPeer(ctx, n, p.mpiinit, nil, nil); err != nil {
			return err
		}
		if _, err := m.runOursOn(ctx, 1, n, p.mpiinit, nil); err != nil {
			return err
		}
		var peers, ones, alls []time.Duration
		for range s.cfg.Rounds {
			pr, err := m.runPeer(ctx, n, p.mpiinit, nil, nil)
			if err != nil {
				return err
			}
			one, err := m.runOursOn(ctx, 1, n, p.mpiinit, nil)
			if err != nil {
				return err
			}
			all, err := m.runOursOn(ctx, s.cfg.Agents, n, p.mpiinit, nil)
			if err != nil {
				return err
			}
			if size := all.values["size"]; size != time.Duration(n) {
				return fmt.Errorf("launch vs mpirun: %d ranks over %d agents, MPI_COMM_WORLD of %d", n, s.cfg.Agents, size)
			}
			peers, ones, alls = append(peers, pr.took), append(ones, one.took), append(alls, all.took)
		}
		p50, o50, a50 := percentile(peers, 50), percentile(ones, 50), percentile(alls, 50)
		r.addf("%6d  %12v  %12v  %6.2f  %12v  %6.2f", n, p50.Round(time.Millisecond), o50.Round(time.Millisecond), ratio(o50, p50), a50.Round(time.Millisecond), ratio(a50, p50))
		r.Targets = append(r.Targets,
			Target{Name: fmt.Sprintf("launch_mpi_%d_1agent_vs_mpirun", n), Measured: ratio(o50, p50), Op: "<=", Goal: 0.8},
			Target{Name: fmt.Sprintf("launch_mpi_%d_%dagents_vs_mpirun", n, s.cfg.Agents), Measured: ratio(a50, p50), Op: "<=", Goal: 0.8})
	}
	return nil
}

// cutLatency runs a job with a rank on the first agent and one on the
// last, cuts the last one's link to NATS silently (nothing closed: a
// switch port down), and measures the time until the launcher reports
// the node lost (launch.Config.NodeDown, which `pmixbus run` prints) and
// until its Wait returns; then restores the link and waits until that
// agent has ended the rank it was left with (the launcher gone, the
// job's key expires), Cuts times.
func (s *launchSetup) cutLatency(ctx context.Context) (reports, waits []time.Duration, err error) {
	watcher, victim := launchNodes[0], s.cutNode
	for i := range s.cfg.Cuts {
		if err := s.waitUp(ctx, victim); err != nil {
			return nil, nil, err
		}
		out := newLines()
		reported := make(chan time.Time, 1)
		run, err := launch.Launch(ctx, launch.Config{SignIn: s.w.SignIn(s.nc.ConnectedUrl()), Stdout: out, Stderr: out, LauncherGrace: time.Second,
			NodeDown: func(_ cluster.ID, node string) {
				if node == victim {
					select {
					case reported <- time.Now():
					default:
					}
				}
			},
			Jobs: []launch.JobSpec{{N: 2, App: s.app(rankWatch),
				Hosts: []launch.Node{{Name: watcher, Slots: 1}, {Name: victim, Slots: 1}}}}})
		if err != nil {
			return nil, nil, err
		}
		for rank := range 2 {
			if _, err := out.waitFor(ctx, fmt.Sprintf("rank %d ready", rank), func(l string) bool { return l == fmt.Sprintf(readyLine, rank) }); err != nil {
				run.Terminate(true)
				return nil, nil, err
			}
		}
		nspace := strings.TrimPrefix(run.Nspaces()[0], launchCluster+":")
		cut := time.Now()
		s.link.Cut()
		wctx, cancel := context.WithTimeout(ctx, 10*launch.DefaultJobTTL)
		res, err := run.Wait(wctx)
		cancel()
		waited := time.Since(cut)
		s.link.Restore()
		if err != nil {
			return nil, nil, fmt.Errorf("cut %d: the run did not end: %w", i+1, err)
		}
		if !res.NodeLost {
			return nil, nil, fmt.Errorf("cut %d: the run ended with exit %d, first end %+v, not a node lost\n%s", i+1, res.ExitCode, res.First, strings.Join(out.all, "\n"))
		}
		select {
		case at := <-reported:
			reports = append(reports, at.Sub(cut))
		default:
			return nil, nil, fmt.Errorf("cut %d: the run ended with its node lost but never reported %s", i+1, victim)
		}
		waits = append(waits, waited)
		// The cut-off agent, back, must end the rank it kept: the job's
		// key was released when the launcher left.
		if err := poll(ctx, 50*time.Millisecond, 10*launch.DefaultJobTTL, func() error {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			left, err := s.pids(cctx, victim, nspace)
			if err == nil && len(left) > 0 {
				err = fmt.Errorf("%s still runs %d ranks of %s after the cut", victim, len(left), nspace)
			}
			return err
		}); err != nil {
			return nil, nil, fmt.Errorf("cut %d: %w", i+1, err)
		}
	}
	return reports, waits, nil
}

// waitUp waits, 10 s at most, until the launcher's connection sees node
// up in the liveness bucket.
func (s *launchSetup) waitUp(ctx context.Context, node string) error {
	return poll(ctx, 20*time.Millisecond, 10*time.Second, func() error {
		entries, err := liveness.ReadAgents(ctx, s.nc, launchCluster)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Node == node && e.State == liveness.Up {
				return nil
			}
		}
		return fmt.Errorf("%s is not up", node)
	})
}
