package launch

import (
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/pmix"
)

// OutputSource is the capture of the output of p, a process this daemon
// started and that has not ended yet: where the agent stores what p logs
// (PMIx_Log, help messages), next to its stdout and stderr. It is nil for
// a process the daemon did not start (a client a host RM registered), for
// one that ended and when the daemon has no output service; the agent
// then logs through a capture of its own. A process being started has its
// capture already: it may log before its start returns, and a second
// capture would number its records from 1 again, which the launcher takes
// for records it has shown.
func (d *Daemon) OutputSource(p pmix.Proc) *iof.Source {
	d.mu.Lock()
	defer d.mu.Unlock()
	j, ok := d.jobs[p.Nspace]
	if !ok {
		return nil
	}
	lp, ok := j.procs[p.Rank]
	if !ok {
		return j.starting[p.Rank] // nil unless being started
	}
	if lp.ended != "" {
		return nil
	}
	return lp.out
}
