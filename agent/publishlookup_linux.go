package agent

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerIDs returns the uid and gid of the process at the other end of a Unix
// socket (SO_PEERCRED), which publish/lookup access permissions compare;
// -1 for what cannot be known (TCP).
func peerIDs(c net.Conn) (uid, gid int) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, -1
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, -1
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return -1, -1
	}
	return int(cred.Uid), int(cred.Gid)
}
