//go:build linux

package nodefence

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pmixbus/pmixbus/pmix"
)

func newBarrier(t *testing.T, n int) *Barrier {
	t.Helper()
	b, err := New(n, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// wait returns what ch delivers, failing the test if nothing comes.
func wait(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("a barrier's arrival was never answered")
		return nil
	}
}

// TestArriveOnBehalf: n arrivals release every one of them, round after
// round, the last at once and the others through the watcher.
func TestArriveOnBehalf(t *testing.T) {
	const n, rounds = 4, 200
	b := newBarrier(t, n)
	var wg sync.WaitGroup
	errs := make(chan error, n*rounds)
	for range n {
		wg.Go(func() {
			for range rounds {
				ch, _, ok := b.Arrive()
				if !ok {
					errs <- errors.New("the barrier broke")
					return
				}
				errs <- wait(t, ch)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if g := b.seg.gen(); g != 2*rounds {
		t.Errorf("generation %d after %d rounds, want %d", g, rounds, 2*rounds)
	}
}

// TestBreakWakesWaiters: a break answers the waiters with its status,
// later arrivals take the agent's path, and a second break keeps the
// first's status.
func TestBreakWakesWaiters(t *testing.T) {
	b := newBarrier(t, 3)
	ch, _, ok := b.Arrive()
	if !ok {
		t.Fatal("a new barrier is broken")
	}
	b.Break(pmix.ErrLostConnection)
	b.Break(pmix.ErrProcTermWOSync)
	err := wait(t, ch)
	if !errors.Is(err, pmix.ErrLostConnection) {
		t.Errorf("waiter got %v, want PMIX_ERR_LOST_CONNECTION", err)
	}
	if !b.Broken() {
		t.Error("not broken after Break")
	}
	if _, _, ok := b.Arrive(); ok {
		t.Error("arrived at a broken barrier")
	}
}

// TestCloseAnswersWaiters: Close answers a waiter with ErrBroken.
func TestCloseAnswersWaiters(t *testing.T) {
	b, err := New(2, false)
	if err != nil {
		t.Fatal(err)
	}
	ch, _, _ := b.Arrive()
	b.Close()
	b.Close()
	if err := wait(t, ch); !errors.Is(err, ErrBroken) || !errors.Is(err, pmix.ErrProcTermWOSync) {
		t.Errorf("waiter got %v, want ErrBroken", err)
	}
	if b.DupFD() != -1 {
		t.Error("a closed barrier has an fd")
	}
}

// TestSegmentAsARankSeesIt: the fd maps to the header the C library
// checks, and it can be neither shrunk nor grown; an arrival through
// another mapping (a rank's) counts.
func TestSegmentAsARankSeesIt(t *testing.T) {
	b := newBarrier(t, 2)
	fd := b.DupFD()
	if fd < 0 {
		t.Fatal("no fd")
	}
	defer func() { _ = unix.Close(fd) }()
	mem, err := unix.Mmap(fd, 0, Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Munmap(mem) }()
	le := binary.NativeEndian
	if le.Uint32(mem[OffMagic:]) != Magic || le.Uint32(mem[OffVersion:]) != Version || le.Uint32(mem[OffN:]) != 2 || le.Uint32(mem[OffSize:]) != Size {
		t.Errorf("header % x", mem[:16])
	}
	for _, size := range []int64{0, 2 * Size} {
		if err := unix.Ftruncate(fd, size); err == nil {
			t.Errorf("the segment could be truncated to %d bytes", size)
		}
	}
	ch, _, _ := b.Arrive()
	// The other rank, through its own mapping: last, it releases.
	le.PutUint32(mem[OffArrived:], 0)
	b.seg.storeArrived(1)
	if b.seg.addArrived(1) != 2 {
		t.Fatal("arrivals do not add up")
	}
	b.seg.storeArrived(0)
	b.seg.addGen(2)
	b.seg.wake()
	if err := wait(t, ch); err != nil {
		t.Fatal(err)
	}
}

func TestEligible(t *testing.T) {
	self := pmix.Proc{Nspace: "job", Rank: 1}
	wild := []pmix.Proc{{Nspace: "job", Rank: pmix.RankWildcard}}
	timeout := pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(5))
	mark := pmix.NewInfo(pmix.KeyDeadline, pmix.Bool(true))
	for _, tc := range []struct {
		name  string
		procs []pmix.Proc
		info  []pmix.Info
		want  bool
	}{
		{"none", nil, nil, true},
		{"own wildcard", wild, nil, true},
		{"collect false", nil, []pmix.Info{pmix.NewInfo(pmix.KeyCollectData, pmix.Bool(false))}, true},
		{"deadline", nil, []pmix.Info{timeout, mark}, true},
		{"collect", nil, []pmix.Info{pmix.NewInfo(pmix.KeyCollectData, pmix.Bool(true))}, false},
		{"collect undef", nil, []pmix.Info{pmix.NewInfo(pmix.KeyCollectData, pmix.Value{})}, false},
		{"timeout", nil, []pmix.Info{timeout}, false},
		{"mark alone", nil, []pmix.Info{pmix.NewInfo(pmix.KeyDeadline, pmix.Bool(false))}, false},
		{"id", nil, []pmix.Info{pmix.NewInfo(pmix.KeyCollectiveID, pmix.String("x"))}, false},
		{"qualified", []pmix.Proc{{Nspace: "A:job", Rank: pmix.RankWildcard}}, nil, false},
		{"a rank", []pmix.Proc{{Nspace: "job", Rank: 1}}, nil, false},
		{"two", append(wild, wild...), nil, false},
		{"another job", []pmix.Proc{{Nspace: "other", Rank: pmix.RankWildcard}}, nil, false},
	} {
		if got := Eligible(self, tc.procs, tc.info); got != tc.want {
			t.Errorf("%s: Eligible %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPartialBarrier: on a node's share of a larger job the last local
// arrival completes nothing itself: Complete releases the round, or
// breaks the barrier with the job's fence's failure.
func TestPartialBarrier(t *testing.T) {
	b, err := New(2, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if !b.Partial() || binary.NativeEndian.Uint32(b.seg.mem[OffFlags:]) != FlagPartial {
		t.Fatal("not marked partial")
	}
	for round, result := range []error{nil, pmix.NewError(pmix.ErrTimeout, "the job's fence timed out")} {
		first, last, _ := b.Arrive()
		if last {
			t.Fatal("the first of two arrivals is the last")
		}
		second, last, ok := b.Arrive()
		if !ok || !last {
			t.Fatalf("round %d: the second of two arrivals is not the last", round)
		}
		select {
		case err := <-first:
			t.Fatalf("round %d: released before Complete: %v", round, err)
		default:
		}
		b.Complete(result)
		for _, ch := range []<-chan error{first, second} {
			if err := wait(t, ch); !errors.Is(err, result) && (result != nil || err != nil) {
				t.Errorf("round %d: %v, want %v", round, err, result)
			}
		}
	}
	if !b.Broken() {
		t.Error("a failed round left the barrier whole")
	}
}
