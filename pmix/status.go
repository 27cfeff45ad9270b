package pmix

import (
	"fmt"
	"strconv"
	"strings"
)

// Status is a PMIx status code (pmix_status_t). Zero is success; negative
// values are errors and event codes. The values are OpenPMIx's.
type Status int32

// Statuses defined by OpenPMIx (include/pmix_common.h.in).
const (
	Success                   Status = 0
	ErrGeneral                Status = -1 // PMIX_ERROR
	ErrSilent                 Status = -2
	DebuggerRelease           Status = -3
	ErrProcRestart            Status = -4
	ErrProcCheckpoint         Status = -5
	ErrProcMigrate            Status = -6
	ErrProcAborted            Status = -7
	ErrProcRequestedAbort     Status = -8
	ErrProcAborting           Status = -9
	ErrServerFailedRequest    Status = -10
	Exists                    Status = -11
	ErrInvalidCred            Status = -12
	ErrWouldBlock             Status = -15
	ErrUnknownDataType        Status = -16
	ErrTypeMismatch           Status = -18
	ErrUnpackInadequateSpace  Status = -19
	ErrUnpackFailure          Status = -20
	ErrPackFailure            Status = -21
	ErrNoPermissions          Status = -23
	ErrTimeout                Status = -24
	ErrUnreach                Status = -25
	ErrBadParam               Status = -27
	ErrResourceBusy           Status = -28
	ErrOutOfResource          Status = -29
	ErrDataValueNotFound      Status = -30
	ErrInit                   Status = -31
	ErrNomem                  Status = -32
	ErrInvalidArg             Status = -33
	ErrInvalidKey             Status = -34
	ErrInvalidVal             Status = -36
	ErrInvalidLength          Status = -38
	ErrInvalidSize            Status = -43
	ErrInvalidNamespace       Status = -44
	ErrServerNotAvail         Status = -45
	ErrNotFound               Status = -46
	ErrNotSupported           Status = -47
	ErrNotImplemented         Status = -48
	ErrCommFailure            Status = -49
	ErrUnpackReadPastEnd      Status = -50
	ErrConflictingCleanup     Status = -51
	ErrPartialSuccess         Status = -52
	ErrDuplicateKey           Status = -53
	ErrEmpty                  Status = -60
	ErrLostConnection         Status = -61
	ErrExistsOutsideScope     Status = -62
	ErrLostPeerConnection     Status = -102
	ErrLostConnectionToClient Status = -103
	QueryPartialSuccess       Status = -104
	ErrInvalidTermination     Status = -112
	ErrEventRegistration      Status = -144
	EventJobEnd               Status = -145
	EventModelDeclared        Status = -147 // PMIX_MODEL_DECLARED: PMIx_Init's info declared a programming model
	ProcHasConnected          Status = -149
	ConnectRequested          Status = -150
	OperationInProgress       Status = -156
	OperationSucceeded        Status = -157
	ErrInvalidOperation       Status = -158
	ErrIOFFailure             Status = -172
	ErrIOFComplete            Status = -173
	LaunchComplete            Status = -174
	ErrJobCanceled            Status = -180
	ErrJobFailedToLaunch      Status = -181
	ErrJobAborted             Status = -182
	ErrJobKilledByCmd         Status = -183
	ErrJobAbortedBySig        Status = -184
	ErrJobTermWOSync          Status = -185
	ErrJobNonZeroTerm         Status = -187
	EventJobStart             Status = -191
	EventSessionStart         Status = -192
	EventSessionEnd           Status = -193
	ErrProcTermWOSync         Status = -200
	EventProcTerminated       Status = -201
	EventNodeDown             Status = -231
	EventNodeOffline          Status = -232
	EventSysOther             Status = -330
	ErrProcKilledByCmd        Status = -400
	ErrProcFailedToStart      Status = -401
	ErrProcAbortedBySig       Status = -402
	ErrExitNonzeroTerm        Status = -404
	// ErrIOFXoff: the receiver of forwarded input is full; send again
	// later (OpenPMIx HEAD's PMIX_ERR_IOF_XOFF, flow control).
	ErrIOFXoff Status = -405

	// Statuses a handler returns through its completion func (RFC0002).
	EventNoActionTaken      Status = -331
	EventPartialActionTaken Status = -332
	EventActionDeferred     Status = -333
	EventActionComplete     Status = -334

	// ExternalErrBase: codes below it are free for applications
	// (PMIX_EXTERNAL_ERR_BASE in OpenPMIx 4 and later).
	ExternalErrBase Status = -3000
)

