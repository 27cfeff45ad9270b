//go:build !linux

package launch

import (
	"errors"
	"os/exec"
	"syscall"
)

// setProcAttrs does nothing here: there is no PR_SET_PDEATHSIG, and a
// process outlives a launcher that dies without cleaning up; processes
// share the launcher's process group. Another user is not supported.
func setProcAttrs(_ *exec.Cmd, u *JobUser) error {
	if u != nil {
		return errors.New("running a process as another user is not supported on this system")
	}
	return nil
}

// signalGroup is not supported here: the caller signals the process.
func signalGroup(int, syscall.Signal) error { return syscall.ENOSYS }
