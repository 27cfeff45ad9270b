package pmix

// Attribute keys, with OpenPMIx's strings. The comment after each gives the
// value type it carries.
const (
	// Identity and job-level information.
	KeyNspace     = "pmix.nspace"     // string
	KeyRank       = "pmix.rank"       // Rank
	KeyJobID      = "pmix.jobid"      // string
	KeySessionID  = "pmix.session.id" // uint32 or string
	KeyClusterID  = "pmix.clid"       // string: the cluster a job runs on (RFC0003)
	KeyHostname   = "pmix.hname"      // string
	KeyNodeID     = "pmix.nodeid"     // uint32
	KeyJobSize    = "pmix.job.size"   // uint32
	KeyLocalSize  = "pmix.local.size" // uint32
	KeyLocalRank  = "pmix.lrank"      // uint16: the proc's rank among its job's procs on its node
	KeyNodeRank   = "pmix.nrank"      // uint16: the proc's rank among all procs on its node
	KeyLocalPeers = "pmix.lpeers"     // string: comma list of the job's ranks on the node
	KeyUnivSize   = "pmix.univ.size"  // uint32
	KeyMaxProcs   = "pmix.max.size"   // uint32: the most procs the job may have
	KeyAppNum     = "pmix.appnum"     // uint32: the proc's app context (MPMD), from 0
	KeyAppRank    = "pmix.apprank"    // Rank: the proc's rank among its app's
	KeyAppSize    = "pmix.app.size"   // uint32: the procs of the app
	KeyAppLeader  = "pmix.aldr"       // Rank: the lowest rank of the app
	KeyAppArgv    = "pmix.app.argv"   // string: the app's command line, joined by spaces
	KeyJobNumApps = "pmix.job.napps"  // uint32: the app contexts of the job
	KeyUserID     = "pmix.euid"       // uint32
	KeyGroupID    = "pmix.egid"       // uint32
	KeyProcID     = "pmix.procid"     // Proc

	// Event handler registration (RFC0002, RFC0018).
	KeyEventHdlrName            = "pmix.evname"     // string: unique within a registry
	KeyEventHdlrFirst           = "pmix.evfirst"    // bool
	KeyEventHdlrLast            = "pmix.evlast"     // bool
	KeyEventHdlrFirstInCategory = "pmix.evfirstcat" // bool
	KeyEventHdlrLastInCategory  = "pmix.evlastcat"  // bool
	KeyEventHdlrBefore          = "pmix.evbefore"   // string: name of the target handler
	KeyEventHdlrAfter           = "pmix.evafter"    // string: name of the target handler
	KeyEventHdlrPrepend         = "pmix.evprepend"  // bool
	KeyEventHdlrAppend          = "pmix.evappend"   // bool
	KeyEventJobLevel            = "pmix.evjob"      // bool: job-specific events only
	KeyEventEnviroLevel         = "pmix.evenv"      // bool: environment events only

	// Event notification.
	KeyEventCustomRange   = "pmix.evrange"      // []Proc: the targets of a RANGE_CUSTOM event; in a registration, the accepted sources
	KeyEventAffectedProc  = "pmix.evproc"       // Proc
	KeyEventAffectedProcs = "pmix.evaffected"   // []Proc
	KeyEventNonDefault    = "pmix.evnondef"     // bool: skip default handlers
	KeyEventReturnObject  = "pmix.evobject"     // not carried over the wire
	KeyEventDoNotCache    = "pmix.evnocache"    // bool
	KeyEventSilentTerm    = "pmix.evsilentterm" // bool
	KeyEventProxy         = "pmix.evproxy"      // Proc: the server that sourced the event
	KeyEventTextMessage   = "pmix.evtext"       // string
	KeyEventTimestamp     = "pmix.evtstamp"     // time

	// Process and job termination (the launch service's events).
	KeyExitCode                      = "pmix.exit.code"        // int32 (PMIX_INT): the exit code, when known
	KeyJobTermStatus                 = "pmix.job.term.status"  // Status: how the job ended
	KeyProcTermStatus                = "pmix.proc.term.status" // Status: how a proc ended
	KeyNotifyProcTermination         = "pmix.noteproc"         // bool: raise PMIX_EVENT_PROC_TERMINATED on normal exits too
	KeyNotifyProcAbnormalTermination = "pmix.noteabproc"       // bool
	KeyJobRecoverable                = "pmix.recover"          // bool: the job survives an abnormal termination
	KeyJobContinuous                 = "pmix.continuous"       // bool: likewise, and its procs may end and restart (pmixbus run --continuous)

	// Fault tolerance (RFC0018).
	KeyEventTerminateSession = "pmix.evterm.sess" // bool
	KeyEventTerminateJob     = "pmix.evterm.job"  // bool
	KeyEventTerminateNode    = "pmix.evterm.node" // bool
	KeyEventTerminateProc    = "pmix.evterm.proc" // bool
	KeyEventActionTimeout    = "pmix.evtimeout"   // int: seconds a handler may take before the chain moves on
	KeyEventNoTermination    = "pmix.evnoterm"    // bool
	KeyEventWantTermination  = "pmix.evterm"      // bool; with InfoRequired no later handler may override it

	// Ranges, persistence, waiting.
	KeyRange       = "pmix.range"   // Range
	KeyPersistence = "pmix.persist" // Persistence
	KeyWait        = "pmix.wait"    // int: number of values to wait for, 0 for all
	KeyTimeout     = "pmix.timeout" // int: seconds

	// I/O forwarding (PMIx_IOF_push, PMIx_IOF_pull).
	KeyIOFComplete = "pmix.iof.cmp" // bool: the end of a channel; in a push, close the targets' stdin

	// Access control for published data.
	KeyAccessPermissions = "pmix.aperms" // []Info of the keys below
	KeyAccessUserIDs     = "pmix.auids"  // string: comma-separated uids
	KeyAccessGroupIDs    = "pmix.agids"  // string: comma-separated gids

	// Connect/disconnect (RFC0003), with the strings DESIGN.md fixes.
	KeyConnectNotifyEach = "pmix.cnct.each" // bool
	KeyConnectNotifyReq  = "pmix.cnct.req"  // bool
	KeyConnectOptional   = "pmix.cnt.opt"   // bool
	KeyConnectXchgOnly   = "pmix.cnt.xchg"  // bool
	KeyConnectID         = "pmix.cnt.id"    // string

	// Fence and the key-value exchange (PMIx_Fence, PMIx_Get).
	KeyCollectData = "pmix.collect"   // bool: a fence carries the committed data to every participant
	KeyImmediate   = "pmix.immediate" // bool: Get answers from what the agent holds, never waiting or asking further
	KeyOptional    = "pmix.optional"  // bool: Get looks in the client's own store only

	// Logging (PMIx_Log): data keys say where a message goes, directives
	// how. KEY and VAL name a help message (its file and topic), which
	// the launcher aggregates unless AGG is false.
	KeyLogStderr = "pmix.log.stderr" // string: a message for the launcher's stderr
	KeyLogStdout = "pmix.log.stdout" // string: likewise; pmixbus records it as a diagnostic too
	KeyLogAgg    = "pmix.log.agg"    // bool: aggregate duplicate help messages (default true)
	KeyLogKey    = "pmix.log.key"    // string: the help message's file
	KeyLogVal    = "pmix.log.val"    // string: the help message's topic
)