// Statuses pmixbus defines where the RFCs name something OpenPMIx never
// did. They live in [-2999, -2900]: below OpenPMIx's internal range
// (PMIX_INTERNAL_ERR_BASE is -1330 and internal codes count down from it by
// a few dozen) and above ExternalErrBase, which applications own.
const (
	// ProcHasDisconnected is RFC0003's PMIX_PROC_HAS_DISCONNECTED: a
	// member left a connected group (PMIX_CONNECT_NOTIFY_EACH).
	ProcHasDisconnected Status = -2901
	// ErrConnectEarlyTerm is reserved: a connected process that terminates
	// without disconnecting raises ErrProcTermWOSync at the other members
	// (RFC0003's "termination error"), and nothing where
	// PMIX_CONNECT_EARLY_TERM_ALLOWED was given (docs/collective.md).
	ErrConnectEarlyTerm Status = -2902
	// EventCacheEvicted is raised to the host when the event cache
	// discards events to stay within its limits.
	EventCacheEvicted Status = -2903
	// EventAbortRequested is the 2016-04-07 minutes' PMIX_ABORT, which
	// OpenPMIx never defined: a handler that decides its own process must
	// abort asks for it (in its results, or by notifying this code with
	// PMIX_RANGE_PROC_LOCAL), and once the chain has ended the engine
	// raises this event in that process only, so that a handler
	// registered for it can call PMIx_Abort. A code of its own: it was
	// PMIX_ERR_PROC_REQUESTED_ABORT (-8), which is also the event of a
	// process that called PMIx_Abort, raised to its whole job, so every
	// rank's abort handlers ran when one rank aborted. OpenPMIx 4.2.2's
	// pmix_common.h defines no code from -2999 to -2900.
	EventAbortRequested Status = -2904
)

// LostServerConnection is RFC0002's PMIX_ERR_LOST_SERVER_CONNECTION, which
// OpenPMIx names PMIX_ERR_LOST_CONNECTION.
const LostServerConnection = ErrLostConnection

// FailedComm is RFC0002's PMIX_ERR_FAILED_COMM ("a message from the local
// server could not be correctly unpacked, or … an outbound message could not
// be packed"), which OpenPMIx names PMIX_ERR_COMM_FAILURE.
const FailedComm = ErrCommFailure

