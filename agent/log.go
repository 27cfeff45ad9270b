package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// PMIx_Log (the log frame): a client's messages are stored as diag
// records of its output in the cluster's stream, where its launcher reads
// them; a help message (PMIX_LOG_KEY and PMIX_LOG_VAL, the help file and
// topic, unless PMIX_LOG_AGG is false, as OpenPMIx's plog does) carries
// its file and topic, so the launcher shows the first of each and counts
// the rest. A process the launch service started logs into the capture of
// its stdout and stderr; any other client into a diag-only capture of its
// own, made on its first log and closed when it is deregistered.

// logRecord is a log frame read: what to store, and what to write to
// the node's syslog.
type logRecord struct {
	help *iof.Help // nil: not a help message
	text []byte    // nil: no diag record
	// syslog: PMIX_LOG_SYSLOG (and _LOCAL_, _GLOBAL_) messages, written
	// at priority pri, stamped with at (zero: "N/A").
	syslog []string
	pri    int
	at     time.Time
}

// logDefaultSyslogPri is LOG_ERR, OpenPMIx's default syslog priority.
const logDefaultSyslogPri = 3

// parseLog reads PMIx_Log's data and directives as OpenPMIx's plog
// framework does, for the channels pmixbus has: the PMIX_LOG_STDERR and
// PMIX_LOG_STDOUT strings, joined in order, are one diag record; with
// PMIX_LOG_KEY and PMIX_LOG_VAL (and PMIX_LOG_AGG not false) it is a help
// message of that file and topic; PMIX_LOG_MSG is Open MPI 4.1's
// show-help message (iof.ParseOMPIHelp), a help message too; the
// PMIX_LOG_SYSLOG strings go to the node's syslog at PMIX_LOG_SYSLOG_PRI,
// stamped with PMIX_LOG_TIMESTAMP (or the time now, with
// PMIX_LOG_GENERATE_TIMESTAMP). With PMIX_LOG_ONCE only the first entry
// of data that a channel takes is logged. Other directives are ignored
// unless required (PMIX_INFO_REQD), as OpenPMIx ignores them. now gives
// the time.
//
// Errors: pmix.ErrNotSupported naming a data key pmixbus does not log to
// (PMIX_LOG_EMAIL, …; with PMIX_LOG_ONCE only when no entry is taken) or
// a required directive it does not know; pmix.ErrBadParam for no data, a
// value of the wrong type, an empty message, a priority out of 0-7, an
// Open MPI message that does not parse, or messages over
// proto.MaxLogText bytes.
func parseLog(data, directives []pmix.Info, now func() time.Time) (logRecord, error) {
	r := logRecord{pri: logDefaultSyslogPri}
	agg, once := true, false
	var file, topic string
	for _, d := range directives {
		ok := true
		switch d.Key {
		case pmix.KeyLogAgg:
			agg, ok = d.Value.Bool()
		case pmix.KeyLogKey:
			file, ok = d.Value.Str()
		case pmix.KeyLogVal:
			topic, ok = d.Value.Str()
		case pmix.KeyLogOnce:
			once, ok = d.Value.Bool()
		case pmix.KeyLogSyslogPri:
			var n int64
			n, ok = d.Value.Int()
			if ok && (n < 0 || n > 7) {
				return logRecord{}, pmix.Errorf(pmix.ErrBadParam, "log directive %s: priority %d is not a syslog level (0-7)", d.Key, n)
			}
			r.pri = int(n)
		case pmix.KeyLogTimestamp:
			if t, isTime := d.Value.Time(); isTime {
				r.at = t
			} else if n, isInt := d.Value.Int(); isInt {
				r.at = time.Unix(n, 0)
			} else {
				ok = false
			}
		case pmix.KeyLogGenerateTimestamp:
			var gen bool
			gen, ok = d.Value.Bool()
			if gen && r.at.IsZero() {
				r.at = now()
			}
		case pmix.KeyLogSource, pmix.KeyLogTagOutput, pmix.KeyLogTimestampOutput, pmix.KeyLogXMLOutput:
			// Accepted: the caller is the source, and the launcher's
			// options format the output.
		default:
			if d.IsRequired() {
				return logRecord{}, pmix.Errorf(pmix.ErrNotSupported, "required log directive %s is not supported", pmix.Quote(d.Key))
			}
		}
		if !ok {
			return logRecord{}, pmix.Errorf(pmix.ErrBadParam, "log directive %s: %v is of the wrong type", d.Key, d.Value)
		}
	}
	if len(data) == 0 {
		return logRecord{}, pmix.Errorf(pmix.ErrBadParam, "log with no data: give %s, %s, %s or %s", pmix.KeyLogStderr, pmix.KeyLogStdout, pmix.KeyLogSyslog, pmix.KeyLogMsg)
	}
	size, taken := 0, false
	var unsupported error
	for _, d := range data {
		if once && taken {
			break
		}
		var s string
		switch d.Key {
		case pmix.KeyLogStderr, pmix.KeyLogStdout, pmix.KeyLogSyslog, pmix.KeyLogLocalSyslog, pmix.KeyLogGlobalSyslog:
			var ok bool
			if s, ok = d.Value.Str(); !ok {
				return logRecord{}, pmix.Errorf(pmix.ErrBadParam, "log %s: %v is not a string", d.Key, d.Value)
			}
			if s == "" {
				return logRecord{}, pmix.Errorf(pmix.ErrBadParam, "log %s: empty message", d.Key)
			}
		case pmix.KeyLogMsg:
			b, ok := d.Value.Bytes()
			if !ok {
				return logRecord{}, pmix.Errorf(pmix.ErrBadParam, "log %s: %v is not a byte object", d.Key, d.Value)
			}
			help, text, err := iof.ParseOMPIHelp(b)
			if err != nil {
				return logRecord{}, pmix.Errorf(pmix.ErrBadParam, "log %s: %v", d.Key, err)
			}
			if r.help == nil {
				r.help = &help
			}
			s = text // empty: a message mpirun renders from its own files
		default:
			unsupported = pmix.Errorf(pmix.ErrNotSupported, "log channel %s is not supported: pmixbus logs %s, %s, %s and %s", pmix.Quote(d.Key), pmix.KeyLogStderr, pmix.KeyLogStdout, pmix.KeyLogSyslog, pmix.KeyLogMsg)
			if !once {
				return logRecord{}, unsupported
			}
			continue
		}
		taken = true
		if size += len(s); size > proto.MaxLogText {
			return logRecord{}, pmix.Errorf(pmix.ErrBadParam, "log of %d bytes or more: at most %d", size, proto.MaxLogText)
		}
		switch d.Key {
		case pmix.KeyLogSyslog, pmix.KeyLogLocalSyslog, pmix.KeyLogGlobalSyslog:
			r.syslog = append(r.syslog, s)
		default:
			r.text = append(r.text, s...)
		}
	}
	if !taken {
		return logRecord{}, unsupported
	}
	if len(r.text) == 0 {
		r.help = nil
	}
	if r.help == nil && agg && file != "" && topic != "" && len(r.text) > 0 {
		r.help = &iof.Help{File: file, Topic: topic}
	}
	return r, nil
}