// Keys pmixbus defines where the RFCs describe something OpenPMIx never
// named. All begin with "pmixbus.", a prefix OpenPMIx never uses.
const (
	// KeyConnectEarlyTermAllowed is RFC0003's
	// PMIX_CONNECT_EARLY_TERM_ALLOWED (bool).
	KeyConnectEarlyTermAllowed = "pmixbus.cnct.earlyterm"

	// KeyEventResolved is the "resolved" flag of the 2016-04-07 minutes
	// (bool). The first handler of a chain sees it false in the event's
	// info; once a handler returns EventActionComplete it is true. Handlers
	// that only clean up can check it.
	KeyEventResolved = "pmixbus.evresolved"

	// KeyEventAbortRequested (bool), returned by a handler among its
	// results, asks that EventAbortRequested be raised once the chain
	// ends (the minutes' PMIX_ABORT event).
	KeyEventAbortRequested = "pmixbus.evabort"

	// KeyEventSource (Proc) carries the source of an event inside pmixbus
	// messages, stamped by the agent; RM events have none.
	KeyEventSource = "pmixbus.evsource"

	// KeyEventRange (Range) carries the range an event was sent with, so a
	// receiver can apply its source-range filter.
	KeyEventRange = "pmixbus.evrangeval"

	// KeyEventEnvironment (bool) marks an environment event, one that
	// targets no job (RFC0002). Events without it are job events.
	KeyEventEnvironment = "pmixbus.evenviro"

	// KeyCredential (string) is the per-process credential an agent issues.
	KeyCredential = "pmixbus.cred"

	// KeyCollectiveID (string) tells apart concurrent fences of the same
	// participants, as PMIX_CONNECT_ID does for connects (RFC0003): all
	// participants give the same value. OpenPMIx has no such key for a
	// fence.
	KeyCollectiveID = "pmixbus.coll.id"

	// KeyDeadline (bool) marks the PMIX_TIMEOUT beside it in a fence as
	// the reference Go client's own, made from its context's deadline,
	// not the application's: such a fence may still take its job's node
	// barrier (package nodefence), where the client alone gives up at its
	// deadline.
	KeyDeadline = "pmixbus.deadline"

	// KeyNodeFenceLast (bool) marks a fence sent by the last of a node's
	// ranks to arrive at a barrier of the node's share of a larger job
	// (package nodefence, FlagPartial): the agent runs the job's fence
	// for all of them.
	KeyNodeFenceLast = "pmixbus.nodefence.last"

	// KeyIOFTime (time) is when the source agent read the bytes of a
	// record a pull delivers.
	KeyIOFTime = "pmixbus.iof.time"
)

