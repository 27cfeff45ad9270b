package launch

import (
	"os/exec"
	"syscall"
)

// setProcAttrs starts the process as the leader of a process group of its
// own, so that a signal to it reaches what it started (signalGroup), and
// has the kernel kill it when the thread that started it ends
// (PR_SET_PDEATHSIG): a launcher that dies without cleaning up (SIGKILL,
// say) takes its processes with it. With u it runs as that user.
func setProcAttrs(cmd *exec.Cmd, u *JobUser) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if u != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
	}
	return nil
}

// signalGroup sends sig to the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) error {
	return syscall.Kill(-pid, sig)
}