// syslogLine is the message a client's PMIX_LOG_SYSLOG entry makes, as
// OpenPMIx's syslog channel writes it: the time given (or N/A), the
// severity, the source and the message.
func syslogLine(r logRecord, src pmix.Proc, msg string) string {
	at := "N/A"
	if !r.at.IsZero() {
		at = r.at.Format(time.ANSIC)
	}
	sev := [...]string{"EMERGENCY", "ALERT", "CRITICAL", "ERROR", "WARNING", "NOTICE", "INFO", "DEBUG"}[r.pri]
	return fmt.Sprintf("%s %s PROC %s:%d REPORTS: %s", at, sev, src.Nspace, src.Rank, msg)
}

// maxLogsInFlight bounds the log frames of one client whose records are
// not stored yet: a client that logs faster than NATS stores is made to
// wait (its agent stops reading its socket), as a process that writes
// faster than its output is stored waits in write(2).
const maxLogsInFlight = 64

// log serves a log frame. The diag record is queued at once, so a
// client's logs are stored in the order it sent them; the reply waits, on
// a goroutine of its own, until it is stored, so that the process's end
// comes after it in the stream, and until the syslog messages are
// written.
func (cc *clientConn) log(f *proto.Frame) {
	r, err := parseLog(f.Info, f.Results, time.Now)
	if err != nil {
		cc.reply(f, err, nil)
		return
	}
	var wait func(context.Context) error
	var logs chan struct{}
	if len(r.text) > 0 {
		src, err := cc.a.logSource(cc.entry)
		if err != nil {
			cc.reply(f, err, nil)
			return
		}
		if cc.logs == nil {
			cc.logs = make(chan struct{}, maxLogsInFlight)
		}
		select {
		case cc.logs <- struct{}{}:
		case <-cc.a.done:
			cc.reply(f, ErrClosed, nil)
			return
		}
		if wait, err = src.DiagStored(r.help, r.text); err != nil {
			<-cc.logs
			cc.reply(f, err, nil)
			return
		}
		logs = cc.logs
	}
	proc := cc.entry.proc
	if !cc.a.goFunc(func() {
		var err error
		if wait != nil {
			err = wait(cc.a.ctx)
			<-logs
		}
		for _, m := range r.syslog {
			if err == nil {
				err = cc.a.syslog(r.pri, syslogLine(r, proc, m))
			}
		}
		cc.reply(f, err, nil)
	}) {
		if logs != nil {
			<-logs
		}
		cc.reply(f, ErrClosed, nil)
	}
}

