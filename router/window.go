package router

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
)

// Window bounds the chains a client has in flight. Started at once,
// every (event, client) chain of a burst is live together — a chain, its
// step and its queued frame each, tens of thousands under fan-out — and the
// collector spends a third of the run marking them. So a client's events
// beyond its window wait in a backlog, in the order they arrived, each a
// snapshot of its chain (bus.Snapshot: taken on arrival, as a chain started
// then would have it, so registrations made or released meanwhile do not
// join it) and the event it shares with the other clients; they start as
// the client's earlier chains end, on the goroutine that ended them. Only
// the dispatch goroutine adds to the backlog (wait), and it starts a chain
// directly only while nothing waits (open), so chains start, and the first
// handler of each is invoked, in the order the events arrived.
//
// The backlog counts against the client's queue limit
// (Config.ClientQueueLimit): with a window, what queues for a client that
// does not keep up is the backlog, not frames. Past the limit, a client
// none of whose chains ended for the stall time is cut off, and at once
// past four times the limit, as for frames (sender). A client that goes
// drops its backlog; each event dropped ends with an outcome whose status
// is PMIX_ERR_INIT, as a chain of a closed registry does.
type Window struct {
	size int32 // chains in flight at most
	// limit and stall: the cut-off (see above); cut cuts the client off
	// (must not block). Set before use; limit 0: never.
	limit int
	stall time.Duration
	cut   func(error)

	n      atomic.Int32 // chains started and not ended
	queued atomic.Int32 // events waiting, or being started from the backlog
	// ended counts the chains that ended while events waited: the
	// progress the stall check looks for.
	ended atomic.Uint64

	mu       sync.Mutex
	backlog  backlog
	weight   int  // estimated bytes of the waiting events' invocations
	draining bool // a goroutine is starting chains from the backlog
	closed   bool
	check    *time.Timer // the stall check, armed while over the limit
	endedAt  uint64      // ended when check was armed
	// The client, as its events found it: the same for every event.
	proc pmix.Proc
	reg  *bus.Registry
}

// DefaultWindow is a window's usual size: chains in flight per client.
const DefaultWindow = 256

// NewWindow returns a client's window of size chains in flight (at least
// 1), whose backlog beyond limit bytes (0: none) cuts the client off when
// none of its chains ended for stall, or at once past four times limit;
// cut is how (it must not block).
func NewWindow(size, limit int, stall time.Duration, cut func(error)) *Window {
	return &Window{size: int32(max(size, 1)), limit: limit, stall: stall, cut: cut}
}

// waitingChain is an event waiting in a client's backlog: 48 bytes.
type waitingChain struct {
	d    *delivery
	snap bus.Snapshot
}

// backlog is a FIFO of waiting events in fixed chunks, which a burst
// fills and draining empties without ever copying an entry; emptied
// chunks go back to a pool shared by all clients.
type backlog struct {
	head, tail *backlogChunk
	hi, ti     int // next to take in head, next free in tail
	n          int
}

const backlogChunkLen = 128

type backlogChunk struct {
	e    [backlogChunkLen]waitingChain
	next *backlogChunk
}

var backlogChunks = sync.Pool{New: func() any { return new(backlogChunk) }}

func (b *backlog) push(c waitingChain) {
	if b.tail == nil || b.ti == backlogChunkLen {
		k := backlogChunks.Get().(*backlogChunk)
		if b.tail == nil {
			b.head, b.hi = k, 0
		} else {
			b.tail.next = k
		}
		b.tail, b.ti = k, 0
	}
	b.tail.e[b.ti] = c
	b.ti++
	b.n++
}

// pop takes the oldest entry; the backlog must not be empty.
func (b *backlog) pop() waitingChain {
	c := b.head.e[b.hi]
	b.head.e[b.hi] = waitingChain{}
	b.hi++
	b.n--
	if b.hi == backlogChunkLen || b.n == 0 {
		k := b.head
		b.head, b.hi = k.next, 0
		k.next = nil
		backlogChunks.Put(k)
		if b.head == nil || b.n == 0 {
			*b = backlog{}
		}
	}
	return c
}

// invokeOverhead estimates what an invocation adds to its event's
// encoding (sequence, handler id and name, results), and unknownEventSize
// an event whose encoding's size is unknown.
const (
	invokeOverhead   = 64
	unknownEventSize = 256
)

