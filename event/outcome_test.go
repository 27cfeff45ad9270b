package event

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
	in := []OutcomeReport{
		{EventID: "x.1", Cluster: "A", Node: "n1", Client: pmix.Proc{Nspace: "j", Rank: 1}, Outcome: o},
		{EventID: "x.2", Cluster: "A", Node: "n1"},
	}
	b, err := MarshalOutcomes(in)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := UnmarshalOutcomes(b)
	if err != nil {
		t.Fatal(err)
	}
	refl, err := msgpack.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	viaRefl, err := UnmarshalOutcomes(refl)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(outs, viaRefl) {
		t.Fatalf("hand-written and reflected encodings differ:\n%+v\n%+v", outs, viaRefl)
	}
	if len(outs) != 2 || outs[1].EventID != "x.2" {
		t.Fatalf("got %+v", outs)
	}
	out := outs[0]
	if out.Outcome.Abort == nil || out.Outcome.Termination.ByName != "h" || len(out.Outcome.Ran) != 2 || !out.Outcome.Ran[1].TimedOut {
		t.Fatalf("got %+v", out)
	}
}
