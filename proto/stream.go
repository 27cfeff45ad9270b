package proto

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"sync"

	"github.com/pmixbus/pmixbus/pmix"
)

// Reader reads frames from a stream through a buffer, reusing one body
// buffer: decoded frames copy what they keep, so the buffer never leaks into
// them. A Reader is not safe for concurrent use.
type Reader struct {
	r    *bufio.Reader
	max  int
	body []byte
}

// NewReader returns a Reader refusing bodies over maxBody bytes.
func NewReader(r io.Reader, maxBody int) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), max: maxBody}
}

// ReadFrame reads the next frame; errors are those of the package-level
// ReadFrame.
func (r *Reader) ReadFrame() (*Frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r.r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if uint64(n) > uint64(r.max) {
		return nil, pmix.Errorf(ErrFrameTooLarge, "frame of %d bytes exceeds the limit of %d", n, r.max)
	}
	if cap(r.body) < int(n) {
		r.body = make([]byte, n)
	}
	body := r.body[:n]
	if _, err := io.ReadFull(r.r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if cap(r.body) > 1<<20 {
		r.body = nil // do not pin one huge frame's buffer
	}
	return Unmarshal(body)
}

// Writer writes frames to a stream from many goroutines, coalescing them:
// while one caller is in the write system call, frames from others gather in
// a buffer that the same caller writes next. A lone frame costs one write;
// a burst costs one write per batch. Safe for concurrent use.
//
// Cork and Uncork let a producer that emits a burst from one goroutine (the
// agent dispatching a batch of events) have the burst written together.
type Writer struct {
	w        io.Writer
	mu       sync.Mutex
	buf      []byte
	spare    []byte
	flushing bool
	corked   int
	err      error
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteFrame queues f and, unless another caller is already writing,
// writes everything queued. It returns the first write error the stream
// gave, now or before; a frame queued behind another caller's write may
// report success and still be lost if that write fails — the stream is
// broken then, and the next call says so.
func (w *Writer) WriteFrame(f *Frame) error {
	w.mu.Lock()
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	var err error
	w.buf, err = AppendFrame(w.buf, f)
	if err != nil || w.flushing || w.corked > 0 {
		w.mu.Unlock()
		return err
	}
	return w.flushLocked()
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
		out := w.buf
		w.buf = w.spare[:0]
		w.mu.Unlock()
		_, werr := w.w.Write(out)
		w.mu.Lock()
		if cap(out) <= 1<<20 {
			w.spare = out[:0]
		}
		if werr != nil {
			w.err = werr
			w.buf = nil
		}
	}
	w.flushing = false
	err := w.err
	w.mu.Unlock()
	return err
}
