package agent

import (
	"slices"
	"time"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// What the agent knows of each registered client's life, and the ends it
// reports itself (research §3.7). A registration's life is: registered,
// attached (hello), then finalized, aborted, or its socket lost. The
// agent records each step on the client's entry; RegisterClient after
// DeregisterClient starts a fresh entry.
//
// Who reports a client's end depends on who watches its process:
//
//   - A client registered WithExitWatched (the launch service spawned it):
//     its host reports how it ended; the agent raises nothing when its
//     socket closes, and passes its aborts to the OnAbort functions.
//   - Any other client (a host RM that launched it itself, or a process
//     that attached on its own): the agent raises PMIX_ERR_PROC_TERM_WO_SYNC
//     (-200) to its job when its socket is lost after hello without
//     Finalize or Abort, once per registration. It raises nothing when the
//     agent closed the connection itself: DeregisterClient, DeregisterJob,
//     Shutdown, a protocol error, or a client cut off for not reading (a
//     stalled process is still alive; whoever watches it reports its end).
//   - Abort from any client: with OnAbort functions the agent hands them
//     the request and raises nothing (the host kills the procs and reports
//     their ends); without any, the agent raises
//     PMIX_ERR_PROC_REQUESTED_ABORT (-8) for the caller to its job, with
//     PMIX_EXIT_CODE the abort's status. The first Abort of a registration
//     stands; later ones are answered with success and change nothing.
//
// The events are event.TerminationEvent's, published as the host RM's,
// with an incarnation drawn for each registration so that two
// registrations of one proc make two events.

// ClientState is what the agent knows of a registered client's life.
type ClientState struct {
	Attached     bool // it said hello (PMIx_Init) at least once
	Finalized    bool // it called Finalize (since its last hello: a process may attach again after another finalized)
	Aborted      bool // it called Abort
	AbortStatus  pmix.Status
	AbortMessage string
}

// AbortRequest is a client's PMIx_Abort, as OnAbort functions get it.
type AbortRequest struct {
	Proc    pmix.Proc // the client that called
	Status  pmix.Status
	Message string
	// Procs are the procs it asked to abort, nspaces "cluster:nspace" for
	// another cluster's; empty: its whole job (PMIx_Abort with NULL procs).
	Procs []pmix.Proc
}

// WithExitWatched marks a client whose process the host watches (the
// launch service): the host reports its end, so the agent raises nothing
// when its socket closes.
func WithExitWatched() ClientOption { return func(e *clientEntry) { e.exitWatched = true } }

// ClientState reports the state of a registered client; false if the proc
// is not registered.
func (a *Agent) ClientState(proc pmix.Proc) (ClientState, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.expected[proc]
	if !ok {
		return ClientState{}, false
	}
	return e.state, true
}

// OnAbort adds a callback run (on its own goroutine, never under the
// agent's lock) when a client calls Abort: the proc that called, its
// status and message, and the procs it asked to abort (empty = its whole
// job, as PMIx_Abort with NULL procs). Once one is added, the agent
// raises no PMIX_ERR_PROC_REQUESTED_ABORT itself: the host kills the
// procs and reports their ends.
func (a *Agent) OnAbort(f func(AbortRequest)) {
	a.mu.Lock()
	a.abortFuncs.Store(appendCopy(a.abortFuncs.Load(), f))
	a.mu.Unlock()
}

// finalized records the client's Finalize, before the agent releases its
// identity, so that the socket closing next is no loss.
func (a *Agent) finalized(e *clientEntry) {
	a.mu.Lock()
	e.state.Finalized = true
	a.mu.Unlock()
}

// abort serves a client's abort frame.
func (cc *clientConn) abort(e *clientEntry, f *proto.Frame) error {
	if err := checkAbort(f); err != nil {
		return err
	}
	return cc.a.aborted(e, AbortRequest{Proc: e.proc, Status: f.Status, Message: f.Message, Procs: slices.Clone(f.Procs)})
}

// checkAbort bounds an abort frame (proto.MaxAbortMessage,
// proto.MaxAbortProcs) and checks each proc's rank, cluster and nspace.
func checkAbort(f *proto.Frame) error {
	if len(f.Message) > proto.MaxAbortMessage {
		return pmix.Errorf(pmix.ErrBadParam, "abort message of %d bytes, at most %d", len(f.Message), proto.MaxAbortMessage)
	}
	if len(f.Procs) > proto.MaxAbortProcs {
		return pmix.Errorf(pmix.ErrBadParam, "abort of %d procs, at most %d", len(f.Procs), proto.MaxAbortProcs)
	}
	for _, p := range f.Procs {
		if !p.Rank.Valid() && p.Rank != pmix.RankWildcard {
			return pmix.Errorf(pmix.ErrBadParam, "abort of %v: want a rank or WILDCARD", p)
		}
		id, ns, qualified := cluster.Split(p.Nspace)
		if qualified {
			if err := id.Validate(); err != nil {
				return pmix.Errorf(pmix.ErrBadParam, "abort of %v: %v", p, err)
			}
		}
		if ns == "" || len(ns) > pmix.MaxNspaceLen {
			return pmix.Errorf(pmix.ErrBadParam, "abort of %v: nspace of %d bytes, want 1 to %d", p, len(ns), pmix.MaxNspaceLen)
		}
	}
	return nil
}

// aborted records a client's abort and hands it on: to the launch
// service when it started the process, else to the OnAbort functions, or,
// without any, as PMIX_ERR_PROC_REQUESTED_ABORT to its job.
func (a *Agent) aborted(e *clientEntry, req AbortRequest) error {
	a.mu.Lock()
	switch {
	case a.closed:
		a.mu.Unlock()
		return ErrClosed
	case a.expected[e.proc] != e:
		a.mu.Unlock()
		return pmix.Errorf(pmix.ErrInvalidOperation, "client %v was deregistered", e.proc)
	case e.state.Aborted:
		a.mu.Unlock()
		return nil // the first abort stands
	}
	e.state.Aborted, e.state.AbortStatus, e.state.AbortMessage = true, req.Status, req.Message
	t := a.terminationLocked(e, pmix.ErrProcRequestedAbort, req.Message)
	t.ExitCode, t.HasExitCode = int(req.Status), true
	a.mu.Unlock()
	if d := a.launcher.Load(); d != nil && d.Abort(req.Proc, req.Procs) {
		return nil // a process the launch service started: it ends it, and its end says why
	}
	if fs := a.abortFuncs.Load(); fs != nil {
		funcs := *fs
		if !a.goFunc(func() {
			for _, f := range funcs {
				f(req)
			}
		}) {
			return ErrClosed
		}
		return nil
	}
	return a.raise(event.TerminationEvent(t))
}

// lostWithoutFinalize is what detach reports when the connection cc of e
// ends: the termination to raise, if the rules above call for one.
func (a *Agent) lostWithoutFinalize(e *clientEntry, cc *clientConn) (event.Termination, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e.conn != cc || a.closed || a.isClosed() || a.expected[e.proc] != e || cc.dropped.Load() ||
		e.exitWatched || e.lostReported || e.state.Finalized || e.state.Aborted {
		return event.Termination{}, false
	}
	e.lostReported = true
	return a.terminationLocked(e, pmix.ErrProcTermWOSync, ""), true
}

// terminationLocked describes the end of e's process. Called with a.mu
// held.
func (a *Agent) terminationLocked(e *clientEntry, code pmix.Status, text string) event.Termination {
	return event.Termination{
		Proc: e.proc, Cluster: string(a.cfg.Cluster), Node: a.cfg.Node, Session: e.job.session,
		Code: code, Text: text, Incarnation: e.incarnation, At: time.Now(),
	}
}

// raise publishes an event as the host RM's (no sending client).
func (a *Agent) raise(m *event.Message) error {
	if a.isClosed() || a.router == nil {
		return ErrClosed
	}
	return a.router.Publish(m, nil)
}
