//go:build !linux

package launch

import (
	"os/exec"
	"syscall"
)

// setProcAttrs does nothing here: there is no PR_SET_PDEATHSIG, and a
// process outlives a launcher that dies without cleaning up; processes
// share the launcher's process group.
func setProcAttrs(*exec.Cmd) {}

// signalGroup is not supported here: the caller signals the process.
func signalGroup(int, syscall.Signal) error { return syscall.ENOSYS }
