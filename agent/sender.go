package agent

import (
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// sender writes one client's frames from a goroutine of its own, so that a
// client that stops reading delays nobody but itself: the dispatch
// goroutine and the client's other work only queue frames. What queues
// while a write is in progress goes out in the next write, so a burst
// costs a write per batch; cork holds frames back until uncork, so that a
// batch of events dispatched together goes out together. Invocations for a
// client of protocol version 2 (sendInvoke) join the invoke-batch frame
// open at the end of the queue, which any other frame closes: what is
// queued together is one frame as well as one write.
//
// The queue is a buffer borrowed from a pool while it holds frames, and
// given back once written, so that of many attached clients only those
// with frames waiting hold one.
//
// A client that reads slowly is let fall behind; one that stops reading is
// cut off: with more than its limit queued, once its socket has taken
// nothing for the stall time (or at once past four times the limit, which
// bounds the memory a client may hold). One error frame saying why is
// queued behind what it has not read, the client is detached at once (its
// chains move on, the others are not delayed), and its socket closes once
// that frame is written or the write times out. Frames sent after that
// fail at once.
type sender struct {
	c       net.Conn
	raw     syscall.RawConn // c's, for a write that does not wait (nil: c has none)
	limit   int             // bytes queued beyond which a stalled client is cut off
	stall   time.Duration   // how long a write may make no progress, past the limit
	timeout time.Duration   // bounds each write
	abort   <-chan struct{} // closed: finish waits no more (the agent shuts down)

	mu      sync.Mutex
	buf     []byte      // queued, not yet written
	held    *[]byte     // buf's, from queueBufs; nil while nothing is queued
	batch   proto.Batch // the invoke-batch frame open at buf's end
	corked  int
	err     error // sticky: the client was cut off, or the stream broke
	closing bool  // write what is queued, then stop
	running bool  // run was started
	// busy: a write is in progress, run's or a direct one (queue).
	busy bool
	// writingSince is when the write in progress began (zero: none);
	// inflight the bytes run took that the socket has not yet.
	writingSince time.Time
	inflight     int
	stallCheck   *time.Timer // armed while over the limit
	// progress is closed each time the socket takes a chunk, for
	// waitBelow, which makes it: nil while nobody waits, so a write costs
	// no channel.
	progress chan struct{}
	wake     chan struct{}
	done     chan struct{} // closed when run returns

	cutOff     func(error) // see start
	cutOffOnce sync.Once
}

// queueBufs lends senders their queues. A queue grown past maxPooledQueue
// (a burst to a slow client) is left to the collector.
var queueBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledQueue = 256 << 10

// borrowLocked makes sure buf is a borrowed buffer. Called with mu held.
func (s *sender) borrowLocked() {
	if s.held == nil {
		s.held = queueBufs.Get().(*[]byte)
		s.buf = (*s.held)[:0]
	}
}

func newSender(c net.Conn, limit int, stall, timeout time.Duration, abort <-chan struct{}) *sender {
	s := &sender{c: c, limit: limit, stall: stall, timeout: timeout, abort: abort, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if sc, ok := c.(syscall.Conn); ok {
		s.raw, _ = sc.SyscallConn()
	}
	return s
}

// send queues f. It fails once the client was cut off or its stream broke.
func (s *sender) send(f *proto.Frame) error {
	return s.queue(func(b []byte) ([]byte, error) {
		s.batch.Close(b)
		return proto.AppendFrame(b, f)
	})
}

// sendInvoke queues inv in an invoke-batch frame, with the invocations
// queued next to it (protocol version 2); it fails as send does.
func (s *sender) sendInvoke(inv *proto.Invoke) error {
	return s.queue(func(b []byte) ([]byte, error) { return s.batch.AppendInvoke(b, inv) })
}

// queue appends to the queue with add, under mu.
func (s *sender) queue(add func([]byte) ([]byte, error)) error {
	s.mu.Lock()
	if s.err != nil || s.closing {
		err := s.err
		s.mu.Unlock()
		if err == nil {
			err = net.ErrClosed
		}
		return err
	}
	s.borrowLocked()
	var err error
	s.buf, err = add(s.buf)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	if s.queuedLocked() > s.limit {
		err = s.overLimitLocked(time.Now())
	}
	corked := s.corked > 0 && err == nil
	if err == nil && s.directLocked() {
		// Nothing is being written: the caller writes the queue
		// itself, as far as the socket takes it without waiting, and
		// leaves the rest to run. One thread wake-up less for a frame
		// that comes alone (a reply; a batch's frames are corked).
		out, held := s.takeDirectLocked()
		s.mu.Unlock()
		s.writeDirect(out, held)
		return nil
	}
	s.mu.Unlock()
	if !corked {
		s.kick()
	}
	if err != nil {
		s.stop(err)
	}
	return err
}

// writeDirect writes out, which queue took from the queue (held is its
// buffer), as far as the socket takes it at once; what remains goes back
// to the head of the queue for run. A write error stops the client, as
// run's does.
func (s *sender) writeDirect(out []byte, held *[]byte) {
	n, err := s.tryWrite(out)
	s.mu.Lock()
	s.busy = false
	if n > 0 && s.progress != nil {
		close(s.progress)
		s.progress = nil
	}
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
		s.stop(err)
		return
	}
	switch {
	case n == len(out):
		if held != nil && cap(out) <= maxPooledQueue {
			*held = out[:0]
			queueBufs.Put(held)
		}
	case len(s.buf) == 0:
		if s.held != nil { // an empty borrowed buffer: back to the pool
			queueBufs.Put(s.held)
		}
		s.buf, s.held = out[n:], held
	default: // frames were queued meanwhile: the rest goes before them
		s.batch.Close(s.buf)
		rest := make([]byte, 0, len(out)-n+len(s.buf))
		rest = append(append(rest, out[n:]...), s.buf...)
		if s.held != nil && cap(s.buf) <= maxPooledQueue {
			*s.held = s.buf[:0]
			queueBufs.Put(s.held)
		}
		if held == nil {
			held = new([]byte)
		}
		s.buf, s.held = rest, held // held: the queue is borrowed (borrowLocked)
	}
	more := (len(s.buf) > 0 && s.corked == 0) || s.closing
	s.mu.Unlock()
	if more {
		s.kick()
	}
}

// tryWrite writes what of b the socket takes without waiting.
func (s *sender) tryWrite(b []byte) (int, error) {
	var n int
	var err error
	if cerr := s.raw.Write(func(fd uintptr) bool {
		n, err = unix.Write(int(fd), b)
		return true // never wait for room: run does
	}); cerr != nil {
		return 0, cerr
	}
	switch {
	case err == unix.EAGAIN:
		return 0, nil
	case err != nil:
		return 0, err
	}
	return n, nil
}

// overLimitLocked decides about a client with more than its limit queued:
// cut off when its socket has taken nothing for the stall time or the
// queue passed four times the limit, else checked again when the stall
// time would be up. It returns the reason it was cut off, if it was.
func (s *sender) overLimitLocked(now time.Time) error {
	stalled := !s.writingSince.IsZero() && now.Sub(s.writingSince) >= s.stall
	if !stalled && s.queuedLocked() <= 4*s.limit {
		if s.stallCheck == nil {
			wait := s.stall
			if !s.writingSince.IsZero() {
				wait -= now.Sub(s.writingSince)
			}
			s.stallCheck = time.AfterFunc(wait, s.checkStall)
		}
		return nil
	}
	s.giveUpLocked(pmix.Errorf(pmix.ErrOutOfResource, "client not reading: %d bytes of frames queued for it and none taken for %v (the limit is %d bytes)",
		s.queuedLocked(), now.Sub(s.writingSince).Round(time.Millisecond), s.limit))
	return s.err
}

// giveUpLocked cuts the client off for why: one error frame saying so is
// queued behind what it has not read, and nothing after it.
func (s *sender) giveUpLocked(why error) {
	s.err = why
	bye := &proto.Frame{Type: proto.TypeError}
	bye.SetErr(why)
	s.borrowLocked()
	s.batch.Close(s.buf)
	s.buf, _ = proto.AppendFrame(s.buf, bye)
	s.closing = true
}

// cut cuts the client off for why, as the queue limit does, unless it is
// already going: for a limit others keep (its backlog of events, router.Window).
func (s *sender) cut(why error) {
	s.mu.Lock()
	if s.err != nil || s.closing {
		s.mu.Unlock()
		return
	}
	s.giveUpLocked(why)
	s.mu.Unlock()
	s.kick()
	s.stop(why)
}

// queuedLocked is what is queued for the client and not yet taken by its
// socket.
func (s *sender) queuedLocked() int { return len(s.buf) + s.inflight }

// checkStall looks again at a client that was over its limit.
func (s *sender) checkStall() {
	s.mu.Lock()
	s.stallCheck = nil
	var err error
	if s.err == nil && !s.closing && s.queuedLocked() > s.limit {
		err = s.overLimitLocked(time.Now())
	}
	s.mu.Unlock()
	if err != nil {
		s.kick()
		s.stop(err)
	}
}

// writeChunk bounds one write call, so that progress is seen per chunk: a
// slow reader keeps taking chunks, a stalled one leaves one waiting.
const writeChunk = 64 << 10

// write writes out in chunks, each bounded by the write timeout, noting
// when the one in progress began.
func (s *sender) write(out []byte) error {
	s.mu.Lock()
	s.inflight = len(out)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.writingSince, s.inflight = time.Time{}, 0
		s.mu.Unlock()
	}()
	for len(out) > 0 {
		n := min(len(out), writeChunk)
		now := time.Now()
		s.mu.Lock()
		s.writingSince = now
		s.mu.Unlock()
		_ = s.c.SetWriteDeadline(now.Add(s.timeout))
		if _, err := s.c.Write(out[:n]); err != nil {
			return err
		}
		out = out[n:]
		s.mu.Lock()
		s.inflight = len(out)
		if s.progress != nil {
			close(s.progress)
			s.progress = nil
		}
		s.mu.Unlock()
	}
	return nil
}

