package events

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// lifeWorld is one cluster of two agents and a job tj of two ranks:
// tj.0 on a1, the client whose life the tests play out (registered anew
// by each case), and tj.1 on a2, an observer on another agent recording
// the termination events that reach it.
type lifeWorld struct {
	t      *testing.T
	w      *agenttest.World
	a1     *agent.Agent
	obs    *e2e.Recorder
	fences int
}

var (
	tj0        = pmix.Proc{Nspace: "tj", Rank: 0}
	lifeEvents = []pmix.Status{pmix.ErrProcTermWOSync, pmix.ErrProcRequestedAbort, e2e.FenceCode}
)

func newLifeWorld(t *testing.T, adjust func(*agent.Config)) *lifeWorld {
	t.Helper()
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A", Nodes: []string{"a1", "a2"}}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "tj", Session: "s1", Nodes: []string{"a1", "a2"}, Detached: true}},
		Agent:    adjust,
	})
	lw := &lifeWorld{t: t, w: w, a1: w.Agent("a1"), obs: e2e.NewRecorder()}
	obs, err := client.Init(t.Context(), client.WithEnv(w.Env("A:tj.1")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = obs.Finalize(context.Background()) })
	if _, err := obs.RegisterEventHandler(t.Context(), lifeEvents, nil, lw.obs.Handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	lw.deregister() // each case registers tj.0 its own way
	return lw
}

// register registers tj.0 with a1 and returns its launch environment.
func (lw *lifeWorld) register(opts ...agent.ClientOption) map[string]string {
	lw.t.Helper()
	env, err := lw.a1.RegisterClient(lw.t.Context(), tj0, opts...)
	if err != nil {
		lw.t.Fatal(err)
	}
	return env
}

func (lw *lifeWorld) deregister() {
	lw.t.Helper()
	if err := lw.a1.DeregisterClient(lw.t.Context(), tj0); err != nil {
		lw.t.Fatal(err)
	}
}

func (lw *lifeWorld) state() agent.ClientState {
	lw.t.Helper()
	s, ok := lw.a1.ClientState(tj0)
	if !ok {
		lw.t.Fatal("tj.0 is not registered")
	}
	return s
}

// waitDetached waits until a1 no longer counts tj.0 as attached: by then
// it has published any termination event the socket's end called for.
func (lw *lifeWorld) waitDetached() {
	lw.t.Helper()
	clustertest.WaitFor(lw.t, e2e.WaitTime, func() error {
		if n := lw.a1.Stats().ClientsAttached; n != 0 {
			return fmt.Errorf("%d clients attached to a1", n)
		}
		return nil
	})
}

// fence sends an event from a1 to the job and waits for the observer to
// see it: a1's events published before it have reached the observer.
func (lw *lifeWorld) fence() { lw.fenceFrom(lw.a1) }

// fenceFrom is fence from agent a.
func (lw *lifeWorld) fenceFrom(a *agent.Agent) {
	lw.t.Helper()
	if _, err := a.Notify(lw.t.Context(), e2e.FenceCode, pmix.RangeNamespace, false, []pmix.Info{pmix.NewInfo(pmix.KeyNspace, pmix.String("tj"))}); err != nil {
		lw.t.Fatal(err)
	}
	lw.fences++
	lw.obs.WaitCount(lw.t, e2e.FenceCode, lw.fences)
}

// attach registers tj.0 with a1 and attaches it, as a process would.
func (lw *lifeWorld) attach(opts ...agent.ClientOption) *client.Client {
	lw.t.Helper()
	c, err := client.Init(lw.t.Context(), client.WithEnv(lw.register(opts...)))
	if err != nil {
		lw.t.Fatal(err)
	}
	lw.t.Cleanup(func() { _ = c.Finalize(context.Background()) })
	return c
}

// noEnds fences, then checks that the observer saw no end of tj.0: after
// what, for the error.
func (lw *lifeWorld) noEnds(after string) {
	lw.t.Helper()
	lw.fence()
	if ends := lw.ends(); len(ends) != 0 {
		lw.t.Errorf("after %s: the observer saw %v", after, ends)
	}
}

// ends returns what the observer has seen of tj.0's ends.
func (lw *lifeWorld) ends() []e2e.Delivery {
	return append(lw.obs.Of(pmix.ErrProcTermWOSync), lw.obs.Of(pmix.ErrProcRequestedAbort)...)
}

