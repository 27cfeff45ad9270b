package client

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// Abort asks for this process's job, or procs, to be aborted, as
// PMIx_Abort does: status is the exit status asked for, msg says why
// (at most proto.MaxAbortMessage bytes), and procs names the procs to
// abort (nil: every process of the job; "cluster:nspace" for another
// cluster's). It returns once the agent has recorded the request and
// handed it to its host: a process the launch service started is then
// killed by it; otherwise, if the host takes no abort requests, the agent
// raises PMIX_ERR_PROC_REQUESTED_ABORT for this process to its job. The
// process should exit after Abort returns, without Finalize. Only the
// first Abort of a process counts; later ones return nil.
//
// Errors: pmix.ErrBadParam for a message too long, more than
// proto.MaxAbortProcs procs, or a proc with an invalid rank or nspace;
// ErrLostConnection; pmix.ErrTimeout if ctx ends before the agent
// answers; pmix.ErrInvalidOperation (agent.ErrClosed) if the agent is
// shutting down; pmix.ErrUnreach if it could not publish the event.
func (c *Client) Abort(ctx context.Context, status pmix.Status, msg string, procs []pmix.Proc) error {
	_, err := c.request(ctx, &proto.Frame{Type: proto.TypeAbort, Status: status, Message: msg, Procs: procs})
	return err
}

// The 2016-04-07 minutes let a handler ask for an abort by notifying
// PMIX_ABORT (pmix.EventAbortRequested): "Once the current event callback
// stack has completed, the new PMIX_ABORT event will be triggered". A
// PROC_LOCAL notification would run the abort chain at once, in the middle
// of the chain whose handler asked; so while a handler of this process is
// running, NotifyEvent turns it into the engine's deferred abort
// (pmix.KeyEventAbortRequested among that handler's results), which the
// registry running the chain — the agent's for agent-invoked handlers, the
// client's own for PROC_LOCAL and internal events — raises once the chain
// has ended.

// invocation is one call of a handler of this process that has not
// completed yet.
type invocation struct {
	local   bus.ID        // its registration in the client's registry
	started time.Duration // since epoch, on the monotonic clock
	abort   bool          // an abort was asked for meanwhile (guarded by Client.mu)
	// completed: its done was called (delivery.complete ignores the
	// later calls). Here, not in delivery, to fill the padding.
	completed atomic.Bool
	// prev, next: its neighbours in Client.running; nil once out of it.
	prev, next *invocation
}

// epoch is what invocation start times count from.
var epoch = time.Now()

// invocations is a list of invocations, a ring through a sentinel: every
// delivery joins and leaves it, which costs no hashing and no map growth.
// The zero list is empty.
type invocations struct {
	ring invocation
	n    int
}

func (l *invocations) add(inv *invocation) {
	if l.ring.next == nil {
		l.ring.prev, l.ring.next = &l.ring, &l.ring
	}
	inv.prev, inv.next = l.ring.prev, &l.ring
	inv.prev.next, l.ring.prev = inv, inv
	l.n++
}

// remove takes inv out of the list, if it is in it.
func (l *invocations) remove(inv *invocation) {
	if inv.next == nil {
		return
	}
	inv.prev.next, inv.next.prev = inv.next, inv.prev
	inv.prev, inv.next = nil, nil
	l.n--
}

// all yields the invocations in the list; the one yielded may be removed.
func (l *invocations) all(yield func(*invocation) bool) {
	if l.ring.next == nil {
		return
	}
	for inv := l.ring.next; inv != &l.ring; {
		next := inv.next
		if !yield(inv) {
			return
		}
		inv = next
	}
}

// minPrune is how many invocations may be recorded before begin looks for
// stale ones.
const minPrune = 64

// begin records in inv that the handler of local registration id is
// being called.
func (c *Client) begin(inv *invocation, id bus.ID) {
	*inv = invocation{local: id, started: time.Since(epoch)}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running.add(inv)
	if c.running.n >= c.pruneAt {
		// Handlers that never complete leave entries behind; drop those
		// their chains have passed over.
		c.pruneLocked(inv.started)
		c.pruneAt = max(minPrune, 2*c.running.n)
	}
}

// settle records that inv completed with results, and adds the abort
// request to them if one was asked for while it ran.
func (c *Client) settle(inv *invocation, results []pmix.Info) []pmix.Info {
	c.mu.Lock()
	c.running.remove(inv)
	abort := inv.abort
	c.mu.Unlock()
	if abort {
		results = append(slices.Clip(results), pmix.NewInfo(pmix.KeyEventAbortRequested, pmix.Bool(true)))
	}
	return results
}

// tracked wraps a handler of the client's own registry so that its
// invocations are recorded like the agent's.
func (c *Client) tracked(h bus.Handler) bus.Handler {
	return func(call *bus.Call, done bus.Done) {
		inv := new(invocation)
		c.begin(inv, call.ID)
		h(call, func(status pmix.Status, results []pmix.Info) { done(status, c.settle(inv, results)) })
	}
}

// deferAbort has every chain with a handler of this process still running
// raise the abort event when it ends, and reports whether there was one.
// The client cannot tell which running handler asked, so when several run
// (handlers of concurrent chains that have not completed), each chain
// raises it; handlers passed over by their timeout are not running.
func (c *Client) deferAbort() bool {
	now := time.Since(epoch)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pruneLocked(now)
	for inv := range c.running.all {
		inv.abort = true
	}
	return c.running.n > 0
}

// pruneLocked forgets invocations older than their handler's timeout: the
// chain has passed them over (the agent's timeout is assumed to be the
// client's default, bus.DefaultHandlerTimeout unless WithHandlerTimeout
// says otherwise). now is a time since epoch.
func (c *Client) pruneLocked(now time.Duration) {
	for inv := range c.running.all {
		d := c.handlerTimeout
		if g, ok := c.local.Lookup(inv.local); ok && g.Timeout > 0 {
			d = g.Timeout
		}
		if d > 0 && now-inv.started >= d {
			c.running.remove(inv)
		}
	}
}
