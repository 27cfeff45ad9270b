package trace

import (
	"testing"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
)

func TestNames(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{Status(pmix.EventActionComplete), "COMPLETE"},
		{Status(pmix.ErrNotFound), "PMIX_ERR_NOT_FOUND"},
		{Range(pmix.RangeSession), "SESSION"},
		{Code(pmix.EventNodeDown), "PMIX_EVENT_NODE_DOWN(-231)"},
		{Code(pmix.ExternalErrBase - 1), "code -3001"},
		{Proc(pmix.Proc{}), ""},
		{Proc(pmix.Proc{Nspace: "j", Rank: 2}), "j.2"},
		{Origin(bus.Origin{Cluster: "A", Node: "n1"}), "A/n1 RM"},
		{Origin(bus.Origin{Cluster: "A", Node: "n1", Proc: pmix.Proc{Nspace: "j", Rank: 0}}), "A/n1 j.0"},
		{Handler(bus.Ran{ID: 3}), "#3"},
	} {
		if tt.got != tt.want {
			t.Errorf("%q, want %q", tt.got, tt.want)
		}
	}
}

func TestChain(t *testing.T) {
	tests := []struct {
		o    bus.Outcome
		want string
	}{
		{bus.Outcome{}, "no handler ran"},
		{bus.Outcome{Ran: []bus.Ran{{Name: "a", Status: pmix.EventNoActionTaken}, {Name: "b", Status: pmix.EventActionComplete}}, Completed: true},
			"a:no-action > b:COMPLETE => completed"},
		{bus.Outcome{Ran: []bus.Ran{{Name: "slow", Status: pmix.ErrTimeout, TimedOut: true}}, Status: pmix.ErrTimeout},
			"slow:PMIX_ERR_TIMEOUT(timed out) => PMIX_ERR_TIMEOUT"},
		{bus.Outcome{Ran: []bus.Ran{{Name: "p", Status: pmix.EventNoActionTaken}},
			Termination: bus.Termination{Decision: bus.WantTermination, Required: true, ByName: "p"}},
			"p:no-action => want-termination (required, by p)"},
	}
	for _, tt := range tests {
		if got := Chain(tt.o); got != tt.want {
			t.Errorf("Chain(%+v) = %q, want %q", tt.o, got, tt.want)
		}
	}
}
