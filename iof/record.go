package iof

import "github.com/pmixbus/pmixbus/iof/record"

// The types of a process's output live in iof/record, which imports no
// NATS (the client library uses them); these names are theirs.
type (
	// Channel is a PMIx I/O channel (pmix_iof_channel_t).
	Channel = record.Channel
	// Record is one piece of a process's output or input.
	Record = record.Record
	// Help names the help message a diag record carries.
	Help = record.Help
)

// The channels, with PMIx's values (PMIX_FWD_STDIN_CHANNEL and friends).
const (
	STDIN   = record.STDIN
	STDOUT  = record.STDOUT
	STDERR  = record.STDERR
	STDDIAG = record.STDDIAG
)
