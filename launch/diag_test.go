package launch

import (
	"testing"

	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/pmix"
)

// TestOutputSourceFromTheStart: a rank logs through the capture its output
// goes to from the moment its process exists, before its start has
// returned too. A rank that logged in that instant got a capture of its
// own, whose records the launcher took for ones it had shown (cabi's
// TestLaunchedLog lost a help message 1 run in 9; a 3 ms pause after
// Start made it fail every time).
func TestOutputSourceFromTheStart(t *testing.T) {
	starting, running := &iof.Source{}, &iof.Source{}
	j := &localJob{
		procs:    map[pmix.Rank]*localProc{1: {out: running}, 2: {out: running, ended: "exited"}},
		starting: map[pmix.Rank]*iof.Source{0: starting},
	}
	d := &Daemon{jobs: map[string]*localJob{"job": j}}
	for _, c := range []struct {
		proc pmix.Proc
		want *iof.Source
	}{
		{pmix.Proc{Nspace: "job", Rank: 0}, starting},
		{pmix.Proc{Nspace: "job", Rank: 1}, running},
		{pmix.Proc{Nspace: "job", Rank: 2}, nil},
		{pmix.Proc{Nspace: "job", Rank: 3}, nil},
		{pmix.Proc{Nspace: "other", Rank: 0}, nil},
	} {
		if got := d.OutputSource(c.proc); got != c.want {
			t.Errorf("OutputSource(%v) = %p, want %p", c.proc, got, c.want)
		}
	}
}
