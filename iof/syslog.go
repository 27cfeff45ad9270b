package iof

import (
	"fmt"
	"log/syslog"

	"github.com/pmixbus/pmixbus/pmix"
)

// SyslogFunc writes one message to a syslog at priority pri (0, emergency,
// to 7, debug: syslog(3)'s levels).
type SyslogFunc func(pri int, msg string) error

// LocalSyslog writes msg to this node's syslog (the local daemon's
// socket), with the tag "pmixbus" and facility user, as OpenPMIx's syslog
// logging channel calls syslog(3) in the server.
//
// Errors: pmix.ErrUnreach when no syslog daemon listens.
func LocalSyslog(pri int, msg string) error {
	w, err := syslog.Dial("", "", syslog.Priority(pri)|syslog.LOG_USER, "pmixbus")
	if err != nil {
		return pmix.Errorf(pmix.ErrUnreach, "no syslog on this node: %v", err)
	}
	defer w.Close()
	if _, err := fmt.Fprint(w, msg); err != nil {
		return pmix.Errorf(pmix.ErrUnreach, "writing to the syslog: %v", err)
	}
	return nil
}
