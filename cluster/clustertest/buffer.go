package clustertest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use: a log sink or an
// output writer that goroutines write while a test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
