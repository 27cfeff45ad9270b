package client

import (
	"context"

	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// Log logs data, as PMIx_Log does (docs/protocol.md, *Log*): each
// PMIX_LOG_STDERR or PMIX_LOG_STDOUT string of data (pmix.KeyLogStderr,
// pmix.KeyLogStdout) is stored, in order, as one diagnostic record of
// this process's output, which its launcher writes to its stderr (pmixbus
// records both as diagnostics). Directives: PMIX_LOG_KEY and PMIX_LOG_VAL
// (strings: a help file and topic) make the message a help message, which
// the launcher shows once per file and topic, counting the duplicates of
// every process of the run, unless PMIX_LOG_AGG (bool) is false, as
// OpenPMIx's plog does. pmix.KeyLogMsg is Open MPI 4.1's help message
// (iof.ParseOMPIHelp). pmix.KeyLogSyslog (and its local and global forms)
// go to the syslog of the agent's node at pmix.KeyLogSyslogPri, stamped
// with pmix.KeyLogTimestamp (or the time now with
// pmix.KeyLogGenerateTimestamp); pmix.KeyLogOnce logs the first entry a
// channel takes only. It returns once the agent has stored the message, so
// it is shown even if the process exits at once.
//
// Errors: PMIX_ERR_NOT_SUPPORTED naming a data key of another channel
// (email) or a required directive pmixbus does not know;
// PMIX_ERR_BAD_PARAM for no data, a value of the wrong type, an empty
// message or messages over proto.MaxLogText bytes; ErrLostConnection;
// PMIX_ERR_TIMEOUT if ctx ends first.
func (c *Client) Log(ctx context.Context, data, directives []pmix.Info) error {
	_, err := c.request(ctx, &proto.Frame{Type: proto.TypeLog, Info: data, Results: directives})
	return err
}

// LogCB is the callback form of Log (PMIx_Log_nb): it returns at once and
// calls cb from another goroutine.
func (c *Client) LogCB(data, directives []pmix.Info, cb func(error)) {
	c.async(func(ctx context.Context) { cb(c.Log(ctx, data, directives)) })
}

// ShowHelp sends a rendered help message of file and topic, as
// orte_show_help and pmix_show_help do: the launcher shows the first
// message of each (file, topic) at once and counts the others of every
// process of the run, printing "N more processes have sent help message
// FILE / TOPIC" every 5 s and at the end (pmixbus run --no-aggregate-help
// shows them all). It is Log with PMIX_LOG_STDERR text and PMIX_LOG_KEY
// file, PMIX_LOG_VAL topic.
//
// Errors: PMIX_ERR_BAD_PARAM for an empty file, topic or text, or a text
// over proto.MaxLogText bytes; those of Log.
func (c *Client) ShowHelp(ctx context.Context, file, topic, text string) error {
	if file == "" || topic == "" {
		return pmix.Errorf(pmix.ErrBadParam, "help message of file %s and topic %s: both are needed", pmix.Quote(file), pmix.Quote(topic))
	}
	return c.Log(ctx, []pmix.Info{pmix.NewInfo(pmix.KeyLogStderr, pmix.String(text))}, []pmix.Info{
		pmix.NewInfo(pmix.KeyLogKey, pmix.String(file)),
		pmix.NewInfo(pmix.KeyLogVal, pmix.String(topic)),
	})
}
