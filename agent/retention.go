package agent

import (
	"context"

	"github.com/pmixbus/pmixbus/pmix"
)

// The agent's side of retention (router.Retention, docs/cache.md "Job
// events"): it tells the service of its jobs and of its clients' lives, in
// the critical sections where they change. A client's attachment is named
// by its connection.

// retainJobLocked starts tracking retention for job j, if it has procs on
// this node; the caller then calls ensureRetention.
func (a *Agent) retainJobLocked(j *job) {
	local := j.ranksOn(a.cfg.Node)
	attached := map[pmix.Rank]any{}
	for _, r := range local {
		if e := a.expected[pmix.Proc{Nspace: j.nspace, Rank: r}]; e != nil && e.conn != nil {
			attached[r] = e.conn
		}
	}
	a.retention.RetainJob(j.nspace, j.session, local, attached)
}

// clientAttachedLocked: client p attached; it is to be stamped.
func (a *Agent) clientAttachedLocked(p pmix.Proc) {
	if e := a.expected[p]; e != nil && e.conn != nil {
		a.retention.ClientAttached(p, e.conn)
	}
}

func (a *Agent) clientRegisteredLocked(p pmix.Proc) { a.retention.ClientRegistered(p) }
func (a *Agent) clientDetachedLocked(p pmix.Proc)   { a.retention.ClientDetached(p) }
func (a *Agent) clientGoneLocked(p pmix.Proc)       { a.retention.ClientGone(p) }
func (a *Agent) stopRetainingLocked(nspace string)  { a.retention.StopJob(nspace) }

func (a *Agent) ensureRetention(ctx context.Context, nspace string) {
	a.retention.Ensure(ctx, nspace)
}

// awaitStamp waits until client p, attached on cc just now, has its stamp
// (router.Retention.AwaitStamp): the hello reply waits for it.
func (a *Agent) awaitStamp(p pmix.Proc, cc *clientConn) { a.retention.AwaitStamp(p, cc) }
