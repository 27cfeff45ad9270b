package launch

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

func newTestPipe(w io.WriteCloser) *stdinPipe {
	return &stdinPipe{w: w, writers: map[string]int64{}, space: make(chan struct{}), kick: make(chan struct{}, 1)}
}

func (s *stdinPipe) pending() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Join(s.queue, nil)
}

// TestStdinOffsets: a request sent again is queued once; an overlapping
// one only for its new part; a writer not remembered is taken as it
// comes.
func TestStdinOffsets(t *testing.T) {
	s := newTestPipe(nopCloser{io.Discard})
	take := func(w string, off int64, data string) {
		s.mu.Lock()
		s.takeLocked(w, off, []byte(data), false)
		s.mu.Unlock()
	}
	take("a", 0, "hello ")
	take("a", 0, "hello ") // resent after a lost reply
	take("a", 3, "lo world")
	take("b", 100, "!")
	if got := string(s.pending()); got != "hello world!" {
		t.Fatalf("queued %q", got)
	}
	for i := range maxStdinWriters {
		take(fmt.Sprint("w", i), 0, "")
	}
	if _, ok := s.writers["a"]; ok || len(s.writers) != maxStdinWriters {
		t.Fatalf("writers remembered: %d, the least recent kept: %v", len(s.writers), ok)
	}
	take("a", 0, "x") // forgotten: taken as it comes
	if got := string(s.pending()); got != "hello world!x" {
		t.Fatalf("queued %q", got)
	}
}

// TestStdinQueueBound: a request that does not fit queues nothing and
// waits for room, which the writing goroutine makes as the process reads;
// a closed pipe is reported closed.
func TestStdinQueueBound(t *testing.T) {
	pr, pw := io.Pipe()
	s := newTestPipe(pw)
	targets := []stdinTarget{{rank: 0, in: s}}
	piece := bytes.Repeat([]byte("x"), MaxStdinData)
	var off int64
	for {
		closed, wait := deliverStdin(targets, StdinRequest{Writer: "w", Offset: off, Data: piece})
		if len(closed) > 0 {
			t.Fatalf("closed %v", closed)
		}
		if wait != nil {
			break
		}
		off += int64(len(piece))
	}
	if s.queued > stdinCapacity || s.queued+len(piece) <= stdinCapacity {
		t.Fatalf("queue full at %d bytes, capacity %d", s.queued, stdinCapacity)
	}
	_, wait := deliverStdin(targets, StdinRequest{Writer: "w", Offset: off, Data: piece})
	ended, stop := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(ended, stop)
	}()
	if _, err := io.CopyN(io.Discard, pr, StdinBuffer); err != nil {
		t.Fatal(err)
	}
	<-wait // room was made
	close(ended)
	_ = pr.Close()
	<-done
	closed, wait := deliverStdin(targets, StdinRequest{Writer: "w", Offset: off, Data: piece})
	if wait != nil || !slices.Equal(closed, []pmix.Rank{0}) {
		t.Fatalf("after the process ended: closed %v, wait %v", closed, wait != nil)
	}
}

// TestStdinEOF: the queue is written, then the pipe closed; later data is
// refused as closed.
func TestStdinEOF(t *testing.T) {
	pr, pw := io.Pipe()
	s := newTestPipe(pw)
	targets := []stdinTarget{{rank: 3, in: s}}
	if closed, wait := deliverStdin(targets, StdinRequest{Writer: "w", Data: []byte("last\n"), EOF: true}); closed != nil || wait != nil {
		t.Fatalf("closed %v wait %v", closed, wait != nil)
	}
	if closed, _ := deliverStdin(targets, StdinRequest{Writer: "w", Offset: 5, Data: []byte("more")}); !slices.Equal(closed, []pmix.Rank{3}) {
		t.Fatalf("data after EOF: closed %v", closed)
	}
	go s.run(make(chan struct{}), make(chan struct{}))
	got, err := io.ReadAll(pr)
	if err != nil || string(got) != "last\n" {
		t.Fatalf("read %q, %v; want the data, then EOF", got, err)
	}
}

func TestParseStdinTarget(t *testing.T) {
	for _, tt := range []struct {
		in   string
		rank pmix.Rank
		none bool
		ok   bool
	}{
		{"0", 0, false, true},
		{"12", 12, false, true},
		{"ALL", pmix.RankWildcard, false, true},
		{"none", 0, true, true},
		{"-1", 0, false, false},
		{"first", 0, false, false},
		{"4294967294", 0, false, false},
	} {
		rank, none, err := ParseStdinTarget(tt.in)
		if (err == nil) != tt.ok || rank != tt.rank || none != tt.none {
			t.Errorf("ParseStdinTarget(%q) = %v, %v, %v", tt.in, rank, none, err)
		}
		if err != nil && pmix.StatusOf(err) != pmix.ErrBadParam {
			t.Errorf("ParseStdinTarget(%q): %v, want PMIX_ERR_BAD_PARAM", tt.in, err)
		}
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
