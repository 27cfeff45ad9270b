package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/pmixbus/pmixbus/pmix"
)

// SocketDir is the directory of the agents' default sockets: pmixbus in
// $XDG_RUNTIME_DIR (the user's own, made by the login manager) when set,
// else pmixbus-<uid> in the temporary directory. The agent creates it
// 0700 and refuses one another user owns or others may enter: in a
// shared /tmp, a socket path anyone could bind first would let another
// user stop the agent, or pose as it to its ranks.
func SocketDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "pmixbus")
	}
	return filepath.Join(os.TempDir(), "pmixbus-"+strconv.Itoa(os.Geteuid()))
}

// privateDir creates dir 0700 if it is missing and checks that it is a
// directory (not a link to one) of this user that no one else may enter.
// With group >= 0 (the job user's, Config.JobUser) the directory is that
// group's too, mode 0710: its members may reach the socket in it, and
// neither list nor create anything there.
//
// Errors: pmix.ErrInit saying what is wrong with it.
func privateDir(dir string, group int) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return pmix.Errorf(pmix.ErrInit, "creating the socket directory %s: %v", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return pmix.Errorf(pmix.ErrInit, "the socket directory %s: %v", dir, err)
	}
	if !fi.IsDir() {
		return pmix.Errorf(pmix.ErrInit, "the socket directory %s is not a directory (%v): refusing it; remove it or give --listen", dir, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return pmix.Errorf(pmix.ErrInit, "the socket directory %s belongs to uid %d, not to this agent's (%d): refusing it; give --listen", dir, st.Uid, os.Geteuid())
	}
	if group >= 0 {
		if err := os.Chown(dir, -1, group); err != nil {
			return pmix.Errorf(pmix.ErrInit, "giving the socket directory %s to the job user's group %d: %v", dir, group, err)
		}
		if err := os.Chmod(dir, 0o710); err != nil {
			return pmix.Errorf(pmix.ErrInit, "the socket directory %s: %v", dir, err)
		}
		return nil
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return pmix.Errorf(pmix.ErrInit, "the socket directory %s is open to others (%v): refusing it; chmod 700 it or give --listen", dir, perm)
	}
	return nil
}
