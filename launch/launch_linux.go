package launch

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal has the kernel kill the process when the thread that
// started it ends: a launcher that dies without cleaning up (SIGKILL, say)
// takes its processes with it.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