// open reports whether a chain may start now: nothing waits and the
// window has room. Only the dispatch goroutine asks: events wait only
// when it adds them, so nothing can start waiting meanwhile.
func (w *Window) open() bool {
	return w.queued.Load() == 0 && w.n.Load() < w.size
}

// started counts a chain started directly.
func (w *Window) started() { w.n.Add(1) }

// end counts a chain that ended, and starts waiting ones the window now
// has room for.
func (w *Window) end() {
	w.n.Add(-1)
	if w.queued.Load() > 0 {
		w.ended.Add(1)
		w.drain()
	}
}

// wait adds an event to the backlog, or drops it if the client is gone,
// and starts what the window has room for.
func (w *Window) wait(c waitingChain, proc pmix.Proc, reg *bus.Registry) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		c.d.drop(proc)
		return
	}
	w.proc, w.reg = proc, reg
	w.backlog.push(c)
	w.queued.Add(1)
	w.weight += c.d.weight()
	var cut error
	if w.limit > 0 && w.weight > w.limit {
		cut = w.overLimitLocked()
	}
	w.mu.Unlock()
	if cut != nil {
		w.cut(cut)
		return
	}
	w.drain()
}

// overLimitLocked is called with the backlog over the limit: the client
// is cut off at once past four times it, else looked at again after the
// stall time. It returns why the client must go, if it must.
func (w *Window) overLimitLocked() error {
	if w.weight > 4*w.limit {
		return pmix.Errorf(pmix.ErrOutOfResource, "client not reading: %d events (about %d bytes of invocations) wait for it, past four times the limit of %d bytes",
			w.backlog.n, w.weight, w.limit)
	}
	if w.check == nil {
		w.endedAt = w.ended.Load()
		w.check = time.AfterFunc(w.stall, w.checkStall)
	}
	return nil
}

// checkStall looks again at a backlog that was over the limit: the client
// goes if none of its chains ended since.
func (w *Window) checkStall() {
	w.mu.Lock()
	w.check = nil
	if w.closed || w.weight <= w.limit {
		w.mu.Unlock()
		return
	}
	if e := w.ended.Load(); e != w.endedAt {
		w.endedAt = e
		w.check = time.AfterFunc(w.stall, w.checkStall)
		w.mu.Unlock()
		return
	}
	err := pmix.Errorf(pmix.ErrOutOfResource, "client not reading: %d events (about %d bytes of invocations) wait for it and none of its handlers completed for %v (the limit is %d bytes)",
		w.backlog.n, w.weight, w.stall, w.limit)
	w.mu.Unlock()
	w.cut(err)
}

// drain starts waiting events while the window has room. One goroutine
// drains at a time (others return: the one draining looks again before it
// stops), and it starts each chain outside the lock, so a chain that ends
// at once (a client gone) can end, and call drain, from within.
func (w *Window) drain() {
	w.mu.Lock()
	if w.draining {
		w.mu.Unlock()
		return
	}
	w.draining = true
	for w.backlog.n > 0 && w.n.Load() < w.size {
		c := w.backlog.pop()
		proc, reg := w.proc, w.reg
		w.weight -= c.d.weight()
		w.n.Add(1)
		w.mu.Unlock()
		c.start(w, proc, reg)
		w.queued.Add(-1) // after the start: open stays false until it is done
		w.mu.Lock()
	}
	w.draining = false
	w.mu.Unlock()
}

// start starts a waiting event's chain, counted in the window already.
func (c *waitingChain) start(w *Window, proc pmix.Proc, reg *bus.Registry) {
	ch := reg.StartFrom(c.d.ev, c.snap)
	if ch == nil { // closed: the client is going
		w.n.Add(-1)
		c.d.drop(proc)
		return
	}
	ch.Run(c.d.done(proc, w))
}

// Close drops the backlog of a client that goes; each event dropped is
// reported ended (PMIX_ERR_INIT).
func (w *Window) Close() {
	w.mu.Lock()
	w.closed = true
	var dropped []waitingChain
	for w.backlog.n > 0 {
		dropped = append(dropped, w.backlog.pop())
	}
	w.weight = 0
	if w.check != nil {
		w.check.Stop()
		w.check = nil
	}
	proc := w.proc
	w.mu.Unlock()
	w.queued.Add(-int32(len(dropped)))
	for i := range dropped {
		dropped[i].d.drop(proc)
	}
}

// Waiting returns the events waiting in the backlog.
func (w *Window) Waiting() int { return int(w.queued.Load()) }
