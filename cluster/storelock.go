package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// storeLockFile is the file in a store directory that the running server
// holds locked, with its pid in it.
const storeLockFile = "pmixbus.lock"

// storeLock is a held lock on a store directory; nil where locking is not
// supported.
type storeLock struct{ f *os.File }

// lockStore takes the store directory dir for this server: an exclusive,
// non-blocking lock on its lock file, which the kernel releases if the
// process dies, so a stale file never blocks a new server. It fails with
// an error wrapping ErrStoreInUse while another server holds the
// directory, in this process or another, before anything of the store is
// read: two servers on one store would each rebuild and then write the
// same streams.
func lockStore(dir string) (*storeLock, error) {
	path := filepath.Join(dir, storeLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: store dir %s: %w", dir, err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cluster: locking store dir %s: %w", dir, err)
	}
	if !held {
		pid := readPID(f)
		f.Close()
		return nil, &storeInUseError{dir: dir, pid: pid}
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &storeLock{f: f}, nil
}

// release gives the directory up. Safe on a nil lock.
func (l *storeLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	_ = l.f.Close() // closing the last descriptor releases the lock
	l.f = nil
}

func readPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil {
		return 0
	}
	return pid
}

// storeInUseError is ErrStoreInUse for one directory and its holder.
type storeInUseError struct {
	dir string
	pid int // 0: unknown
}

func (e *storeInUseError) Error() string {
	holder := "pid unknown"
	if e.pid > 0 {
		holder = "pid " + strconv.Itoa(e.pid)
	}
	return fmt.Sprintf("store dir %s is in use by another server (%s)", e.dir, holder)
}

func (e *storeInUseError) Is(target error) bool { return target == ErrStoreInUse }