// Keys of issue 29's queries, logging, job control and model declarations
// (docs/cabi.md), with OpenPMIx's strings.
const (
	KeyProgrammingModel    = "pmix.pgm.model" // string: PMIx_Init's info, the programming model (PMIX_MODEL_DECLARED)
	KeyModelLibraryName    = "pmix.mdl.name"  // string: likewise, the library's name
	KeyModelLibraryVersion = "pmix.mld.vrs"   // string: likewise, its version
	KeyThreadingModel      = "pmix.threads"   // string: likewise, its threading model

	KeyLogMsg               = "pmix.log.msg"    // bytes: PMIx_Log data, Open MPI 4.1's show-help message (iof.ParseOMPIHelp)
	KeyLogSyslog            = "pmix.log.syslog" // string: PMIx_Log data, a message for the syslog of the caller's node
	KeyLogLocalSyslog       = "pmix.log.lsys"   // string: likewise
	KeyLogGlobalSyslog      = "pmix.log.gsys"   // string: likewise (pmixbus has no "master" syslog)
	KeyLogEmail             = "pmix.log.email"  // info array: PMIx_Log data by email, which pmixbus does not send
	KeyLogSyslogPri         = "pmix.log.syspri" // int: PMIx_Log directive, the syslog priority (default LOG_ERR)
	KeyLogTimestamp         = "pmix.log.tstmp"  // time: PMIx_Log directive, the time the syslog message gives
	KeyLogGenerateTimestamp = "pmix.log.gtstmp" // bool: PMIx_Log directive, give the syslog message the time now
	KeyLogOnce              = "pmix.log.once"   // bool: PMIx_Log directive, log to the first channel that takes it only
	KeyLogSource            = "pmix.log.source" // proc: PMIx_Log directive, who logs (the caller regardless)
	KeyLogTagOutput         = "pmix.log.tag"    // bool: PMIx_Log directive, accepted: the launcher's options format the output
	KeyLogTimestampOutput   = "pmix.log.tsout"  // bool: likewise
	KeyLogXMLOutput         = "pmix.log.xml"    // bool: likewise

	KeyJobCtrlKill        = "pmix.jctrl.kill"     // bool: PMIx_Job_control, end the procs at once (SIGKILL)
	KeyJobCtrlTerminate   = "pmix.jctrl.term"     // bool: end them politely (SIGTERM, SIGKILL after the kill grace)
	KeyJobCtrlSignal      = "pmix.jctrl.sig"      // int: send them this signal
	KeyJobCtrlPause       = "pmix.jctrl.pause"    // bool: stop them (SIGSTOP)
	KeyJobCtrlResume      = "pmix.jctrl.resume"   // bool: let them go on (SIGCONT)
	KeyJobCtrlID          = "pmix.jctrl.id"       // string: the request's name (informational)
	KeyJobCtrlPreemptible = "pmix.jctrl.preempt"  // bool: the job may be pre-empted (informational)
	KeyJobCtrlCkptMethod  = "pmix.jctrl.ckmethod" // info array: how the procs checkpoint (informational)
	KeyJobCtrlCkptSignal  = "pmix.jctrl.ckptsig"  // int: likewise
	KeyJobCtrlCkptEvent   = "pmix.jctrl.ckptev"   // bool: likewise

	KeyQueryNamespaces            = "pmix.qry.ns"       // PMIx_Query_info: string, the active nspaces, comma-separated
	KeyQueryNamespaceInfo         = "pmix.qry.nsinfo"   // info array: per nspace, its PMIX_NSPACE, PMIX_CMD_LINE, PMIX_JOB_SIZE
	KeyQueryProcTable             = "pmix.qry.ptable"   // info array: a proc table of the job PMIX_NSPACE names (docs/cabi.md)
	KeyQueryLocalProcTable        = "pmix.qry.lptable"  // info array: likewise, its procs on the caller's node
	KeyQueryNumPsets              = "pmix.qry.psetnum"  // size: the number of process sets
	KeyQueryPsetNames             = "pmix.qry.psets"    // string: their names, comma-separated
	KeyQueryPsetMembership        = "pmix.qry.pmems"    // proc array: the members of the set PMIX_PSET_NAME names
	KeyQueryNumGroups             = "pmix.qry.pgrpnum"  // size: the number of process groups
	KeyQueryGroupNames            = "pmix.qry.pgrp"     // string: their names
	KeyQueryGroupMembership       = "pmix.qry.pgrpmems" // proc array: the members of the group a qualifier names
	KeyQuerySpawnSupport          = "pmix.qry.spawn"    // string: the spawn attributes supported, comma-separated
	KeyQueryAttributeSupport      = "pmix.qry.attrs"    // the attributes supported
	KeyQuerySupportedKeys         = "pmix.qry.keys"     // string: the query keys answered, comma-separated
	KeyQueryStableABIVersion      = "pmix.qry.stabiver" // string: "0.0", as OpenPMIx 4.2.2
	KeyQueryProvisionalABIVersion = "pmix.qry.prabiver" // string: likewise
	KeyQueryRefreshCache          = "pmix.qry.rfsh"     // bool qualifier: ask again, do not use a cache
	KeyPsetName                   = "pmix.pset.nm"      // string qualifier: a process set's name
	KeyCmdLine                    = "pmix.cmd.line"     // string: a job's command line
	KeyProcPid                    = "pmix.ppid"         // pid: a process's pid (PMIX_PROC_PID)
	KeyProcStateStatus            = "pmix.proc.state"   // proc state: a process's state

	KeyNodeList  = "pmix.nlist"     // string: the nodes a job runs on, comma-separated, in order of their first rank
	KeyNumNodes  = "pmix.num.nodes" // uint32: their number
	KeyServerURI = "pmix.srvr.uri"  // string: where the agent serving the caller listens
)

