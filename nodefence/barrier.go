package nodefence

import (
	"sync"

	"github.com/pmixbus/pmixbus/pmix"
)

// A Barrier is the agent's side of one job's segment: it made it, hands
// its fd to the job's ranks, arrives on behalf of the clients that did not
// map it, and breaks it.
type Barrier struct {
	seg     *segment // platform-specific: the mapping and the fd
	partial bool     // FlagPartial

	mu       sync.Mutex
	closed   bool
	waiters  map[chan error]uint32 // arrivals on behalf, by the generation they wait to move
	watching bool
	watched  chan struct{} // closed when the watcher returns; nil while none runs
}

// New makes the segment of a barrier of n ranks; partial for a node's
// share of a job with ranks elsewhere too (FlagPartial).
//
// Errors: pmix.ErrBadParam for n outside 1 to MaxRanks;
// pmix.ErrNotSupported where there is no memfd (not Linux); the system's
// error making or mapping it.
func New(n int, partial bool) (*Barrier, error) {
	if n < 1 || n > MaxRanks {
		return nil, pmix.Errorf(pmix.ErrBadParam, "node fence of %d ranks, want 1 to %d", n, MaxRanks)
	}
	var flags uint32
	if partial {
		flags = FlagPartial
	}
	seg, err := newSegment(uint32(n), flags)
	if err != nil {
		return nil, err
	}
	return &Barrier{seg: seg, partial: partial, waiters: map[chan error]uint32{}}, nil
}

// Partial reports whether the barrier is a node's share of a larger job.
func (b *Barrier) Partial() bool { return b.partial }

// DupFD returns a duplicate of the segment's file descriptor, to hand to
// a rank, which the caller closes: a barrier closed meanwhile cannot
// have the caller pass on a number reused by another file. -1 after Close
// or when the barrier is broken (the ranks would not use it), or when dup
// fails.
func (b *Barrier) DupFD() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.seg.gen()%2 == 1 {
		return -1
	}
	return b.seg.dup()
}

// Broken reports whether the barrier broke (or closed): fences of the
// job then take the agent's path.
func (b *Barrier) Broken() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed || b.seg.gen()%2 == 1
}

// Arrive arrives at the barrier on a client's behalf. It returns ok
// false when the barrier is broken, and the fence takes the agent's path;
// otherwise a channel that receives nil once every rank arrived, or
// ErrBroken (with the break's status) when the barrier broke first. On a
// partial barrier, last is true for the node's last arrival: the caller
// runs the job's fence for the node's ranks and calls Complete with its
// result, which answers the channel.
func (b *Barrier) Arrive() (ch <-chan error, last, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, false, false
	}
	g := b.seg.gen()
	if g%2 == 1 {
		return nil, false, false
	}
	c := make(chan error, 1)
	if b.seg.addArrived(1) == b.seg.n {
		b.seg.storeArrived(0)
		if !b.partial {
			b.seg.addGen(2)
			b.seg.wake()
			c <- nil
			return c, false, true
		}
		last = true
	}
	b.waitLocked(c, g)
	return c, last, true
}

// Complete ends the round of a partial barrier whose last arrival ran
// the job's fence across agents: err nil moves the generation, releasing
// the node's ranks; an error breaks the barrier with its status, which
// the waiters return. For a barrier that broke meanwhile, a success
// still releases the round (every rank arrived).
func (b *Barrier) Complete(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if err != nil {
		b.breakLocked(pmix.StatusOf(err))
		return
	}
	b.seg.addGen(2)
	b.seg.wake()
}

// waitLocked has the watcher answer c once the generation moved from g.
func (b *Barrier) waitLocked(c chan error, g uint32) {
	b.waiters[c] = g
	if !b.watching {
		b.watching = true
		b.watched = make(chan struct{})
		go b.watch(b.watched)
	}
}

// watch waits on the futex while arrivals on behalf wait, and releases
// each once the generation moved from the one it arrived at.
func (b *Barrier) watch(done chan struct{}) {
	defer close(done)
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if b.closed {
			b.releaseLocked(func(uint32) bool { return true })
		} else {
			cur := b.seg.gen()
			b.releaseLocked(func(g uint32) bool { return g != cur })
		}
		if len(b.waiters) == 0 {
			b.watching = false
			return
		}
		cur := b.seg.gen()
		b.mu.Unlock()
		b.seg.wait(cur) // bounded: the loop checks closed now and then
		b.mu.Lock()
	}
}

// releaseLocked answers the waiters whose generation moved (moved(g)).
func (b *Barrier) releaseLocked(moved func(g uint32) bool) {
	cur := uint32(1)
	if !b.closed {
		cur = b.seg.gen()
	}
	for ch, g := range b.waiters {
		if !moved(g) {
			continue
		}
		delete(b.waiters, ch)
		if !b.closed && cur-g >= 2 {
			ch <- nil
			continue
		}
		ch <- b.brokenErr()
	}
}

// brokenErr is ErrBroken with the break's status, when a valid one was
// stored.
func (b *Barrier) brokenErr() error {
	if b.closed {
		return ErrBroken
	}
	st := pmix.Status(b.seg.status())
	if st >= 0 || st == ErrBroken.Status {
		return ErrBroken
	}
	return pmix.NewCodedError(st, ErrBroken.Code, "the job's node barrier broke: "+st.String())
}

// Break breaks the barrier, for good: every waiter wakes with the status
// st (the first break's is kept), and fences of the job take the agent's
// path. Breaking a broken or closed barrier does nothing.
func (b *Barrier) Break(st pmix.Status) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.breakLocked(st)
}

func (b *Barrier) breakLocked(st pmix.Status) {
	if b.closed || b.seg.gen()%2 == 1 {
		return
	}
	b.seg.casStatus(int32(st))
	b.seg.addGen(1)
	b.seg.wake()
}

// Close breaks the barrier, answers the arrivals still waiting with
// ErrBroken, and unmaps and closes the segment (the ranks keep their own
// mappings). Safe to call twice.
func (b *Barrier) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.breakLocked(ErrBroken.Status)
	b.closed = true
	b.releaseLocked(func(uint32) bool { return true })
	watched := b.watched
	b.mu.Unlock()
	if watched != nil {
		<-watched // it touches the mapping no more
	}
	b.seg.close()
}
