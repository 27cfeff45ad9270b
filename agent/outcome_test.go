package agent

import (
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
)

// The hand-written encoding reads back as reflection would have written it.
func TestOutcomeReportRoundTrip(t *testing.T) {
	o := bus.Outcome{
		Code: pmix.EventNodeDown, Results: []pmix.Info{pmix.NewInfo("h", pmix.StatusValue(pmix.EventNoActionTaken))},
		Completed: true, Resolved: true,
		Termination: bus.Termination{Decision: bus.WantTermination, Required: true, By: 3, ByName: "h"},
		Ran:         []bus.Ran{{ID: 3, Name: "h", Status: pmix.EventActionComplete}, {ID: 4, TimedOut: true, Status: pmix.ErrTimeout}},
	}
	abort := o
	abort.Abort = nil
	o.Abort = &abort
	in := OutcomeReport{EventID: "x.1", Cluster: "A", Node: "n1", Client: pmix.Proc{Nspace: "j", Rank: 1}, Outcome: o}
	b, err := in.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out, err := UnmarshalOutcome(b)
	if err != nil {
		t.Fatal(err)
	}
	refl, err := msgpack.Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	viaRefl, err := UnmarshalOutcome(refl)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, viaRefl) {
		t.Fatalf("hand-written and reflected encodings differ:\n%+v\n%+v", out, viaRefl)
	}
	if out.Outcome.Abort == nil || out.Outcome.Termination.ByName != "h" || len(out.Outcome.Ran) != 2 || !out.Outcome.Ran[1].TimedOut {
		t.Fatalf("got %+v", out)
	}
}