// checkEnd checks a termination event of tj.0: its source, its affected
// proc (type PROC, which Open MPI's ULFM handler asserts) and, when
// exitCode is not nil, PMIX_EXIT_CODE.
func checkEnd(t *testing.T, d e2e.Delivery, code pmix.Status, exitCode *int32) {
	t.Helper()
	if d.Code != code || d.Source != tj0 {
		t.Errorf("event %v from %v, want %v from %v", d.Code, d.Source, code, tj0)
	}
	v, ok := pmix.LookupValue(d.Info, pmix.KeyEventAffectedProc)
	if p, isProc := v.Proc(); !ok || !isProc || p != tj0 {
		t.Errorf("PMIX_EVENT_AFFECTED_PROC %v (found %v), want the proc %v", v, ok, tj0)
	}
	if exitCode == nil {
		return
	}
	v, ok = pmix.LookupValue(d.Info, pmix.KeyExitCode)
	if n, isInt := v.Int(); !ok || !isInt || n != int64(*exitCode) || v.Type() != pmix.TypeInt32 {
		t.Errorf("PMIX_EXIT_CODE %v (found %v), want int32 %d", v, ok, *exitCode)
	}
}

// TestClientStateThroughInitFinalize: the agent records a client's hello
// and Finalize; a proc not registered has no state, and one registered
// again starts fresh.
func TestClientStateThroughInitFinalize(t *testing.T) {
	lw := newLifeWorld(t, nil)
	if _, ok := lw.a1.ClientState(tj0); ok {
		t.Fatal("state of a deregistered client")
	}
	env := lw.register()
	if s := lw.state(); s != (agent.ClientState{}) {
		t.Fatalf("before hello: %+v", s)
	}
	c, err := client.Init(t.Context(), client.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	if s := lw.state(); !s.Attached || s.Finalized || s.Aborted {
		t.Fatalf("after Init: %+v", s)
	}
	if err := c.Finalize(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := lw.state(); !s.Attached || !s.Finalized || s.Aborted {
		t.Fatalf("after Finalize: %+v", s)
	}
	lw.deregister()
	lw.register()
	if s := lw.state(); s != (agent.ClientState{}) {
		t.Fatalf("registered again: %+v, want a fresh state", s)
	}
	lw.noEnds("a client that finalized")
}

// TestSocketLostWithoutFinalize: a client of a host RM whose socket
// closes after hello without Finalize raises PMIX_ERR_PROC_TERM_WO_SYNC
// once, and it reaches its job on another agent; a client that finalized
// first, one whose process the host watches, and one the host
// deregistered raise nothing.
func TestSocketLostWithoutFinalize(t *testing.T) {
	lw := newLifeWorld(t, nil)

	// Lost: the process dies after hello.
	env := lw.register()
	r := e2e.DialRaw(t, lw.a1)
	r.Hello(env)
	r.C.Close()
	lw.obs.WaitCount(t, pmix.ErrProcTermWOSync, 1)
	checkEnd(t, lw.obs.Of(pmix.ErrProcTermWOSync)[0], pmix.ErrProcTermWOSync, nil)
	lw.waitDetached()
	if s := lw.state(); !s.Attached || s.Finalized || s.Aborted {
		t.Errorf("after the socket was lost: %+v", s)
	}
	// The same registration attached and lost again: reported once.
	r = e2e.DialRaw(t, lw.a1)
	r.Hello(env)
	r.C.Close()
	lw.waitDetached()
	lw.deregister()

	// Finalize, then close.
	r = e2e.DialRaw(t, lw.a1)
	r.Hello(lw.register())
	r.Send(&proto.Frame{Type: proto.TypeFinalize, Seq: 2})
	if f := r.Recv(); f.Type != proto.TypeReply || f.Status != pmix.Success {
		t.Fatalf("finalize: %+v", f)
	}
	r.C.Close()
	lw.waitDetached()
	lw.deregister()

	// Watched by its host: the host reports its end.
	r = e2e.DialRaw(t, lw.a1)
	r.Hello(lw.register(agent.WithExitWatched()))
	r.C.Close()
	lw.waitDetached()
	lw.deregister()

	// Deregistered by the host while attached: the agent closed it.
	r = e2e.DialRaw(t, lw.a1)
	r.Hello(lw.register())
	lw.deregister()
	r.ClosedByAgent()

	lw.fence()
	ends := lw.ends()
	if len(ends) != 1 {
		t.Errorf("observer saw %d ends of tj.0, want the first loss only: %v", len(ends), ends)
	}
}

// TestStalledClientCutOffRaisesNothing: a client the agent cuts off for
// not reading is alive as far as the agent knows; nothing is raised, not
// even when its process then goes.
func TestStalledClientCutOffRaisesNothing(t *testing.T) {
	lw := newLifeWorld(t, func(c *agent.Config) { c.ClientQueueLimit = 64 << 10 })
	conn := stalledClient(t, lw.register())
	info := []pmix.Info{pmix.NewInfo(pmix.KeyEventDoNotCache, pmix.Bool(true)), pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String(strings.Repeat("x", 4<<10)))}
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		if lw.a1.Stats().ClientsAttached == 0 {
			return nil
		}
		for range 50 { // LOCAL: a1's clients only
			if _, err := lw.a1.Notify(t.Context(), -3001, pmix.RangeLocal, false, info); err != nil {
				return err
			}
		}
		return errors.New("the stalled client is still attached")
	})
	conn.Close()
	lw.noEnds("a client cut off by the agent")
}

