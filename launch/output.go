package launch

import (
	"bytes"
	"sync"
)

// MaxLine bounds a line the agent holds back waiting for its end: a
// longer one is sent in pieces of this size.
const MaxLine = 64 << 10

// lineWriter cuts a process's output into whole lines and hands each
// batch of them to send: a reader never sees half a line from one process
// glued to another's (the IOF seed's tag in mid-line). Close sends what
// is left, newline or not.
type lineWriter struct {
	mu      sync.Mutex
	pending []byte
	send    func([]byte)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = append(w.pending, p...)
	if i := bytes.LastIndexByte(w.pending, '\n'); i >= 0 {
		w.emit(w.pending[:i+1])
		w.pending = append(w.pending[:0], w.pending[i+1:]...)
	}
	for len(w.pending) >= MaxLine {
		w.emit(w.pending[:MaxLine])
		w.pending = append(w.pending[:0], w.pending[MaxLine:]...)
	}
	return len(p), nil
}

// emit sends b in pieces of at most MaxLine, cut after newlines.
func (w *lineWriter) emit(b []byte) {
	for len(b) > MaxLine {
		cut := bytes.LastIndexByte(b[:MaxLine], '\n') + 1
		if cut == 0 {
			cut = MaxLine
		}
		w.send(bytes.Clone(b[:cut]))
		b = b[cut:]
	}
	if len(b) > 0 {
		w.send(bytes.Clone(b))
	}
}

// Close sends the unterminated rest.
func (w *lineWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) > 0 {
		w.send(bytes.Clone(w.pending))
		w.pending = nil
	}
	return nil
}
