package agent

import (
	"testing"

	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/pmix"
)

// parseLog reads data and directives as OpenPMIx's plog does: a help
// message needs both KEY and VAL and AGG not false; the texts are joined
// in order.
func TestParseLog(t *testing.T) {
	str := func(k, v string) pmix.Info { return pmix.NewInfo(k, pmix.String(v)) }
	agg := func(b bool) pmix.Info { return pmix.NewInfo(pmix.KeyLogAgg, pmix.Bool(b)) }
	key, val := str(pmix.KeyLogKey, "help-x.txt"), str(pmix.KeyLogVal, "topic")
	help := &iof.Help{File: "help-x.txt", Topic: "topic"}
	for _, tt := range []struct {
		name             string
		data, directives []pmix.Info
		text             string
		help             *iof.Help
	}{
		{"plain", []pmix.Info{str(pmix.KeyLogStderr, "a\n")}, nil, "a\n", nil},
		{"stdout and stderr joined", []pmix.Info{str(pmix.KeyLogStdout, "a\n"), str(pmix.KeyLogStderr, "b\n")}, nil, "a\nb\n", nil},
		{"help", []pmix.Info{str(pmix.KeyLogStderr, "a\n")}, []pmix.Info{key, val}, "a\n", help},
		{"help, agg true", []pmix.Info{str(pmix.KeyLogStderr, "a\n")}, []pmix.Info{agg(true), key, val}, "a\n", help},
		{"agg false", []pmix.Info{str(pmix.KeyLogStderr, "a\n")}, []pmix.Info{agg(false), key, val}, "a\n", nil},
		{"key without val", []pmix.Info{str(pmix.KeyLogStderr, "a\n")}, []pmix.Info{key}, "a\n", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := parseLog(tt.data, tt.directives)
			if err != nil {
				t.Fatal(err)
			}
			if string(r.text) != tt.text || (r.help == nil) != (tt.help == nil) || (r.help != nil && *r.help != *tt.help) {
				t.Errorf("parseLog = %q, %+v; want %q, %+v", r.text, r.help, tt.text, tt.help)
			}
		})
	}
}
