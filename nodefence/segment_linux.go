package nodefence

import (
	"encoding/binary"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/pmixbus/pmixbus/pmix"
)

// segment is the mapping of a sealed memfd of Size bytes.
type segment struct {
	fd  int
	mem []byte
	n   uint32
}

func newSegment(n, flags uint32) (*segment, error) {
	fd, err := unix.MemfdCreate("pmixbus-fence", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, pmix.Errorf(pmix.ErrNotSupported, "node fence: memfd_create: %v", err)
	}
	fail := func(what string, err error) (*segment, error) {
		_ = unix.Close(fd)
		return nil, pmix.Errorf(pmix.ErrOutOfResource, "node fence: %s: %v", what, err)
	}
	if err := unix.Ftruncate(fd, Size); err != nil {
		return fail("ftruncate", err)
	}
	// Sealed, no rank can shrink it under the agent's mapping (SIGBUS)
	// nor grow it.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail("sealing", err)
	}
	mem, err := unix.Mmap(fd, 0, Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	s := &segment{fd: fd, mem: mem, n: n}
	le := binary.NativeEndian
	le.PutUint32(mem[OffVersion:], Version)
	le.PutUint32(mem[OffN:], n)
	le.PutUint32(mem[OffSize:], Size)
	le.PutUint32(mem[OffFlags:], flags)
	atomic.StoreUint32(s.word(OffMagic), Magic) // last: a reader that sees it sees the rest
	return s, nil
}

func (s *segment) word(off int) *uint32 { return (*uint32)(unsafe.Pointer(&s.mem[off])) }

func (s *segment) gen() uint32                { return atomic.LoadUint32(s.word(OffGen)) }
func (s *segment) addGen(d uint32)            { atomic.AddUint32(s.word(OffGen), d) }
func (s *segment) addArrived(d uint32) uint32 { return atomic.AddUint32(s.word(OffArrived), d) }
func (s *segment) storeArrived(v uint32)      { atomic.StoreUint32(s.word(OffArrived), v) }
func (s *segment) status() int32              { return int32(atomic.LoadUint32(s.word(OffStatus))) }
func (s *segment) casStatus(st int32)         { atomic.CompareAndSwapUint32(s.word(OffStatus), 0, uint32(st)) }

// futex operations on a shared mapping: not FUTEX_PRIVATE_FLAG.
const (
	futexWait = 0
	futexWake = 1
)

// wake wakes every waiter of the generation, in every process.
func (s *segment) wake() {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(s.word(OffGen))), futexWake, uintptr(^uint32(0)>>1), 0, 0, 0)
}

// waitBound bounds one FUTEX_WAIT, so a watcher notices Close.
const waitBound = 250 * time.Millisecond

// wait waits until the generation is no longer cur, a wake, or waitBound.
func (s *segment) wait(cur uint32) {
	ts := unix.NsecToTimespec(int64(waitBound))
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(s.word(OffGen))), futexWait, uintptr(cur), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

func (s *segment) dup() int {
	fd, err := unix.FcntlInt(uintptr(s.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

func (s *segment) close() {
	_ = unix.Munmap(s.mem)
	_ = unix.Close(s.fd)
	s.mem, s.fd = nil, -1
}
