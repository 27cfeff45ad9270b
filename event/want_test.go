package event

import (
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
)

func TestTerminationWanted(t *testing.T) {
	p := pmix.Proc{Nspace: "j", Rank: 2}
	want := bus.Termination{Decision: bus.WantTermination, ByName: "policy", Required: true}
	for _, tc := range []struct {
		name string
		o    bus.Outcome
		ok   bool
		code pmix.Status
	}{
		{"undecided", bus.Outcome{Code: -404}, false, 0},
		{"no termination", bus.Outcome{Code: -404, Termination: bus.Termination{Decision: bus.NoTermination}}, false, 0},
		{"wanted", bus.Outcome{Code: -404, Termination: want}, true, -404},
		{"cut short by close", bus.Outcome{Code: -404, Status: pmix.ErrInit, Termination: want}, false, 0},
		{"by the abort chain", bus.Outcome{Code: -404, Abort: &bus.Outcome{Code: pmix.EventAbortRequested, Termination: want}}, true, pmix.EventAbortRequested},
	} {
		w, ok := TerminationWanted(p, tc.o)
		if ok != tc.ok || (ok && (w.Proc != p || w.Code != tc.code || w.By != "policy" || !w.Required)) {
			t.Errorf("%s: %+v, %v", tc.name, w, ok)
		}
		if ok && !strings.Contains(w.Text(), `"policy" wanted termination (PMIX_EVENT_WANT_TERMINATION, required)`) {
			t.Errorf("%s: text %q", tc.name, w.Text())
		}
	}
}
