package client

import (
	"sync"
	"testing"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// TestNotifyEventCBSendsAtOnce: NotifyEventCB sends the event before it
// returns, so events notified one after another reach the agent in that
// order, and one notified inside a handler reaches it ahead of that
// handler's completion (a C program's PMIx_Notify_event_nb answering from
// its handler, cabi's notify benchmark).
func TestNotifyEventCBSendsAtOnce(t *testing.T) {
	a, c := startFakeAgent(t)
	const n = 50
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		c.NotifyEventCB(codeX-pmix.Status(i), pmix.RangeNamespace, nil, func(err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	got := a.receivedFrames()
	if len(got) != n {
		t.Fatalf("agent received %d frames, want %d", len(got), n)
	}
	for i, f := range got {
		if f.Type != proto.TypeNotify || f.Code != codeX-pmix.Status(i) {
			t.Fatalf("frame %d: %v %v, want notify %v", i, f.Type, f.Code, codeX-pmix.Status(i))
		}
	}

	notified := make(chan error, 1)
	mustRegister(t, c, []pmix.Status{codeX}, named("answers"), func(_ *bus.Call, done bus.Done) {
		c.NotifyEventCB(codeX-n, pmix.RangeNamespace, nil, func(err error) { notified <- err })
		done(pmix.EventActionComplete, nil)
	})
	a.invoke("answers", codeX)
	if err := <-notified; err != nil {
		t.Fatal(err)
	}
	got = a.receivedFrames()[n:]
	if len(got) != 2 || got[0].Type != proto.TypeNotify || got[1].Type != proto.TypeInvokeDone {
		t.Fatalf("from the handler the agent received %v, want the notify, then the invoke-done", types(got))
	}
}

func types(fs []*proto.Frame) []proto.Type {
	var ts []proto.Type
	for _, f := range fs {
		ts = append(ts, f.Type)
	}
	return ts
}
