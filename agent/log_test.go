package agent

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/pmix"
)

// ompiHelp is Open MPI 4.1's PMIX_LOG_MSG blob of a rendered help message.
func ompiHelp(file, topic, text string) pmix.Info {
	var b []byte
	str := func(s string) {
		b = binary.BigEndian.AppendUint32(b, 1)
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)+1))
		b = append(append(b, s...), 0)
	}
	str(file)
	str(topic)
	b = append(binary.BigEndian.AppendUint32(b, 1), 1)
	str(text)
	return pmix.NewInfo(pmix.KeyLogMsg, pmix.Bytes(b))
}

// parseLog reads data and directives as OpenPMIx's plog does: a help
// message needs both KEY and VAL and AGG not false; the texts are joined
// in order; Open MPI's PMIX_LOG_MSG is a help message; syslog messages
// are set apart; with ONCE the first channel taken is the only one.
func TestParseLog(t *testing.T) {
	str := func(k, v string) pmix.Info { return pmix.NewInfo(k, pmix.String(v)) }
	flag := func(k string, b bool) pmix.Info { return pmix.NewInfo(k, pmix.Bool(b)) }
	key, val := str(pmix.KeyLogKey, "help-x.txt"), str(pmix.KeyLogVal, "topic")
	help := &iof.Help{File: "help-x.txt", Topic: "topic"}
	abort := &iof.Help{File: "help-mpi-api.txt", Topic: "mpi-abort"}
	at := time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC)
	now := func() time.Time { return at }
	for _, tt := range []struct {
		name             string
		data, directives []pmix.Info
		text             string
		help             *iof.Help
		syslog           []string
		pri              int
		at               time.Time
	}{
		{name: "plain", data: []pmix.Info{str(pmix.KeyLogStderr, "a\n")}, text: "a\n"},
		{name: "stdout and stderr joined", data: []pmix.Info{str(pmix.KeyLogStdout, "a\n"), str(pmix.KeyLogStderr, "b\n")}, text: "a\nb\n"},
		{name: "help", data: []pmix.Info{str(pmix.KeyLogStderr, "a\n")}, directives: []pmix.Info{key, val}, text: "a\n", help: help},
		{name: "help, agg true", data: []pmix.Info{str(pmix.KeyLogStderr, "a\n")}, directives: []pmix.Info{flag(pmix.KeyLogAgg, true), key, val}, text: "a\n", help: help},
		{name: "agg false", data: []pmix.Info{str(pmix.KeyLogStderr, "a\n")}, directives: []pmix.Info{flag(pmix.KeyLogAgg, false), key, val}, text: "a\n"},
		{name: "key without val", data: []pmix.Info{str(pmix.KeyLogStderr, "a\n")}, directives: []pmix.Info{key}, text: "a\n"},
		{name: "Open MPI's help message", data: []pmix.Info{ompiHelp("help-mpi-api.txt", "mpi-abort", "MPI_ABORT was invoked\n")}, text: "MPI_ABORT was invoked\n", help: abort},
		{name: "syslog", data: []pmix.Info{str(pmix.KeyLogSyslog, "s1"), str(pmix.KeyLogStderr, "a\n"), str(pmix.KeyLogLocalSyslog, "s2")},
			directives: []pmix.Info{pmix.NewInfo(pmix.KeyLogSyslogPri, pmix.Int32(6)), flag(pmix.KeyLogGenerateTimestamp, true)},
			text:       "a\n", syslog: []string{"s1", "s2"}, pri: 6, at: at},
		{name: "syslog timestamp given", data: []pmix.Info{str(pmix.KeyLogGlobalSyslog, "s")}, directives: []pmix.Info{pmix.NewInfo(pmix.KeyLogTimestamp, pmix.Time(at))},
			syslog: []string{"s"}, pri: 3, at: at},
		{name: "once", data: []pmix.Info{pmix.NewInfo(pmix.KeyLogEmail, pmix.String("x")), str(pmix.KeyLogSyslog, "s"), str(pmix.KeyLogStderr, "a\n")},
			directives: []pmix.Info{flag(pmix.KeyLogOnce, true)}, syslog: []string{"s"}, pri: 3},
		{name: "output format directives and unknown ones accepted", data: []pmix.Info{str(pmix.KeyLogStdout, "a\n")},
			directives: []pmix.Info{flag(pmix.KeyLogTagOutput, true), flag(pmix.KeyLogXMLOutput, true), flag(pmix.KeyLogTimestampOutput, true), flag("x.unknown", true),
				pmix.NewInfo(pmix.KeyLogSource, pmix.ProcValue(pmix.Proc{Nspace: "n", Rank: 1}))}, text: "a\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := parseLog(tt.data, tt.directives, now)
			if err != nil {
				t.Fatal(err)
			}
			if string(r.text) != tt.text || (r.help == nil) != (tt.help == nil) || (r.help != nil && *r.help != *tt.help) {
				t.Errorf("parseLog = %q, %+v; want %q, %+v", r.text, r.help, tt.text, tt.help)
			}
			if strings.Join(r.syslog, "|") != strings.Join(tt.syslog, "|") || (tt.syslog != nil && (r.pri != tt.pri || !r.at.Equal(tt.at))) {
				t.Errorf("syslog %q at %d, %v; want %q at %d, %v", r.syslog, r.pri, r.at, tt.syslog, tt.pri, tt.at)
			}
		})
	}
	for _, tt := range []struct {
		name             string
		data, directives []pmix.Info
		want             pmix.Status
	}{
		{"no data", nil, nil, pmix.ErrBadParam},
		{"email", []pmix.Info{pmix.NewInfo(pmix.KeyLogEmail, pmix.String("x"))}, nil, pmix.ErrNotSupported},
		{"once, nothing taken", []pmix.Info{pmix.NewInfo(pmix.KeyLogEmail, pmix.String("x"))}, []pmix.Info{flag(pmix.KeyLogOnce, true)}, pmix.ErrNotSupported},
		{"required unknown directive", []pmix.Info{str(pmix.KeyLogStderr, "a")}, []pmix.Info{pmix.Required(flag("x.unknown", true))}, pmix.ErrNotSupported},
		{"priority out of range", []pmix.Info{str(pmix.KeyLogSyslog, "a")}, []pmix.Info{pmix.NewInfo(pmix.KeyLogSyslogPri, pmix.Int32(8))}, pmix.ErrBadParam},
		{"empty", []pmix.Info{str(pmix.KeyLogStderr, "")}, nil, pmix.ErrBadParam},
		{"not a string", []pmix.Info{pmix.NewInfo(pmix.KeyLogSyslog, pmix.Int32(1))}, nil, pmix.ErrBadParam},
		{"bad Open MPI message", []pmix.Info{pmix.NewInfo(pmix.KeyLogMsg, pmix.Bytes([]byte{1, 2}))}, nil, pmix.ErrBadParam},
		{"too long", []pmix.Info{str(pmix.KeyLogStderr, strings.Repeat("x", 40<<10)), str(pmix.KeyLogSyslog, strings.Repeat("x", 40<<10))}, nil, pmix.ErrBadParam},
	} {
		if _, err := parseLog(tt.data, tt.directives, now); pmix.StatusOf(err) != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, err := parseLog(nil, nil, now); !errors.Is(err, pmix.ErrBadParam) {
		t.Errorf("no data: %v", err)
	}
}

// TestSyslogLine: the syslog message names the time, severity and source.
func TestSyslogLine(t *testing.T) {
	r := logRecord{pri: 4, at: time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC)}
	if got, want := syslogLine(r, pmix.Proc{Nspace: "job", Rank: 2}, "disk full"), "Sat Nov 28 02:00:00 2026 WARNING PROC job:2 REPORTS: disk full"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if got := syslogLine(logRecord{pri: 3}, pmix.Proc{Nspace: "job"}, "m"); !strings.HasPrefix(got, "N/A ERROR") {
		t.Errorf("%q", got)
	}
}