// waitBelow waits until at most n bytes are queued for the client, so a
// producer that can wait (an IOF pull) is paced by the client's reading
// instead of cutting it off. It returns false when stop is closed first;
// true at once when the client is gone.
func (s *sender) waitBelow(n int, stop <-chan struct{}) bool {
	for {
		s.mu.Lock()
		if s.queuedLocked() <= n || s.err != nil || s.closing {
			s.mu.Unlock()
			return true
		}
		if s.progress == nil {
			s.progress = make(chan struct{})
		}
		progress := s.progress
		s.mu.Unlock()
		select {
		case <-progress:
		case <-stop:
			return false
		}
	}
}

// stop reports, once, why the client must go.
func (s *sender) stop(why error) {
	s.cutOffOnce.Do(func() {
		if s.cutOff != nil {
			s.cutOff(why)
		}
	})
}

func (s *sender) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *sender) cork() {
	s.mu.Lock()
	s.corked++
	s.mu.Unlock()
}

// uncork lets the frames held back go: written by run, or with direct by
// the caller itself as far as the socket takes them at once (writeDirect)
// when nothing is being written — for a caller that uncorks few clients;
// one that uncorks many leaves the writes to their senders, side by side.
func (s *sender) uncork(direct bool) {
	s.mu.Lock()
	if s.corked > 0 {
		s.corked--
	}
	ready := s.corked == 0 && len(s.buf) > 0
	if ready && direct && s.directLocked() {
		out, held := s.takeDirectLocked()
		s.mu.Unlock()
		s.writeDirect(out, held)
		return
	}
	s.mu.Unlock()
	if ready {
		s.kick()
	}
}