var statusNames = map[Status]string{
	Success:                   "PMIX_SUCCESS",
	ErrGeneral:                "PMIX_ERROR",
	ErrSilent:                 "PMIX_ERR_SILENT",
	DebuggerRelease:           "PMIX_DEBUGGER_RELEASE",
	ErrProcRestart:            "PMIX_ERR_PROC_RESTART",
	ErrProcCheckpoint:         "PMIX_ERR_PROC_CHECKPOINT",
	ErrProcMigrate:            "PMIX_ERR_PROC_MIGRATE",
	ErrProcAborted:            "PMIX_ERR_PROC_ABORTED",
	EventModelDeclared:        "PMIX_MODEL_DECLARED",
	ErrProcRequestedAbort:     "PMIX_ERR_PROC_REQUESTED_ABORT",
	ErrProcAborting:           "PMIX_ERR_PROC_ABORTING",
	ErrServerFailedRequest:    "PMIX_ERR_SERVER_FAILED_REQUEST",
	Exists:                    "PMIX_EXISTS",
	ErrInvalidCred:            "PMIX_ERR_INVALID_CRED",
	ErrWouldBlock:             "PMIX_ERR_WOULD_BLOCK",
	ErrUnknownDataType:        "PMIX_ERR_UNKNOWN_DATA_TYPE",
	ErrTypeMismatch:           "PMIX_ERR_TYPE_MISMATCH",
	ErrUnpackInadequateSpace:  "PMIX_ERR_UNPACK_INADEQUATE_SPACE",
	ErrUnpackFailure:          "PMIX_ERR_UNPACK_FAILURE",
	ErrPackFailure:            "PMIX_ERR_PACK_FAILURE",
	ErrNoPermissions:          "PMIX_ERR_NO_PERMISSIONS",
	ErrTimeout:                "PMIX_ERR_TIMEOUT",
	ErrUnreach:                "PMIX_ERR_UNREACH",
	ErrBadParam:               "PMIX_ERR_BAD_PARAM",
	ErrResourceBusy:           "PMIX_ERR_RESOURCE_BUSY",
	ErrOutOfResource:          "PMIX_ERR_OUT_OF_RESOURCE",
	ErrDataValueNotFound:      "PMIX_ERR_DATA_VALUE_NOT_FOUND",
	ErrInit:                   "PMIX_ERR_INIT",
	ErrNomem:                  "PMIX_ERR_NOMEM",
	ErrInvalidArg:             "PMIX_ERR_INVALID_ARG",
	ErrInvalidKey:             "PMIX_ERR_INVALID_KEY",
	ErrInvalidVal:             "PMIX_ERR_INVALID_VAL",
	ErrInvalidLength:          "PMIX_ERR_INVALID_LENGTH",
	ErrInvalidSize:            "PMIX_ERR_INVALID_SIZE",
	ErrInvalidNamespace:       "PMIX_ERR_INVALID_NAMESPACE",
	ErrServerNotAvail:         "PMIX_ERR_SERVER_NOT_AVAIL",
	ErrNotFound:               "PMIX_ERR_NOT_FOUND",
	ErrNotSupported:           "PMIX_ERR_NOT_SUPPORTED",
	ErrNotImplemented:         "PMIX_ERR_NOT_IMPLEMENTED",
	ErrCommFailure:            "PMIX_ERR_COMM_FAILURE",
	ErrUnpackReadPastEnd:      "PMIX_ERR_UNPACK_READ_PAST_END_OF_BUFFER",
	ErrConflictingCleanup:     "PMIX_ERR_CONFLICTING_CLEANUP_DIRECTIVES",
	ErrPartialSuccess:         "PMIX_ERR_PARTIAL_SUCCESS",
	ErrDuplicateKey:           "PMIX_ERR_DUPLICATE_KEY",
	ErrEmpty:                  "PMIX_ERR_EMPTY",
	ErrLostConnection:         "PMIX_ERR_LOST_CONNECTION",
	ErrExistsOutsideScope:     "PMIX_ERR_EXISTS_OUTSIDE_SCOPE",
	ErrLostPeerConnection:     "PMIX_ERR_LOST_PEER_CONNECTION",
	ErrLostConnectionToClient: "PMIX_ERR_LOST_CONNECTION_TO_CLIENT",
	QueryPartialSuccess:       "PMIX_QUERY_PARTIAL_SUCCESS",
	ErrInvalidTermination:     "PMIX_ERR_INVALID_TERMINATION",
	ErrEventRegistration:      "PMIX_ERR_EVENT_REGISTRATION",
	EventJobEnd:               "PMIX_EVENT_JOB_END",
	ProcHasConnected:          "PMIX_PROC_HAS_CONNECTED",
	ConnectRequested:          "PMIX_CONNECT_REQUESTED",
	OperationInProgress:       "PMIX_OPERATION_IN_PROGRESS",
	OperationSucceeded:        "PMIX_OPERATION_SUCCEEDED",
	ErrInvalidOperation:       "PMIX_ERR_INVALID_OPERATION",
	ErrIOFFailure:             "PMIX_ERR_IOF_FAILURE",
	ErrIOFComplete:            "PMIX_ERR_IOF_COMPLETE",
	LaunchComplete:            "PMIX_LAUNCH_COMPLETE",
	ErrJobCanceled:            "PMIX_ERR_JOB_CANCELED",
	ErrJobFailedToLaunch:      "PMIX_ERR_JOB_FAILED_TO_LAUNCH",
	ErrJobAborted:             "PMIX_ERR_JOB_ABORTED",
	ErrJobKilledByCmd:         "PMIX_ERR_JOB_KILLED_BY_CMD",
	ErrJobAbortedBySig:        "PMIX_ERR_JOB_ABORTED_BY_SIG",
	ErrJobTermWOSync:          "PMIX_ERR_JOB_TERM_WO_SYNC",
	ErrJobNonZeroTerm:         "PMIX_ERR_JOB_NON_ZERO_TERM",
	EventJobStart:             "PMIX_EVENT_JOB_START",
	EventSessionStart:         "PMIX_EVENT_SESSION_START",
	EventSessionEnd:           "PMIX_EVENT_SESSION_END",
	ErrProcTermWOSync:         "PMIX_ERR_PROC_TERM_WO_SYNC",
	EventProcTerminated:       "PMIX_EVENT_PROC_TERMINATED",
	EventNodeDown:             "PMIX_EVENT_NODE_DOWN",
	EventNodeOffline:          "PMIX_EVENT_NODE_OFFLINE",
	EventSysOther:             "PMIX_EVENT_SYS_OTHER",
	ErrProcKilledByCmd:        "PMIX_ERR_PROC_KILLED_BY_CMD",
	ErrProcFailedToStart:      "PMIX_ERR_PROC_FAILED_TO_START",
	ErrProcAbortedBySig:       "PMIX_ERR_PROC_ABORTED_BY_SIG",
	ErrExitNonzeroTerm:        "PMIX_ERR_EXIT_NONZERO_TERM",
	ErrIOFXoff:                "PMIX_ERR_IOF_XOFF",
	EventNoActionTaken:        "PMIX_EVENT_NO_ACTION_TAKEN",
	EventPartialActionTaken:   "PMIX_EVENT_PARTIAL_ACTION_TAKEN",
	EventActionDeferred:       "PMIX_EVENT_ACTION_DEFERRED",
	EventActionComplete:       "PMIX_EVENT_ACTION_COMPLETE",
	ExternalErrBase:           "PMIX_EXTERNAL_ERR_BASE",
	ProcHasDisconnected:       "PMIX_PROC_HAS_DISCONNECTED",
	ErrConnectEarlyTerm:       "PMIXBUS_ERR_CONNECT_EARLY_TERM",
	EventCacheEvicted:         "PMIXBUS_EVENT_CACHE_EVICTED",
	EventAbortRequested:       "PMIXBUS_EVENT_ABORT",
}