// TestShutdownRaisesNothing: the agent's Shutdown closes its clients'
// connections, and raises nothing for them.
func TestShutdownRaisesNothing(t *testing.T) {
	lw := newLifeWorld(t, nil)
	r := e2e.DialRaw(t, lw.a1)
	r.Hello(lw.register())
	ctx, cancel := context.WithTimeout(t.Context(), e2e.WaitTime)
	defer cancel()
	if err := lw.a1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	r.ClosedByAgent()
	// a1 closed its NATS connection, flushed, before Shutdown returned:
	// its events are ahead of the one a2 sends now, on the one server.
	lw.fenceFrom(lw.w.Agent("a2"))
	if ends := lw.ends(); len(ends) != 0 {
		t.Errorf("after a1's Shutdown: the observer saw %v", ends)
	}
}

// TestAbortWithoutHostRaisesRequestedAbort: with no OnAbort function, a
// client's Abort is recorded and raised by the agent as
// PMIX_ERR_PROC_REQUESTED_ABORT with PMIX_EXIT_CODE its status; the
// socket closing afterwards raises nothing more, and a second Abort
// changes nothing.
func TestAbortWithoutHostRaisesRequestedAbort(t *testing.T) {
	lw := newLifeWorld(t, nil)
	c := lw.attach()
	if err := c.Abort(t.Context(), 7, "giving up", nil); err != nil {
		t.Fatal(err)
	}
	want := agent.ClientState{Attached: true, Aborted: true, AbortStatus: 7, AbortMessage: "giving up"}
	if s := lw.state(); s != want {
		t.Errorf("after Abort: %+v, want %+v", s, want)
	}
	if err := c.Abort(t.Context(), 9, "again", nil); err != nil {
		t.Errorf("second Abort: %v", err)
	}
	if s := lw.state(); s != want {
		t.Errorf("after a second Abort: %+v, want the first's %+v", s, want)
	}
	lw.obs.WaitCount(t, pmix.ErrProcRequestedAbort, 1)
	seven := int32(7)
	d := lw.obs.Of(pmix.ErrProcRequestedAbort)[0]
	checkEnd(t, d, pmix.ErrProcRequestedAbort, &seven)
	if v, _ := pmix.LookupValue(d.Info, pmix.KeyEventTextMessage); !strings.Contains(v.String(), "giving up") {
		t.Errorf("PMIX_EVENT_TEXT_MESSAGE %v, want the abort's message", v)
	}

	// A process that aborted and exits without finalizing.
	lw.deregister()
	r := e2e.DialRaw(t, lw.a1)
	r.Hello(lw.register())
	r.Send(&proto.Frame{Type: proto.TypeAbort, Seq: 2, Status: 3})
	if f := r.Recv(); f.Type != proto.TypeReply || f.Status != pmix.Success {
		t.Fatalf("abort: %+v", f)
	}
	r.C.Close()
	lw.waitDetached()
	lw.fence()
	if n, ends := len(lw.obs.Of(pmix.ErrProcRequestedAbort)), lw.ends(); n != 2 || len(ends) != 2 {
		t.Errorf("observer saw %v, want two aborts and no loss", ends)
	}
}

