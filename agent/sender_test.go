package agent

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/proto"
)

// TestIdleSenderHoldsNoQueue: once what was queued for a client is
// written, its sender holds no buffer — of many attached clients, only
// those with frames waiting do — and the next burst still goes out.
func TestIdleSenderHoldsNoQueue(t *testing.T) {
	ours, theirs := net.Pipe()
	defer theirs.Close()
	abort := make(chan struct{})
	s := newSender(ours, 8<<20, 10*time.Second, abort)
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
		s.uncork()
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