var statusByName = func() map[string]Status {
	m := make(map[string]Status, len(statusNames))
	for s, n := range statusNames {
		m[n] = s
	}
	return m
}()

// String returns the PMIx name of s ("PMIX_ERR_NOT_FOUND"), or
// "PMIX_STATUS(<n>)" for a code this package does not name (for example an
// application's own code below ExternalErrBase).
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return "PMIX_STATUS(" + strconv.Itoa(int(s)) + ")"
}

// IsError reports whether s is neither success nor one of the handler
// statuses, which are not errors.
func (s Status) IsError() bool {
	return s != Success && (s > EventNoActionTaken || s < EventActionComplete)
}

// ParseStatus accepts a PMIx name ("PMIX_EVENT_NODE_DOWN"), the same without
// its "PMIX_" prefix and in any case ("event_node_down"), or a decimal
// number ("-231").
//
// It returns an *Error with ErrBadParam when s is none of these.
func ParseStatus(s string) (Status, error) {
	t := strings.TrimSpace(s)
	if n, err := strconv.ParseInt(t, 10, 32); err == nil {
		return Status(n), nil
	}
	u := strings.ToUpper(t)
	if st, ok := statusByName[u]; ok {
		return st, nil
	}
	if st, ok := statusByName["PMIX_"+u]; ok {
		return st, nil
	}
	if st, ok := statusByName["PMIXBUS_"+u]; ok {
		return st, nil
	}
	if strings.HasPrefix(u, "PMIX_STATUS(") && strings.HasSuffix(u, ")") {
		if n, err := strconv.ParseInt(u[len("PMIX_STATUS("):len(u)-1], 10, 32); err == nil {
			return Status(n), nil
		}
	}
	return 0, Errorf(ErrBadParam, "unknown status %s: want a PMIx name such as PMIX_EVENT_NODE_DOWN or a number", Quote(s))
}

// GoString makes %#v print the name too.
func (s Status) GoString() string { return fmt.Sprintf("pmix.Status(%d /* %s */)", int32(s), s) }
