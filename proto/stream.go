package proto

import (
	"encoding/binary"
	"errors"
	"io"
	"sync"

	"github.com/pmixbus/pmixbus/pmix"
)

// Reader reads frames from a stream. It holds no large buffer while the
// stream is idle, so that an agent with many attached clients does not
// keep a read buffer for each: it waits for data with a small buffer of
// its own, and while frames keep coming it borrows a larger one from a pool
// that all Readers share, or, for a frame larger than that, allocates one
// just for the frame. Whatever it borrowed goes back once every byte read
// is consumed. Decoded frames copy what they keep, so no buffer leaks into
// them. A Reader is not safe for concurrent use.
type Reader struct {
	r   io.Reader
	max int
	err error // from a read that also returned data; reported once, when more is needed

	// buf[start:end] is read and not yet consumed. buf is small, the
	// borrowed buffer, or one made for a large frame.
	buf        []byte
	start, end int
	borrowed   *[]byte
	small      [smallRead]byte
}

// smallRead is the buffer a Reader waits for data with: a few typical
// frames (an invocation, its completion, a reply).
const smallRead = 512

// poolRead is the size of the buffers Readers borrow while busy; a frame
// larger than that is read into a buffer of its own.
const poolRead = 64 << 10

var readBufs = sync.Pool{New: func() any {
	b := make([]byte, poolRead)
	return &b
}}

// NewReader returns a Reader refusing bodies over maxBody bytes.
func NewReader(r io.Reader, maxBody int) *Reader {
	rd := &Reader{r: r, max: maxBody}
	rd.buf = rd.small[:]
	return rd
}

// ReadFrame reads the next frame; errors are those of the package-level
// ReadFrame.
func (r *Reader) ReadFrame() (*Frame, error) {
	if err := r.fill(4); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(r.buf[r.start:])
	if uint64(n) > uint64(r.max) {
		return nil, pmix.Errorf(ErrFrameTooLarge, "frame of %d bytes exceeds the limit of %d", n, r.max)
	}
	size := 4 + int(n)
	if err := r.fill(size); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	body := r.buf[r.start+4 : r.start+size]
	r.start += size
	f, err := Unmarshal(body)
	if r.start == r.end {
		r.release()
	}
	return f, err
}