// directLocked reports whether the caller may write the queue itself:
// nothing is being written, nor held back, and run is there for the rest.
func (s *sender) directLocked() bool {
	return s.raw != nil && s.running && !s.busy && !s.closing && s.err == nil && s.corked == 0
}

// takeDirectLocked takes the queue for a direct write.
func (s *sender) takeDirectLocked() (out []byte, held *[]byte) {
	s.busy = true
	s.batch.Close(s.buf)
	out, held = s.buf, s.held
	s.buf, s.held = nil, nil
	return out, held
}

// start runs the writing loop with goFunc, and reports whether it runs.
// cutOff is called once, and must not block, when the client must go: it
// passed its queue limit, or a write failed; nil when the sender finished.
func (s *sender) start(goFunc func(func()) bool, cutOff func(error)) bool {
	s.mu.Lock()
	s.running = true
	s.cutOff = cutOff
	s.mu.Unlock()
	if goFunc(s.run) {
		return true
	}
	s.mu.Lock()
	s.running = false
	s.mu.Unlock()
	return false
}

// finish queues a last frame (nil for none), lets run write what is
// queued within grace, and stops it.
func (s *sender) finish(last *proto.Frame, grace time.Duration) {
	s.mu.Lock()
	if last != nil && s.err == nil && !s.closing {
		s.borrowLocked()
		s.batch.Close(s.buf)
		s.buf, _ = proto.AppendFrame(s.buf, last)
	}
	s.closing = true
	running := s.running
	if s.stallCheck != nil {
		s.stallCheck.Stop()
		s.stallCheck = nil
	}
	s.mu.Unlock()
	if !running {
		return
	}
	s.kick()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-s.done:
		return
	case <-t.C:
	case <-s.abort:
	}
	_ = s.c.SetWriteDeadline(time.Now()) // run's write fails now
	<-s.done
}

// run writes what is queued until the queue is closed and written, or a
// write fails; then it stops the client with the reason it was cut off or
// the write error (nil when it finished cleanly).
func (s *sender) run() {
	defer close(s.done)
	for {
		<-s.wake
		for {
			s.mu.Lock()
			if s.busy {
				s.mu.Unlock()
				break // a direct write (queue): it kicks when done
			}
			s.batch.Close(s.buf)
			out, held, closing, why := s.buf, s.held, s.closing, s.err
			if len(out) > 0 {
				s.buf, s.held = nil, nil // out is the run's until written
				s.busy = true
				// Counted queued from now (queuedLocked): a stall check
				// between here and write's first chunk saw nothing
				// queued, and was not armed again.
				s.inflight = len(out)
			}
			s.mu.Unlock()
			if len(out) == 0 {
				if closing {
					s.stop(why)
					return
				}
				break
			}
			err := s.write(out)
			if held != nil && cap(out) <= maxPooledQueue {
				*held = out[:0]
				queueBufs.Put(held)
			}
			s.mu.Lock()
			s.busy = false
			if err != nil && s.err == nil {
				s.err = err
			}
			s.mu.Unlock()
			if err != nil {
				s.stop(err)
				return
			}
		}
	}
}
