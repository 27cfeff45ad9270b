package event

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
)

// Termination says how one process ended: what the agent that watched it
// (or the one that lost its socket) knows, and what the event reporting
// it carries (research §3.7, the shape Open MPI's ULFM handler reads).
type Termination struct {
	// Proc is the process that ended, its nspace as its own cluster names
	// it.
	Proc    pmix.Proc
	Cluster string
	Node    string
	Session string
	// Code classifies the end: pmix.ErrProcTermWOSync,
	// ErrProcAbortedBySig, ErrExitNonzeroTerm, ErrProcRequestedAbort,
	// ErrProcKilledByCmd, ErrProcFailedToStart, or EventProcTerminated
	// for a normal exit.
	Code pmix.Status
	// ExitCode is the exit code (128+signal for a signal), valid when
	// HasExitCode.
	ExitCode    int
	HasExitCode bool
	// Text says what happened, for people.
	Text string
	// Incarnation tells apart two processes that had the same name (a job
	// registered again): the event id derives from it, the proc and the
	// code, so agents that report the same end make the same event.
	Incarnation string
	At          time.Time
}

// TerminationEvent is the event that reports t: code t.Code, range
// NAMESPACE (every process of the job, on every agent), source the process
// that ended, info PMIX_EVENT_AFFECTED_PROC (type PROC),
// PMIX_EXIT_CODE (int32) when known, PMIX_PROC_TERM_STATUS, PMIX_HOSTNAME,
// PMIX_EVENT_TIMESTAMP and PMIX_EVENT_TEXT_MESSAGE. Its id is the same
// wherever it is made from the same facts, so receivers and the event
// cache keep one copy.
func TerminationEvent(t Termination) *Message {
	at := t.At
	if at.IsZero() {
		at = time.Now()
	}
	info := []pmix.Info{pmix.NewInfo(pmix.KeyEventAffectedProc, pmix.ProcValue(t.Proc))}
	if t.HasExitCode {
		info = append(info, pmix.NewInfo(pmix.KeyExitCode, pmix.Int32(int32(t.ExitCode))))
	}
	info = append(info,
		pmix.NewInfo(pmix.KeyProcTermStatus, pmix.StatusValue(t.Code)),
		pmix.NewInfo(pmix.KeyHostname, pmix.String(t.Node)),
		pmix.NewInfo(pmix.KeyEventTimestamp, pmix.Time(at)),
	)
	text := t.Text
	if text == "" {
		text = fmt.Sprintf("%v on node %s: %v", t.Proc, t.Node, t.Code)
	}
	info = append(info, pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String(text)))
	return &Message{
		ID:     TerminationID(t),
		Code:   t.Code,
		Range:  pmix.RangeNamespace,
		Source: bus.Origin{Cluster: t.Cluster, Node: t.Node, Session: t.Session, Proc: t.Proc},
		Info:   info,
		Time:   at,
	}
}

// TerminationID is the id of the event reporting t.
func TerminationID(t Termination) string {
	h := sha256.New()
	for _, s := range []string{t.Cluster, t.Proc.Nspace, strconv.FormatUint(uint64(t.Proc.Rank), 10), t.Incarnation, strconv.Itoa(int(t.Code))} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "term." + hex.EncodeToString(h.Sum(nil)[:16])
}

// AbortedEvent is the PMIX_ERR_PROC_ABORTED event that also reports an
// abnormal end t of a process whose job runs on (pmixbus run
// --continuous), as PRRTE raises it for a continuous job's failed
// process, so that survivors registered for that code alone (OpenPMIx's
// fault.c) hear of it: the info of TerminationEvent, the precise code in
// its PMIX_PROC_TERM_STATUS, an id of its own.
func AbortedEvent(t Termination) *Message {
	m := TerminationEvent(t)
	m.Code = pmix.ErrProcAborted
	m.ID = "aborted." + m.ID
	return m
}
