package clustertest

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer that tests read while others write to it (a
// launcher forwarding its ranks' output, a daemon's log). Safe for
// concurrent use; the zero value is ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
