package bus

import (
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

func TestRegisterHeld(t *testing.T) {
	r, err := NewRegistry(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const code = pmix.Status(-3001)
	var ran []string
	rec := func(name string) Handler {
		return func(c *Call, done Done) { ran = append(ran, name); done(pmix.EventNoActionTaken, nil) }
	}
	// "slow" runs first and holds its chain open until we complete it.
	var slowDone Done
	if _, err := r.Register([]pmix.Status{code}, []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrFirst, pmix.Bool(true))},
		func(c *Call, done Done) { ran = append(ran, "slow"); slowDone = done }); err != nil {
		t.Fatal(err)
	}
	id, err := r.RegisterHeld([]pmix.Status{code}, []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("held"))}, rec("held"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RegisterHeld(nil, []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("held"))}, rec("x")); !isStatus(err, pmix.ErrEventRegistration) {
		t.Fatalf("a held registration's name is taken: %v", err)
	}
	if r.Wants(Event{Code: pmix.EventNodeDown}) {
		t.Fatal("Wants counts a held registration")
	}
	outcomes := 0
	r.Notify(Event{Code: code}, func(Outcome) { outcomes++ }) // stops in "slow"
	if err := r.Replay(id, Event{Code: code}, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Release(id); err != nil {
		t.Fatal(err)
	}
	slowDone(pmix.EventNoActionTaken, nil) // the chain that started before Release goes on without "held"
	r.Notify(Event{Code: code}, func(Outcome) { outcomes++ })
	slowDone2 := slowDone
	slowDone2(pmix.EventNoActionTaken, nil)
	want := []string{"slow", "held", "slow", "held"}
	if len(ran) != len(want) || outcomes != 2 {
		t.Fatalf("ran %v, outcomes %d", ran, outcomes)
	}
	for i := range want {
		if ran[i] != want[i] {
			t.Fatalf("ran %v, want %v", ran, want)
		}
	}
	if err := r.Release(999); !isStatus(err, pmix.ErrNotFound) {
		t.Fatalf("release unknown: %v", err)
	}
}

func isStatus(err error, s pmix.Status) bool { return pmix.StatusOf(err) == s }
