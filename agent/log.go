package agent

import (
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

// logRecord is a log frame read: what to store.
type logRecord struct {
	help *iof.Help // nil: not a help message
	text []byte
}

// parseLog reads PMIx_Log's data and directives as OpenPMIx's plog base
// does, for the channels pmixbus has: the PMIX_LOG_STDERR and
// PMIX_LOG_STDOUT strings, joined in order, are one record; with
// PMIX_LOG_KEY and PMIX_LOG_VAL (and PMIX_LOG_AGG not false) it is a help
// message of that file and topic.
//
// Errors: pmix.ErrNotSupported naming a data key or directive pmixbus
// does not log with; pmix.ErrBadParam for no data, a value of the wrong
// type, an empty message, or messages over proto.MaxLogText bytes.
func parseLog(data, directives []pmix.Info) (logRecord, error) {
	agg := true
	var file, topic string
	for _, d := range directives {
		var ok bool
		switch d.Key {
		case pmix.KeyLogAgg:
			agg, ok = d.Value.Bool()
		case pmix.KeyLogKey:
			file, ok = d.Value.Str()
		case pmix.KeyLogVal:
			topic, ok = d.Value.Str()
		default:
			return logRecord{}, pmix.Errorf(pmix.ErrNotSupported, "log directive %s is not supported: pmixbus logs with %s, %s and %s", pmix.Quote(d.Key), pmix.KeyLogAgg, pmix.KeyLogKey, pmix.KeyLogVal)
		}
		if !ok {
			return logRecord{}, pmix.Errorf(pmix.ErrBadParam, "log directive %s: %v is of the wrong type", d.Key, d.Value)
		}
	}
	if len(data) == 0 {
		return logRecord{}, pmix.Errorf(pmix.ErrBadParam, "log with no data: give %s or %s", pmix.KeyLogStderr, pmix.KeyLogStdout)
	}
	var text []byte
	for _, d := range data {
		if d.Key != pmix.KeyLogStderr && d.Key != pmix.KeyLogStdout {
			return logRecord{}, pmix.Errorf(pmix.ErrNotSupported, "log channel %s is not supported: pmixbus logs %s and %s", pmix.Quote(d.Key), pmix.KeyLogStderr, pmix.KeyLogStdout)
		}
		s, ok := d.Value.Str()
		switch {
		case !ok:
			return logRecord{}, pmix.Errorf(pmix.ErrBadParam, "log %s: %v is not a string", d.Key, d.Value)
		case s == "":
			return logRecord{}, pmix.Errorf(pmix.ErrBadParam, "log %s: empty message", d.Key)
		case len(text)+len(s) > proto.MaxLogText:
			return logRecord{}, pmix.Errorf(pmix.ErrBadParam, "log of %d bytes or more: at most %d", len(text)+len(s), proto.MaxLogText)
		}
		text = append(text, s...)
	}
	r := logRecord{text: text}
	if agg && file != "" && topic != "" {
		r.help = &iof.Help{File: file, Topic: topic}
	}
	return r, nil
}

// maxLogsInFlight bounds the log frames of one client whose records are
// not stored yet: a client that logs faster than NATS stores is made to
// wait (its agent stops reading its socket), as a process that writes
// faster than its output is stored waits in write(2).
const maxLogsInFlight = 64

// log serves a log frame. The record is queued at once, so a client's
// logs are stored in the order it sent them; the reply waits, on a
// goroutine of its own, until it is stored, so that the process's end
// comes after it in the stream.
func (cc *clientConn) log(f *proto.Frame) {
	r, err := parseLog(f.Info, f.Results)
	if err != nil {
		cc.reply(f, err, nil)
		return
	}
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
	wait, err := src.DiagStored(r.help, r.text)
	if err != nil {
		<-cc.logs
		cc.reply(f, err, nil)
		return
	}
	logs := cc.logs
	if !cc.a.goFunc(func() {
		err := wait(cc.a.ctx)
		<-logs
		cc.reply(f, err, nil)
	}) {
		<-logs
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
