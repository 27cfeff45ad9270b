package main

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal has the kernel kill a demo client whose demo died
// without cleaning up (SIGKILL, say).
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
