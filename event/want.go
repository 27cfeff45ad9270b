package event

import (
	"fmt"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
)

// WantedTermination is a process's handler chain deciding that the
// application should terminate (RFC0018's PMIX_EVENT_WANT_TERMINATION, the
// consolidated decision of bus.Outcome.Termination). The agent acts on it
// as on the process calling PMIx_Abort for itself with
// WantedTerminationStatus: the launch service ends the process, and the
// job's policy (pmixbus run's abort on the first abnormal end, or
// --continuous) decides whether the rest of the job follows; for a process
// a host RM launched, the host's abort callbacks decide (docs/launch.md).
type WantedTermination struct {
	Proc pmix.Proc   // the process whose chain decided
	Code pmix.Status // the event the chain ran for
	// By names the handler whose entry decided; Required is set when it
	// marked it PMIX_INFO_REQD, which no later handler overrides.
	By       string
	Required bool
}

// WantedTerminationStatus is the status a process ended for its chain's
// decision exits with, as the status of PMIx_Abort: 1, as an MPI program
// that calls MPI_Abort(comm, 1) on an error it cannot handle.
const WantedTerminationStatus pmix.Status = 1

// TerminationWanted reports whether o, the outcome of proc's chain for an
// event, decided that the application should terminate: the chain's own
// decision, or that of the abort chain it raised (bus.Outcome.Abort). A
// chain cut short by the registry's Close decides nothing.
func TerminationWanted(proc pmix.Proc, o bus.Outcome) (WantedTermination, bool) {
	for _, c := range []*bus.Outcome{&o, o.Abort} {
		if c == nil || c.Status != pmix.Success || !c.Termination.Want() {
			continue
		}
		return WantedTermination{Proc: proc, Code: c.Code, By: c.Termination.ByName, Required: c.Termination.Required}, true
	}
	return WantedTermination{}, false
}

// Text says why the process ends, for its abort request and its end.
func (w WantedTermination) Text() string {
	req := ""
	if w.Required {
		req = ", required"
	}
	return fmt.Sprintf("its event handler %s wanted termination (PMIX_EVENT_WANT_TERMINATION%s) after event %v", pmix.Quote(w.By), req, w.Code)
}
