//go:build unix

package bench

import (
	"fmt"
	"syscall"
)

// raiseFileLimit makes sure the process may open need files, raising its
// limit if it must (Go raises the soft limit to the hard one at start; the
// hard one takes privilege). The error says what the limit is.
func raiseFileLimit(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("reading the open files limit: %w", err)
	}
	if lim.Cur >= need {
		return nil
	}
	want := syscall.Rlimit{Cur: need, Max: max(lim.Max, need)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		return fmt.Errorf("needs %d open files; the limit is %d (hard limit %d) and raising it failed: %w (raise it with ulimit -n, or as root)", need, lim.Cur, lim.Max, err)
	}
	return nil
}
