package launch

import (
	"fmt"
	"syscall"

	"github.com/pmixbus/pmixbus/pmix"
)

// ClientState is what an agent knows of a process's life as a PMIx
// client (agent.ClientState).
type ClientState struct {
	Attached     bool // it called Init
	Finalized    bool // it called Finalize
	Aborted      bool // it called Abort
	AbortStatus  pmix.Status
	AbortMessage string
}

// Classify says how a process ended, as PRRTE's odls does (research §3.1):
// Abort called → PMIX_ERR_PROC_REQUESTED_ABORT, its status the exit code
// (whatever ended it then); killed on request → PMIX_ERR_PROC_KILLED_BY_CMD; a signal →
// PMIX_ERR_PROC_ABORTED_BY_SIG (exit code 128+signal); a non-zero exit →
// PMIX_ERR_EXIT_NONZERO_TERM; exit 0 after Init without Finalize →
// PMIX_ERR_PROC_TERM_WO_SYNC; otherwise a normal end (pmix.Success). A
// program that never called Init and exits 0 ends normally: not every
// rank of a job need be a PMIx client ("pmixbus run -n 4 hostname").
func Classify(exit Exit, st ClientState, killedByCmd bool) (state pmix.Status, exitCode int, text string) {
	exitCode = exit.Code
	if exit.Signal != 0 {
		exitCode = 128 + int(exit.Signal)
	}
	switch {
	case st.Aborted:
		code := int(st.AbortStatus)
		if code == 0 {
			code = 1
		}
		return pmix.ErrProcRequestedAbort, code, fmt.Sprintf("called abort with status %d: %s", st.AbortStatus, st.AbortMessage)
	case killedByCmd:
		return pmix.ErrProcKilledByCmd, exitCode, "killed on request (" + exit.String() + ")"
	case exit.Signal != 0:
		return pmix.ErrProcAbortedBySig, exitCode, "killed by signal " + signalName(exit.Signal)
	case exit.Code != 0:
		return pmix.ErrExitNonzeroTerm, exitCode, fmt.Sprintf("exited with status %d", exit.Code)
	case st.Attached && !st.Finalized:
		return pmix.ErrProcTermWOSync, exitCode, "exited after PMIx_Init without calling PMIx_Finalize"
	}
	return pmix.Success, 0, "exited normally"
}

func signalName(s syscall.Signal) string {
	return fmt.Sprintf("%d (%v)", int(s), s)
}