// TestAbortWithHostCallback: with an OnAbort function, the agent hands it
// the request, procs and all, and raises nothing itself.
func TestAbortWithHostCallback(t *testing.T) {
	lw := newLifeWorld(t, nil)
	var mu sync.Mutex
	var got []agent.AbortRequest
	lw.a1.OnAbort(func(r agent.AbortRequest) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r)
	})
	c := lw.attach(agent.WithExitWatched())
	procs := []pmix.Proc{{Nspace: "tj", Rank: 1}, {Nspace: "B:other", Rank: pmix.RankWildcard}}
	if err := c.Abort(t.Context(), 2, "rank 1 is wrong", procs); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 {
			return errors.New("no abort request")
		}
		return nil
	})
	mu.Lock()
	r := got[0]
	mu.Unlock()
	if r.Proc != tj0 || r.Status != 2 || r.Message != "rank 1 is wrong" || len(r.Procs) != 2 || r.Procs[0] != procs[0] || r.Procs[1] != procs[1] {
		t.Errorf("abort request %+v", r)
	}
	if s := lw.state(); !s.Aborted || s.AbortStatus != 2 {
		t.Errorf("after Abort: %+v", s)
	}
	lw.noEnds("an abort its host took")
}

// TestWantTerminationHostRM: for a process a host RM launched, a chain
// that decides the application should terminate (RFC0018) reaches the
// host as the process's own abort request: itself, status 1, a text
// naming the handler and the event; the host ends it.
func TestWantTerminationHostRM(t *testing.T) {
	lw := newLifeWorld(t, nil)
	got := make(chan agent.AbortRequest, 4)
	lw.a1.OnAbort(func(r agent.AbortRequest) { got <- r })
	c := lw.attach(agent.WithExitWatched())
	const code = pmix.ExternalErrBase - 31
	if _, err := c.RegisterEventHandler(t.Context(), []pmix.Status{code}, []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("policy"))},
		func(call *bus.Call, done bus.Done) {
			done(pmix.EventNoActionTaken, []pmix.Info{pmix.Required(pmix.NewInfo(pmix.KeyEventWantTermination, pmix.Bool(true)))})
		}); err != nil {
		t.Fatal(err)
	}
	if _, err := lw.a1.Notify(t.Context(), code, pmix.RangeNamespace, false, []pmix.Info{pmix.NewInfo(pmix.KeyNspace, pmix.String("tj"))}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.Proc != tj0 || r.Status != 1 || len(r.Procs) != 1 || r.Procs[0] != tj0 ||
			!strings.Contains(r.Message, `handler "policy" wanted termination (PMIX_EVENT_WANT_TERMINATION, required)`) {
			t.Errorf("abort request %+v", r)
		}
	case <-time.After(e2e.WaitTime):
		t.Fatal("the host got no abort request")
	}
	if s := lw.state(); !s.Aborted || s.AbortStatus != 1 {
		t.Errorf("after the chain: %+v", s)
	}
}

// TestAbortBadInput: an abort with a message too long, too many procs or
// a bad proc is PMIX_ERR_BAD_PARAM and records nothing; the client goes
// on.
func TestAbortBadInput(t *testing.T) {
	lw := newLifeWorld(t, nil)
	c := lw.attach()
	many := make([]pmix.Proc, proto.MaxAbortProcs+1)
	for i := range many {
		many[i] = pmix.Proc{Nspace: "tj", Rank: pmix.Rank(i)}
	}
	cases := []struct {
		name  string
		msg   string
		procs []pmix.Proc
	}{
		{"long message", strings.Repeat("m", proto.MaxAbortMessage+1), nil},
		{"too many procs", "", many},
		{"undefined rank", "", []pmix.Proc{{Nspace: "tj", Rank: pmix.RankUndef}}},
		{"empty nspace", "", []pmix.Proc{{Rank: 0}}},
		{"long nspace", "", []pmix.Proc{{Nspace: strings.Repeat("n", pmix.MaxNspaceLen+1), Rank: 0}}},
		{"bad cluster", "", []pmix.Proc{{Nspace: "a b:tj", Rank: 0}}},
	}
	for _, tc := range cases {
		if err := c.Abort(t.Context(), 1, tc.msg, tc.procs); !errors.Is(err, pmix.ErrBadParam) {
			t.Errorf("%s: %v, want PMIX_ERR_BAD_PARAM", tc.name, err)
		}
	}
	if s := lw.state(); s.Aborted {
		t.Errorf("a refused abort was recorded: %+v", s)
	}
	if err := c.Abort(t.Context(), 1, strings.Repeat("m", proto.MaxAbortMessage), nil); err != nil {
		t.Errorf("an abort within bounds after the refused ones: %v", err)
	}
	lw.obs.WaitCount(t, pmix.ErrProcRequestedAbort, 1)
}
