package main

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// foregroundStdin is the launcher's stdin as prterun reads it: a terminal
// is read only while the launcher is its foreground job, so that
// `pmixbus run … &` is not stopped by SIGTTIN at its first read; in the
// background it waits for SIGCONT (the shell's fg) and looks again.
// Anything but a terminal is read as it is.
type foregroundStdin struct{ f *os.File }

func (s *foregroundStdin) Read(p []byte) (int, error) {
	if !s.foreground() {
		s.waitForeground()
	}
	return s.f.Read(p)
}

// waitForeground waits until the launcher is the terminal's foreground
// job, looking again at each SIGCONT.
func (s *foregroundStdin) waitForeground() {
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	defer signal.Stop(cont)
	for !s.foreground() {
		<-cont
	}
}

func (s *foregroundStdin) foreground() bool {
	pgrp, err := unix.IoctlGetInt(int(s.f.Fd()), unix.TIOCGPGRP)
	return err != nil || pgrp == unix.Getpgrp() // not a terminal, or ours
}
