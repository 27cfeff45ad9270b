package agent

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerCred returns the uid and gid of the process at the other end of a
// Unix socket (SO_PEERCRED): the hello checks the uid, publish/lookup
// access permissions compare both. Other connections (TCP) give -1, -1.
func peerCred(c net.Conn) (uid, gid int, err error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, -1, nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, -1, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, -1, err
	}
	if cerr != nil {
		return -1, -1, cerr
	}
	return int(cred.Uid), int(cred.Gid), nil
}