// knownKeys are the keys above: decoding an info whose key is one of
// them takes the constant instead of allocating the string again (an event
// info crosses a socket per handler it reaches). TestKnownKeysComplete
// keeps the list whole.
var knownKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		KeyNspace, KeyRank, KeyJobID, KeySessionID, KeyClusterID, KeyHostname, KeyNodeID,
		KeyJobSize, KeyLocalSize, KeyLocalRank, KeyNodeRank, KeyLocalPeers, KeyUnivSize,
		KeyMaxProcs, KeyAppNum, KeyAppRank, KeyAppSize, KeyAppLeader, KeyAppArgv, KeyJobNumApps, KeyUserID, KeyGroupID, KeyProcID, KeyEventHdlrName,
		KeyEventHdlrFirst, KeyEventHdlrLast, KeyEventHdlrFirstInCategory,
		KeyEventHdlrLastInCategory, KeyEventHdlrBefore, KeyEventHdlrAfter, KeyEventHdlrPrepend,
		KeyEventHdlrAppend, KeyEventJobLevel, KeyEventEnviroLevel, KeyEventCustomRange,
		KeyEventAffectedProc, KeyEventAffectedProcs, KeyEventNonDefault, KeyEventReturnObject,
		KeyEventDoNotCache, KeyEventSilentTerm, KeyEventProxy, KeyEventTextMessage,
		KeyEventTimestamp, KeyExitCode, KeyJobTermStatus, KeyProcTermStatus,
		KeyNotifyProcTermination, KeyNotifyProcAbnormalTermination, KeyJobRecoverable,
		KeyJobContinuous, KeyEventTerminateSession, KeyEventTerminateJob, KeyEventTerminateNode,
		KeyEventTerminateProc, KeyEventActionTimeout, KeyEventNoTermination,
		KeyEventWantTermination, KeyRange, KeyPersistence, KeyWait, KeyTimeout, KeyIOFComplete,
		KeyAccessPermissions, KeyAccessUserIDs, KeyAccessGroupIDs, KeyConnectNotifyEach,
		KeyConnectNotifyReq, KeyConnectOptional, KeyConnectXchgOnly, KeyConnectID, KeyCollectData,
		KeyImmediate, KeyOptional, KeyLogStderr, KeyLogStdout, KeyLogAgg, KeyLogKey, KeyLogVal,
		KeyConnectEarlyTermAllowed, KeyEventResolved, KeyEventAbortRequested, KeyEventSource,
		KeyEventRange, KeyEventEnvironment, KeyCredential, KeyCollectiveID, KeyDeadline, KeyNodeFenceLast, KeyIOFTime,
		KeyProgrammingModel, KeyModelLibraryName, KeyModelLibraryVersion, KeyThreadingModel,
		KeyLogMsg, KeyLogSyslog, KeyLogLocalSyslog, KeyLogGlobalSyslog, KeyLogEmail, KeyLogSyslogPri, KeyLogTimestamp,
		KeyLogGenerateTimestamp, KeyLogOnce, KeyLogSource, KeyLogTagOutput, KeyLogTimestampOutput, KeyLogXMLOutput,
		KeyJobCtrlKill, KeyJobCtrlTerminate, KeyJobCtrlSignal, KeyJobCtrlPause, KeyJobCtrlResume, KeyJobCtrlID,
		KeyJobCtrlPreemptible, KeyJobCtrlCkptMethod, KeyJobCtrlCkptSignal, KeyJobCtrlCkptEvent,
		KeyQueryNamespaces, KeyQueryNamespaceInfo, KeyQueryProcTable, KeyQueryLocalProcTable,
		KeyQueryNumPsets, KeyQueryPsetNames, KeyQueryPsetMembership, KeyQueryNumGroups, KeyQueryGroupNames,
		KeyQueryGroupMembership, KeyQuerySpawnSupport, KeyQueryAttributeSupport, KeyQuerySupportedKeys,
		KeyQueryStableABIVersion, KeyQueryProvisionalABIVersion, KeyQueryRefreshCache, KeyPsetName,
		KeyCmdLine, KeyProcPid, KeyProcStateStatus,
		KeyNodeList, KeyNumNodes, KeyServerURI,
	} {
		m[k] = k
	}
	return m
}()