// fill reads until need bytes are buffered. It returns io.EOF when the
// stream ends before any byte of them, io.ErrUnexpectedEOF after some.
func (r *Reader) fill(need int) error {
	for empty := 0; r.end-r.start < need; {
		if empty == 100 { // as bufio does, for a reader that breaks the io.Reader contract
			return io.ErrNoProgress
		}
		if r.err != nil {
			err := r.err
			r.err = nil
			if errors.Is(err, io.EOF) && r.end > r.start {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		r.makeRoom(need)
		n, err := r.r.Read(r.buf[r.end:])
		r.end += n
		r.err = err
		if n == 0 && err == nil {
			empty++
		} else {
			empty = 0
		}
	}
	return nil
}

// makeRoom makes sure buf has room to read into, and for need bytes from
// start. A small buffer that is full when more is needed means the peer is
// sending: the bytes move to a borrowed buffer, which holds a burst in one
// read.
func (r *Reader) makeRoom(need int) {
	if r.end < len(r.buf) && r.start+need <= len(r.buf) {
		return
	}
	unread := r.end - r.start
	var next []byte
	var borrowed *[]byte
	switch {
	case need > poolRead:
		next = make([]byte, need)
	case r.borrowed != nil:
		next = r.buf // compact in place
	default:
		borrowed = readBufs.Get().(*[]byte)
		next = *borrowed
	}
	copy(next, r.buf[r.start:r.end])
	if borrowed != nil || (need > poolRead && r.borrowed != nil) {
		r.giveBack()
		r.borrowed = borrowed
	}
	r.buf, r.start, r.end = next, 0, unread
}

// release goes back to the small buffer once everything read is consumed.
func (r *Reader) release() {
	r.giveBack()
	r.buf, r.start, r.end = r.small[:], 0, 0
}

func (r *Reader) giveBack() {
	if r.borrowed != nil {
		readBufs.Put(r.borrowed)
		r.borrowed = nil
	}
}

// Writer writes frames to a stream from many goroutines, coalescing them:
// while one caller is in the write system call, frames from others gather in
// a buffer that the same caller writes next. A lone frame costs one write;
// a burst costs one write per batch. Safe for concurrent use.
//
// Cork and Uncork let a producer that emits a burst from one goroutine (the
// agent dispatching a batch of events) have the burst written together.
//
// The buffer is borrowed from a pool that all Writers share while it holds
// frames, so that an idle Writer holds none.
type Writer struct {
	w        io.Writer
	mu       sync.Mutex
	buf      []byte
	held     *[]byte // buf's, from writeBufs; nil while nothing is queued
	flushing bool
	corked   int
	err      error
	batch    Batch // the open invoke-done-batch at buf's end
}

// writeBufs lends Writers their buffers; one grown past maxPooledWrite is
// left to the collector.
var writeBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledWrite = 256 << 10

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteFrame queues f and, unless another caller is already writing,
// writes everything queued. It returns the first write error the stream
// gave, now or before; a frame queued behind another caller's write may
// report success and still be lost if that write fails — the stream is
// broken then, and the next call says so.
func (w *Writer) WriteFrame(f *Frame) error {
	return w.write(func(b []byte) ([]byte, error) {
		w.batch.Close(b)
		return AppendFrame(b, f)
	})
}

// WriteDone queues a completion in an invoke-done-batch frame (protocol
// version 2), with the completions queued next to it, and writes as
// WriteFrame does.
func (w *Writer) WriteDone(d *Done) error {
	return w.write(func(b []byte) ([]byte, error) { return w.batch.AppendDone(b, d) })
}

// write appends to the buffer with add, under mu, and writes as
// WriteFrame does.
func (w *Writer) write(add func([]byte) ([]byte, error)) error {
	w.mu.Lock()
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	w.borrowLocked()
	var err error
	w.buf, err = add(w.buf)
	if err != nil || w.flushing || w.corked > 0 {
		w.mu.Unlock()
		return err
	}
	return w.flushLocked()
}

func (w *Writer) borrowLocked() {
	if w.held == nil {
		w.held = writeBufs.Get().(*[]byte)
		w.buf = (*w.held)[:0]
	}
}

// Cork holds frames back until the matching Uncork. Corks nest.
func (w *Writer) Cork() {
	w.mu.Lock()
	w.corked++
	w.mu.Unlock()
}

// Uncork releases one Cork and, when none is left, writes what gathered.
func (w *Writer) Uncork() error {
	w.mu.Lock()
	if w.corked > 0 {
		w.corked--
	}
	if w.corked > 0 || w.flushing || len(w.buf) == 0 || w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	return w.flushLocked()
}

// Flush writes what is queued now, corked or not, unless another caller is
// writing already (it writes it next). A request whose caller waits for
// the answer must not wait for an Uncork that comes only after it.
func (w *Writer) Flush() error {
	w.mu.Lock()
	if w.flushing || len(w.buf) == 0 || w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	return w.flushLocked()
}

// flushLocked writes the buffer until it stays empty; it is called with mu
// held and returns with it released.
func (w *Writer) flushLocked() error {
	w.flushing = true
	for len(w.buf) > 0 && w.err == nil {
		w.batch.Close(w.buf)
		out, held := w.buf, w.held
		w.buf, w.held = nil, nil
		w.mu.Unlock()
		_, werr := w.w.Write(out)
		if cap(out) <= maxPooledWrite {
			*held = out[:0]
			writeBufs.Put(held)
		}
		w.mu.Lock()
		if werr != nil {
			w.err = werr
			w.buf = nil
			w.batch.Reset()
		}
	}
	w.flushing = false
	err := w.err
	w.mu.Unlock()
	return err
}
