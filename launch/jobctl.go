package launch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
)

// JobAction is what a PMIx_Job_control request does to its targets.
type JobAction struct {
	// Signal, when set, is sent and nothing else; otherwise the targets
	// end, at once when Force.
	Signal syscall.Signal
	Force  bool
	Text   string // what the request was, for the log
}

// ParseJobControl reads PMIx_Job_control's directives: the action of one
// of PMIX_JOB_CTRL_KILL, _TERMINATE, _SIGNAL, _PAUSE or _RESUME; nil for a
// request that only informs (PMIX_JOB_CTRL_ID, _PREEMPTIBLE,
// _CHECKPOINT_METHOD …, which pmixbus takes and has no use for), as
// Open MPI's and OpenPMIx's examples send them.
//
// Errors: pmix.ErrBadParam for a value of the wrong type, a signal out of
// range, or two actions in one request; pmix.ErrNotSupported for
// another request (checkpoint, restart, cancel, provision; the cleanup
// requests, which the C library takes itself).
func ParseJobControl(directives []pmix.Info) (*JobAction, error) {
	var act *JobAction
	set := func(a JobAction, key string) error {
		if act != nil {
			return pmix.Errorf(pmix.ErrBadParam, "job control: %s and %s in one request", act.Text, key)
		}
		act = &a
		return nil
	}
	for _, d := range directives {
		var err error
		ok := true
		switch d.Key {
		case pmix.KeyJobCtrlKill, pmix.KeyJobCtrlTerminate, pmix.KeyJobCtrlPause, pmix.KeyJobCtrlResume:
			var on bool
			if on, ok = d.Value.Bool(); ok && on {
				a := JobAction{Text: d.Key, Force: d.Key == pmix.KeyJobCtrlKill}
				switch d.Key {
				case pmix.KeyJobCtrlPause:
					a.Signal = syscall.SIGSTOP
				case pmix.KeyJobCtrlResume:
					a.Signal = syscall.SIGCONT
				}
				err = set(a, d.Key)
			}
		case pmix.KeyJobCtrlSignal:
			var n int64
			if n, ok = d.Value.Int(); ok {
				if n <= 0 || n > 64 {
					return nil, pmix.Errorf(pmix.ErrBadParam, "job control: signal %d", n)
				}
				err = set(JobAction{Signal: syscall.Signal(n), Text: fmt.Sprintf("%s=%d", d.Key, n)}, d.Key)
			}
		case pmix.KeyJobCtrlID:
			_, ok = d.Value.Str()
		case pmix.KeyJobCtrlPreemptible, pmix.KeyJobCtrlCkptEvent:
			// informational
		case pmix.KeyJobCtrlCkptMethod, pmix.KeyJobCtrlCkptSignal:
			// informational: how the procs would checkpoint
		default:
			if d.IsRequired() || isJobCtrlRequest(d.Key) {
				return nil, pmix.Errorf(pmix.ErrNotSupported, "job control request %s is not supported: pmixbus kills, terminates, signals, pauses and resumes", pmix.Quote(d.Key))
			}
		}
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, pmix.Errorf(pmix.ErrBadParam, "job control %s: %v is of the wrong type", d.Key, d.Value)
		}
	}
	return act, nil
}

// isJobCtrlRequest reports whether key asks for something pmixbus does
// not do: a job-control or cleanup request it would otherwise ignore.
func isJobCtrlRequest(key string) bool {
	switch key {
	case "pmix.jctrl.cancel", "pmix.jctrl.restart", "pmix.jctrl.ckpt", "pmix.jctrl.pvn", "pmix.jctrl.pvnimg",
		"pmix.reg.cleanup", "pmix.reg.cleanupdir", "pmix.clnup.recurse", "pmix.clnup.empty", "pmix.clnup.ignore", "pmix.clnup.lvtop":
		return true
	}
	return false
}

// JobControl carries out act on targets for caller (none: every rank of
// caller's job; a rank of pmix.RankWildcard: every rank of that job): it
// asks each agent running some of them, this one included, and returns
// once every one has acted. The targets must belong to jobs with ranks on
// this node, whose map it knows. A caller among the targets of a kill is
// ended last, after the others' agents answered.
//
// Errors: pmix.ErrNotFound for a job without ranks here or a rank not in
// its job; those of Control, joined.
func (d *Daemon) JobControl(ctx context.Context, caller pmix.Proc, targets []pmix.Proc, act JobAction) error {
	if len(targets) == 0 {
		targets = []pmix.Proc{{Nspace: caller.Nspace, Rank: pmix.RankWildcard}}
	}
	type where struct {
		cluster cluster.ID
		node    string
		nspace  string
	}
	byNode := map[where][]pmix.Rank{}
	self := false
	d.mu.Lock()
	for _, t := range targets {
		j, ok := d.jobs[t.Nspace]
		if !ok {
			d.mu.Unlock()
			return pmix.Errorf(pmix.ErrNotFound, "job control of %v: job %s has no rank on node %s", t, t.Nspace, d.cfg.Node)
		}
		found := false
		for _, pl := range j.req.Map {
			if t.Rank != pmix.RankWildcard && pl.Rank != t.Rank {
				continue
			}
			found = true
			if (pmix.Proc{Nspace: t.Nspace, Rank: pl.Rank}) == caller && act.Signal == 0 {
				self = true
				continue
			}
			w := where{d.cfg.Cluster, pl.Node, t.Nspace}
			if pl.Cluster != "" {
				w.cluster = pl.Cluster
			}
			if !slices.Contains(byNode[w], pl.Rank) {
				byNode[w] = append(byNode[w], pl.Rank)
			}
		}
		if !found {
			d.mu.Unlock()
			return pmix.Errorf(pmix.ErrNotFound, "job control of %v: no such rank in job %s", t, t.Nspace)
		}
	}
	d.mu.Unlock()
	reason := fmt.Sprintf("%s by %v", act.Text, caller)
	var g multierror.Group
	for w, ranks := range byNode {
		req := KillRequest{Nspace: w.nspace, Ranks: ranks, Force: act.Force, Signal: int(act.Signal), Reason: reason}
		if w.cluster == d.cfg.Cluster && w.node == d.cfg.Node {
			g.Go(func() error { return ignoreEnded(d.Kill(req)) })
			continue
		}
		g.Go(func() error {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return ignoreEnded(Control(ctx, d.cfg.Conn, w.cluster, w.node, OpKill, req, nil))
		})
	}
	err := g.Wait().ErrorOrNil()
	if self {
		if kerr := ignoreEnded(d.Kill(KillRequest{Nspace: caller.Nspace, Ranks: []pmix.Rank{caller.Rank}, Force: act.Force, Reason: reason})); err == nil {
			err = kerr
		}
	}
	return err
}

// ignoreEnded drops ErrUnknownJob: the ranks of a node had all ended.
func ignoreEnded(err error) error {
	if errors.Is(err, ErrUnknownJob) {
		return nil
	}
	return err
}

// signal sends sig to the processes of targets still running.
func (d *Daemon) signal(targets []*localProc, sig syscall.Signal) error {
	var errs error
	for _, lp := range targets {
		select {
		case <-lp.p.Done():
			continue
		default:
		}
		if err := lp.p.Signal(sig); err != nil {
			errs = multierror.Append(errs, fmt.Errorf("signalling %v: %w", lp.proc, err))
		}
	}
	return errs
}
