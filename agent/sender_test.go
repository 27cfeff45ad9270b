package agent

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// startSender runs a sender on one end of a pipe and returns the other
// end and the reason the sender cut its client off, once it does.
func startSender(t *testing.T, limit int, stall time.Duration) (*sender, net.Conn, chan error) {
	t.Helper()
	agentEnd, clientEnd := net.Pipe()
	t.Cleanup(func() { agentEnd.Close(); clientEnd.Close() })
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	s := newSender(agentEnd, limit, stall, time.Hour, done)
	cut := make(chan error, 1)
	goFunc := func(f func()) bool { go f(); return true }
	if !s.start(goFunc, func(err error) { cut <- err }) {
		t.Fatal("sender did not start")
	}
	t.Cleanup(func() { s.finish(nil, 0) })
	return s, clientEnd, cut
}

func frame(n int) *proto.Frame {
	return &proto.Frame{Type: proto.TypeInvoke, Seq: 1, Name: strings.Repeat("x", n)}
}

// A client that reads, however slowly, is let fall behind its limit; one
// that stops reading is cut off after the stall time, and told why.
func TestSenderSlowVersusStalled(t *testing.T) {
	t.Run("slow", func(t *testing.T) {
		s, c, cut := startSender(t, 64<<10, 500*time.Millisecond)
		var read atomic.Int64
		go func() { // 8 KiB every 20 ms: 400 KiB/s, slower than it is sent
			buf := make([]byte, 8<<10)
			for {
				n, err := c.Read(buf)
				read.Add(int64(n))
				if err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		for range 200 { // 200 KiB, past the limit, under four times it
			if err := s.send(frame(1000)); err != nil {
				t.Fatalf("a slow reader was cut off: %v", err)
			}
		}
		deadline := time.After(30 * time.Second)
		for read.Load() < 200*1000 {
			select {
			case err := <-cut:
				t.Fatalf("a slow reader was cut off: %v", err)
			case <-deadline:
				t.Fatalf("read %d bytes", read.Load())
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	t.Run("stalled", func(t *testing.T) {
		s, c, cut := startSender(t, 64<<10, 200*time.Millisecond)
		for range 100 { // 100 KiB, past the limit; nobody reads
			_ = s.send(frame(1000))
		}
		var err error
		select {
		case err = <-cut:
		case <-time.After(30 * time.Second):
			t.Fatal("a client that stopped reading was not cut off")
		}
		if !errors.Is(err, pmix.ErrOutOfResource) || !strings.Contains(err.Error(), "client not reading") {
			t.Fatalf("cut off with %v", err)
		}
		if err := s.send(frame(10)); err == nil {
			t.Fatal("a frame was queued for a client cut off")
		}
		// Reading again, it finds why after what was queued.
		for {
			f, err := proto.ReadFrame(c, proto.DefaultMaxFrame)
			if err != nil {
				t.Fatalf("no error frame: %v", err)
			}
			if f.Type == proto.TypeError {
				if f.Status != pmix.ErrOutOfResource {
					t.Fatalf("error frame %+v", f)
				}
				return
			}
		}
	})
}

// TestIdleSenderHoldsNoQueue: once what was queued for a client is
// written, its sender holds no buffer — of many attached clients, only
// those with frames waiting do — and the next burst still goes out.
func TestIdleSenderHoldsNoQueue(t *testing.T) {
	ours, theirs := net.Pipe()
	defer theirs.Close()
	abort := make(chan struct{})
	s := newSender(ours, 8<<20, 2*time.Second, 10*time.Second, abort)
	if !s.start(func(f func()) bool { go f(); return true }, func(error) {}) {
		t.Fatal("the sender did not start")
	}
	defer s.finish(nil, time.Second)
	r := proto.NewReader(theirs, proto.DefaultMaxFrame)
	for round := range 3 {
		s.cork()
		for i := range 100 {
			if err := s.send(&proto.Frame{Type: proto.TypeInvoke, Seq: uint64(i), Name: "a handler name of some length"}); err != nil {
				t.Fatal(err)
			}
		}
		s.uncork(false)
		for i := range 100 {
			f, err := r.ReadFrame()
			if err != nil || f.Seq != uint64(i) {
				t.Fatalf("round %d, frame %d: %+v %v", round, i, f, err)
			}
		}
		clustertest.WaitFor(t, 5*time.Second, func() error {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.held != nil || s.buf != nil {
				return fmt.Errorf("round %d: an idle sender holds a queue of %d bytes", round, cap(s.buf))
			}
			return nil
		})
	}
}

// waitBelow waits while more than n bytes are queued, until the client
// reads them; it gives up when stop is closed.
func TestSenderWaitBelow(t *testing.T) {
	s, c, _ := startSender(t, 1<<20, time.Hour)
	for range 100 { // 100 KiB: net.Pipe takes nothing until read
		if err := s.send(frame(1000)); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	close(stop)
	if s.waitBelow(10<<10, stop) {
		t.Fatal("waitBelow returned true with 100 KiB queued and nothing read")
	}
	waited := make(chan bool, 1)
	go func() { waited <- s.waitBelow(10<<10, make(chan struct{})) }()
	go func() { _, _ = io.Copy(io.Discard, c) }() // ends when the pipe closes
	if !<-waited {
		t.Fatal("waitBelow gave up")
	}
}

// TestSenderBatchesInvocations: invocations queued while the sender is
// corked go out as one invoke-batch frame, in order; a frame queued among
// them closes the batch so that it keeps its place, and the invocations
// after it open another.
func TestSenderBatchesInvocations(t *testing.T) {
	s, c, _ := startSender(t, 1<<20, time.Hour)
	s.cork()
	const n = 50
	for i := range n {
		if err := s.sendInvoke(&proto.Invoke{Seq: uint64(i + 1), ID: 7, Name: "h", Code: -201}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.send(&proto.Frame{Type: proto.TypeReply, Seq: 99}); err != nil {
		t.Fatal(err)
	}
	if err := s.sendInvoke(&proto.Invoke{Seq: n + 1, ID: 7, Name: "h", Code: -201}); err != nil {
		t.Fatal(err)
	}
	s.uncork(false)
	r := proto.NewReader(c, proto.DefaultMaxFrame)
	read := func() *proto.Frame {
		t.Helper()
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := read()
	if f.Type != proto.TypeInvokeBatch || len(f.Invokes) != n {
		t.Fatalf("first frame: %v with %d invocations, want invoke-batch with %d", f.Type, len(f.Invokes), n)
	}
	for i, inv := range f.Invokes {
		if inv.Seq != uint64(i+1) || inv.ID != 7 || inv.Name != "h" || inv.Code != -201 {
			t.Fatalf("invocation %d: %+v", i, inv)
		}
	}
	if f := read(); f.Type != proto.TypeReply || f.Seq != 99 {
		t.Fatalf("second frame: %+v, want the reply", f)
	}
	if f := read(); f.Type != proto.TypeInvokeBatch || len(f.Invokes) != 1 || f.Invokes[0].Seq != n+1 {
		t.Fatalf("third frame: %+v, want the last invocation", f)
	}
}

// Frames sent while nothing is being written go out from the caller's
// goroutine (writeDirect); what the socket does not take at once goes back
// to the head of the queue, before what others queued meanwhile, for run.
// Over a real socket that fills (a reader slower than the writers), two
// goroutines sending, uncorking direct and not: every frame arrives once,
// each goroutine's in the order it sent them.
func TestSenderDirectWritesKeepOrder(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("unix", dir+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	clientEnd, err := net.Dial("unix", dir+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer clientEnd.Close()
	agentEnd := <-accepted
	defer agentEnd.Close()
	done := make(chan struct{})
	defer close(done)
	s := newSender(agentEnd, 64<<20, time.Hour, time.Hour, done)
	if s.raw == nil {
		t.Fatal("a Unix socket has no raw conn")
	}
	goFunc := func(f func()) bool { go f(); return true }
	if !s.start(goFunc, func(error) {}) {
		t.Fatal("sender did not start")
	}
	defer s.finish(nil, 0)
	const n = 4000 // frames, half from each goroutine
	got := make(chan error, 1)
	go func() {
		r := proto.NewReader(clientEnd, 1<<20)
		next := [2]uint64{1, 2} // by goroutine: seq g+1, g+3, …
		for i := range n {
			f, err := r.ReadFrame()
			if err != nil {
				got <- err
				return
			}
			g := (f.Seq - 1) % 2
			if f.Seq != next[g] {
				got <- fmt.Errorf("frame %d: seq %d, want %d", i, f.Seq, next[g])
				return
			}
			next[g] += 2
			if i%500 == 0 {
				time.Sleep(10 * time.Millisecond) // let the socket fill
			}
		}
		got <- nil
	}()
	errs := make(chan error, 2)
	for g := range 2 {
		go func() {
			for i := g; i < n; i += 2 {
				f := &proto.Frame{Type: proto.TypeInvoke, Seq: uint64(i + 1), Name: strings.Repeat("x", 1+i%4000)}
				if i%7 == 3 {
					s.cork()
					err := s.send(f)
					s.uncork(i%4 == 3)
					if err != nil {
						errs <- err
						return
					}
					continue
				}
				if err := s.send(f); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("not every frame arrived")
	}
}
