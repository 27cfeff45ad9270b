package agent

import (
	"context"

	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
)

// The agent's launch service (package launch): the daemon of a
// distributed virtual machine on NATS. It answers the node's control
// requests (pmix.ctl.<cluster>.<node>.<op>), registers the jobs and
// clients launchers ask for through the host API, starts their processes,
// and raises the events that say how each ended.

// startLaunch starts the launch service unless the config turned it off.
func (a *Agent) startLaunch(ctx context.Context) error {
	if a.cfg.NoLaunch {
		return nil
	}
	d, err := launch.NewDaemon(launch.DaemonConfig{
		Conn: a.nc, Cluster: a.cfg.Cluster, Node: a.cfg.Node, Host: launchHost{a},
		Version: a.cfg.livenessKnobs().Version, KillGrace: a.cfg.KillGrace, LauncherGrace: a.cfg.LauncherGrace, LibDir: a.cfg.PMIxLibDir, JobUser: a.cfg.JobUser, Output: a.output, Replicas: a.replicas,
		Logger: a.log,
	})
	if err != nil {
		return err
	}
	a.launcher.Store(d)
	return d.Start(ctx)
}

// stopLaunch ends the processes the service started and stops it.
func (a *Agent) stopLaunch(ctx context.Context) {
	if d := a.launcher.Load(); d != nil {
		if err := d.Shutdown(ctx); err != nil {
			a.log.Warn("stopping the launch service", "err", err)
		}
	}
}

// launchHost is the agent as its launch service sees it.
type launchHost struct{ a *Agent }

func (h launchHost) RegisterJob(ctx context.Context, j launch.Job) error {
	h.a.mu.Lock()
	_, dup := h.a.jobs[j.Nspace]
	h.a.mu.Unlock()
	if dup {
		return pmix.Errorf(pmix.ErrDuplicateKey, "job %s is already registered on node %s", j.Nspace, h.a.cfg.Node)
	}
	apps := make([]App, len(j.Apps))
	for i, app := range j.Apps {
		apps[i] = App{Size: app.Size, Argv: app.Argv}
	}
	return h.a.RegisterJob(ctx, Job{Nspace: j.Nspace, Session: j.Session, Info: j.Info, Procs: j.Procs, Apps: apps})
}

func (h launchHost) DeregisterJob(ctx context.Context, nspace string) error {
	return h.a.DeregisterJob(ctx, nspace)
}

func (h launchHost) RegisterClient(ctx context.Context, p pmix.Proc) (map[string]string, error) {
	if u := h.a.cfg.JobUser; u != nil {
		return h.a.RegisterClient(ctx, p, WithExitWatched(), WithUID(int(u.UID)))
	}
	return h.a.RegisterClient(ctx, p, WithExitWatched())
}

func (h launchHost) DeregisterClient(ctx context.Context, p pmix.Proc) error {
	return h.a.DeregisterClient(ctx, p)
}

func (h launchHost) ClientState(p pmix.Proc) (launch.ClientState, bool) {
	st, ok := h.a.ClientState(p)
	return launch.ClientState{Attached: st.Attached, Finalized: st.Finalized, Aborted: st.Aborted,
		AbortStatus: st.AbortStatus, AbortMessage: st.AbortMessage}, ok
}

func (h launchHost) ProcTerminated(ctx context.Context, p pmix.Proc, abnormal bool) error {
	return h.a.ProcTerminated(ctx, p, abnormal)
}

func (h launchHost) Raise(m *event.Message) error { return h.a.raise(m) }
