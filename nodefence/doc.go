// Package nodefence is the barrier of a job's ranks on one node: a small
// shared-memory segment that the ranks' C library
// (libpmix.so.2, cabi/src/nodefence.c) arrives at with atomic operations
// and waits on with a futex, so that a PMIx_Fence without data among them
// makes no round trip to the agent.
//
//	b, err := nodefence.New(4, false)   // the job's 4 ranks, all on this node
//	fd := b.DupFD()                     // handed to a rank with its hello reply (SCM_RIGHTS), then closed
//	ch, last, ok := b.Arrive()          // a fence that reached the agent over the socket
//	if !ok { /* broken: the fence takes the agent's path */ }
//	if last { b.Complete(err) }         // partial barriers: after the job's fence across agents
//	err = <-ch                          // released, or broken while waiting
//	b.Break(pmix.ErrProcTermWOSync)     // a rank of the job left or died
//	b.Close()
//
// # The segment
//
// One page of a sealed memfd (it can neither shrink nor grow, so no rank
// can make the agent's mapping fault), laid out as the Off constants
// say: a header (magic, version, the rank count n, the size, the status
// of a break, flags), then the generation — the futex word — and the
// arrival counter, each on a cache line of its own. An arrival reads the generation g; if g is
// odd the barrier is broken and the fence takes the agent's path. Else it
// adds one to the counter; the n-th resets the counter, adds 2 to the
// generation and wakes every waiter; the others wait (a short spin, then
// FUTEX_WAIT) until the generation is no longer g. The fence succeeded if
// the generation moved by 2 or more; if it moved by 1 a break came first,
// and the waiter returns the status stored with it.
//
// A job with ranks on other nodes too has a partial barrier of its ranks
// on this node (FlagPartial): the last of them to arrive does not move
// the generation but has the agent run the job's fence across agents for
// all of them, after which the agent moves it (Complete), or breaks the
// barrier with the fence's failure.
//
// A break adds 1 to the generation (odd: broken for good) and wakes every
// waiter: the agent breaks a job's barrier when one of its ranks
// detaches or terminates, and each rank's library when it loses its
// agent. From then on every fence of the job takes the agent's path,
// which knows of the death.
//
// Which fences take the barrier is a function of the call's arguments
// alone (Eligible), which every participant passes alike, so that all
// take the same path. A fence that arrives over the socket from a client
// that did not map the segment (the Go client, a client in another
// language, a rank whose segment failed its checks) is arrived at by the
// agent on its behalf.
//
// # Concurrency
//
// A Barrier is safe for concurrent use. Everything read from the segment
// is hostile (any rank of the job may write it): a garbled counter or
// generation can stall or break its own job's barrier, never the agent.
package nodefence
