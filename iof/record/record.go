package record

import (
	"strconv"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
)

// Channel is a PMIx I/O channel (pmix_iof_channel_t). The values are PMIx's,
// so a channel mask from a C client means the same here.
type Channel uint16

// The channels, with PMIx's values (PMIX_FWD_STDIN_CHANNEL and friends).
const (
	STDIN   Channel = 0x1
	STDOUT  Channel = 0x2
	STDERR  Channel = 0x4
	STDDIAG Channel = 0x8
)

// String returns the name OpenPMIx puts in its tags: "stdout", "stderr",
// "stddiag", "stdin".
func (c Channel) String() string {
	switch c {
	case STDIN:
		return "stdin"
	case STDOUT:
		return "stdout"
	case STDERR:
		return "stderr"
	case STDDIAG:
		return "stddiag"
	}
	return "channel(" + strconv.Itoa(int(c)) + ")"
}

// Record is one piece of a process's output or input: what the IOF stream
// will carry, one record per message, from the agent that holds the
// process's pipes to every viewer.
//
// Outside RAW mode the agent cuts output into whole lines (at '\n', at a size
// limit, or after an idle time), so Data normally ends in '\n'; the Display
// relies on it to never put a tag mid-line. Seq counts the records of one
// (Nspace, Rank, Channel) from 1, so a viewer can tell a gap or a duplicate.
// Time is stamped at the source. Complete marks the end of the channel
// (PMIX_IOF_COMPLETE): it may carry data, and a record with empty Data and
// Complete false is a no-op, never an end.
type Record struct {
	Cluster  string
	Nspace   string
	Rank     pmix.Rank
	Channel  Channel
	Seq      uint64
	Time     time.Time
	Data     []byte
	Complete bool
	// Help is set on a STDDIAG record that is a help message: the
	// launcher shows the first of its (file, topic) and counts the rest.
	Help *Help
}

// Help names the help message a diag record carries.
type Help struct {
	File, Topic string
}