// logSource is where the logs of client e go: the capture of its process
// if the launch service started it, else its own diag-only capture, made
// now if it has none.
//
// Errors: pmix.ErrInvalidOperation for a client deregistered meanwhile;
// iof.ErrClosed once the agent shuts down.
func (a *Agent) logSource(e *clientEntry) (*iof.Source, error) {
	if d := a.launcher.Load(); d != nil {
		if src := d.OutputSource(e.proc); src != nil {
			return src, nil
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case e.diag != nil:
		return e.diag, nil
	case a.expected[e.proc] != e:
		return nil, pmix.Errorf(pmix.ErrInvalidOperation, "log of client %v: deregistered", e.proc)
	case a.output == nil:
		return nil, iof.ErrClosed
	}
	src, err := a.output.Source(e.proc, iof.SourceOptions{Incarnation: "client-" + e.incarnation, DiagOnly: true})
	if err != nil {
		return nil, err
	}
	e.diag = src
	return src, nil
}

// takeDiagLocked takes a deregistered client's diag-only capture, for
// closeDiag. a.mu is held.
func takeDiagLocked(e *clientEntry) *iof.Source {
	src := e.diag
	e.diag = nil
	return src
}

// closeDiag ends diag-only captures: what they hold is stored, then their
// end. On goroutines of the agent's, so that a host deregistering a
// client does not wait for NATS; at Shutdown the output service's Close
// ends them.
func (a *Agent) closeDiag(srcs ...*iof.Source) {
	for _, src := range srcs {
		if src == nil {
			continue
		}
		a.goFunc(func() {
			if err := src.Close(); err != nil {
				a.log.Warn("storing the end of a client's logs", "err", err)
			}
		})
	}
}

// syslog writes a client's syslog message (Config.Syslog). A node with no
// syslog daemon gets it in the agent's own log instead, and the client
// success, as syslog(3) never fails in OpenPMIx's server.
func (a *Agent) syslog(pri int, msg string) error {
	if a.cfg.Syslog != nil {
		return a.cfg.Syslog(pri, msg)
	}
	if err := iof.LocalSyslog(pri, msg); err != nil {
		a.log.Warn("a client's syslog message, in the agent's log", "priority", pri, "message", msg, "err", err)
	}
	return nil
}
