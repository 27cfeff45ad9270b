package bus_test

import (
	"context"
	"fmt"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
)

func Example() {
	me := pmix.Proc{Nspace: "A:job1", Rank: 0}
	cfg := bus.DefaultConfig()
	cfg.Self = bus.Origin{Cluster: "A", Node: "n1", Proc: me}
	reg, err := bus.NewRegistry(cfg)
	if err != nil {
		panic(err)
	}
	defer reg.Close()

	// A default handler that would abort: it should run last.
	reg.Register(nil, []pmix.Info{
		pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("fatal")),
		pmix.NewInfo(pmix.KeyEventHdlrLast, pmix.Bool(true)),
	}, func(c *bus.Call, done bus.Done) {
		if resolved, _ := pmix.LookupValue(c.Info, pmix.KeyEventResolved); resolved.Equal(pmix.Bool(true)) {
			done(pmix.EventNoActionTaken, nil)
			return
		}
		done(pmix.EventPartialActionTaken, []pmix.Info{pmix.NewInfo(pmix.KeyEventWantTermination, pmix.Bool(true))})
	})

	// A handler for one code that completes later, from another goroutine.
	reg.Register([]pmix.Status{pmix.EventProcTerminated}, []pmix.Info{
		pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("respawn")),
	}, func(c *bus.Call, done bus.Done) {
		go done(pmix.EventPartialActionTaken, []pmix.Info{
			pmix.NewInfo(pmix.KeyEventResolved, pmix.Bool(true)),
			pmix.NewInfo(pmix.KeyEventNoTermination, pmix.Bool(true)),
		})
	})

	out, err := reg.Run(context.Background(), bus.Event{
		Code:   pmix.EventProcTerminated,
		Source: bus.Origin{Cluster: "A", Node: "n2"}, // the host RM of n2
		Info: []pmix.Info{pmix.NewInfo(pmix.KeyEventAffectedProc,
			pmix.ProcValue(pmix.Proc{Nspace: "A:job1", Rank: 5}))},
	})
	if err != nil {
		panic(err)
	}
	for _, r := range out.Ran {
		fmt.Println(r.Name, r.Status)
	}
	fmt.Println("resolved:", out.Resolved, "termination:", out.Termination.Decision, "by", out.Termination.ByName)
	fmt.Println(pmix.FormatInfos(out.Results))
	// Output:
	// respawn PMIX_EVENT_PARTIAL_ACTION_TAKEN
	// fatal PMIX_EVENT_NO_ACTION_TAKEN
	// resolved: true termination: no-termination by respawn
	// respawn=PMIX_EVENT_PARTIAL_ACTION_TAKEN pmixbus.evresolved=true pmix.evnoterm=true fatal=PMIX_EVENT_NO_ACTION_TAKEN
}
