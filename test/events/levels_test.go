package events

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// kindKey marks the test's events as job or environment events, so that a
// recorder can tell which kind reached a handler.
const kindKey = "test.kind"

func kindOf(d e2e.Delivery) string {
	v, _ := pmix.LookupValue(d.Info, kindKey)
	s, _ := v.Str()
	return s
}

// TestLevelsEndToEnd: PMIX_EVENT_JOB_LEVEL and PMIX_EVENT_ENVIRO_LEVEL
// select job and environment events as package bus documents (Filters):
// environment events only with ENVIRO_LEVEL given true, job events by
// default unless ENVIRO_LEVEL true is given alone, an explicit false
// honoured. A NODE_DOWN from the host RM arrives once as each kind, and a
// fence from the same RM after them proves what did not arrive. Agents
// whose clients want no environment events subscribe to none.
func TestLevelsEndToEnd(t *testing.T) {
	w := e2e.NewWorld(t)
	code := pmix.EventNodeDown
	level := func(k string, v bool) pmix.Info { return pmix.NewInfo(k, pmix.Bool(v)) }
	cases := []struct {
		client   string
		codes    []pmix.Status
		attrs    []pmix.Info
		job, env int // deliveries of each kind
	}{
		{"A:jobA.0", []pmix.Status{code}, nil, 1, 0},                                                 // both defaults
		{"A:jobA.1", []pmix.Status{code}, []pmix.Info{level(pmix.KeyEventEnviroLevel, false)}, 1, 0}, // explicit false
		{"A:jobA2.0", []pmix.Status{code}, []pmix.Info{e2e.EnviroLevel}, 0, 1},                       // "solely for environment events"
		{"A:jobA.2", []pmix.Status{code}, []pmix.Info{level(pmix.KeyEventJobLevel, false), e2e.EnviroLevel}, 0, 1},
		{"A:jobA.3", nil, []pmix.Info{e2e.JobLevel, e2e.EnviroLevel}, 1, 1},
		// Cluster B: nobody asks for environment events.
		{"B:jobB.0", nil, nil, 1, 0},
		{"B:jobB.1", []pmix.Status{code}, []pmix.Info{level(pmix.KeyEventEnviroLevel, false)}, 1, 0},
		{"B:jobB.2", []pmix.Status{code}, nil, 1, 0},
	}
	for _, c := range cases {
		w.Client(c.client).Register(t, c.codes, c.attrs, pmix.EventNoActionTaken)
		w.Client(c.client).Register(t, []pmix.Status{e2e.FenceCode}, nil, pmix.EventNoActionTaken)
	}
	for _, node := range []string{"b1", "b2"} {
		for _, s := range w.Agents[node].Subjects() {
			if strings.Contains(s, ".env.") {
				t.Errorf("agent %s subscribed to %s though no client there asked for environment events", node, s)
			}
		}
	}
	w.WaitSourced()

	// From the RM of each cluster, to its session s1 (every client of the
	// cluster): an environment NODE_DOWN, a job NODE_DOWN, then a fence.
	for _, node := range []string{"a1", "b1"} {
		sess := pmix.NewInfo(pmix.KeySessionID, pmix.String("s1"))
		rm := w.Agents[node]
		if _, err := rm.Notify(t.Context(), code, pmix.RangeSession, true, []pmix.Info{sess, pmix.NewInfo(kindKey, pmix.String("env"))}); err != nil {
			t.Fatal(err)
		}
		if _, err := rm.Notify(t.Context(), code, pmix.RangeSession, false, []pmix.Info{sess, pmix.NewInfo(kindKey, pmix.String("job"))}); err != nil {
			t.Fatal(err)
		}
		if _, err := rm.Notify(t.Context(), e2e.FenceCode, pmix.RangeGlobal, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cases {
		rec := w.Client(c.client).Rec
		rec.WaitCount(t, e2e.FenceCode, 2)
		got := map[string]int{}
		for _, d := range rec.Of(code) {
			got[kindOf(d)]++
		}
		if got["job"] != c.job || got["env"] != c.env || len(got) > 2 {
			t.Errorf("%s (codes %v, %s): got %v, want %d job and %d environment events",
				c.client, c.codes, pmix.FormatInfos(c.attrs), got, c.job, c.env)
		}
	}
}

// TestLevelsThatTakeNothing: a registration with PMIX_EVENT_JOB_LEVEL false
// and no ENVIRO_LEVEL true would receive nothing; the client refuses it,
// and so does the agent when a client sends it anyway.
func TestLevelsThatTakeNothing(t *testing.T) {
	w := e2e.NewWorld(t)
	noJob := []pmix.Info{pmix.NewInfo(pmix.KeyEventJobLevel, pmix.Bool(false))}
	_, err := w.Client("A:jobA.0").C.RegisterEventHandler(t.Context(), []pmix.Status{pmix.EventNodeDown}, noJob, w.Client("A:jobA.0").Rec.Handler(0))
	if !isStatus(err, pmix.ErrBadParam) || !strings.Contains(err.Error(), "would receive nothing") {
		t.Fatalf("client: %v", err)
	}

	r := e2e.DialRaw(t, w.Agents["a1"])
	r.Hello(w.SoloEnv("a1", "raw"))
	r.Send(&proto.Frame{Type: proto.TypeRegister, Seq: 2, Codes: []pmix.Status{pmix.EventNodeDown},
		Info: append(noJob, pmix.NewInfo(pmix.KeyEventEnviroLevel, pmix.Bool(false)))})
	if f := r.Recv(); f.Status != pmix.ErrBadParam || !strings.Contains(f.Message, "would receive nothing") {
		t.Fatalf("agent: %+v", f)
	}
}

// TestAbortAfterChainEndToEnd: a handler that notifies
// PMIX_ERR_PROC_REQUESTED_ABORT — the 2016-04-07 minutes' abort request —
// gets the abort chain after its own chain has ended, not in the middle of
// it: PROC_LOCAL through its results, which the agent's chain raises; a
// wider range through the agent holding the process's own copy.
func TestAbortAfterChainEndToEnd(t *testing.T) {
	w := e2e.NewWorld(t)
	c := w.Client("A:jobA.1")
	var mu sync.Mutex
	var order []string
	note := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	outcomes := make(chan event.OutcomeReport, 16)
	w.Agents["a1"].OnOutcome(func(r event.OutcomeReport) {
		if r.Client == c.C.Proc() {
			outcomes <- r
		}
	})
	register := func(codes []pmix.Status, name string, h bus.Handler, more ...pmix.Info) {
		t.Helper()
		if _, err := c.C.RegisterEventHandler(t.Context(), codes, append([]pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String(name))}, more...), h); err != nil {
			t.Fatal(err)
		}
	}
	// The asking handler "thread shifts" (minutes) before it calls into
	// the client, and asks before it completes.
	asker := func(rng pmix.Range) bus.Handler {
		return func(call *bus.Call, done bus.Done) {
			note(call.Name)
			go func() {
				if err := c.C.NotifyEvent(t.Context(), pmix.EventAbortRequested, rng, nil); err != nil {
					t.Error(err)
				}
				done(pmix.EventPartialActionTaken, nil)
			}()
		}
	}
	recordNote := func(call *bus.Call, done bus.Done) {
		note(call.Name)
		done(pmix.EventNoActionTaken, nil)
	}
	appendAt := pmix.NewInfo(pmix.KeyEventHdlrAppend, pmix.Bool(true))
	codeLocal, codeWide := pmix.ExternalErrBase-20, pmix.ExternalErrBase-21
	register([]pmix.Status{pmix.EventAbortRequested}, "aborter", recordNote)
	register([]pmix.Status{codeLocal}, "asks-proc-local", asker(pmix.RangeProcLocal))
	register([]pmix.Status{codeLocal}, "after-proc-local", recordNote, appendAt)
	register([]pmix.Status{codeWide}, "asks-namespace", asker(pmix.RangeNamespace))
	register([]pmix.Status{codeWide}, "after-namespace", recordNote, appendAt)

	for _, tc := range []struct {
		code pmix.Status
		want []string
	}{
		{codeLocal, []string{"asks-proc-local", "after-proc-local", "aborter"}},
		{codeWide, []string{"asks-namespace", "after-namespace", "aborter"}},
	} {
		mu.Lock()
		order = nil
		mu.Unlock()
		if err := w.Client("A:jobA.0").C.NotifyEvent(t.Context(), tc.code, pmix.RangeNamespace, nil); err != nil {
			t.Fatal(err)
		}
		// The chain's outcome and the abort chain's (its own outcome when
		// the agent raised it, or a separate one) both reach the host.
		var ran []string
		deadline := time.After(e2e.WaitTime)
		for !slices.Contains(ran, "aborter") {
			select {
			case r := <-outcomes:
				for _, o := range []*bus.Outcome{&r.Outcome, r.Outcome.Abort} {
					if o != nil {
						for _, x := range o.Ran {
							ran = append(ran, x.Name)
						}
					}
				}
			case <-deadline:
				t.Fatalf("code %v: no abort chain; handlers ran %v", tc.code, ran)
			}
		}
		mu.Lock()
		got := slices.Clone(order)
		mu.Unlock()
		if !slices.Equal(got, tc.want) {
			t.Errorf("code %v: handlers ran %v, want %v", tc.code, got, tc.want)
		}
	}
}

// TestAbortEventIsTheAskingProcess's: the minutes' PMIX_ABORT has a code
// of its own (pmix.EventAbortRequested, -2904), not PMIX_ERR_PROC_REQUESTED_ABORT
// (-8), the event of a process that called PMIx_Abort. When jobA.0
// calls PMIx_Abort, jobA.1's chain for the -8 runs its watcher but not its
// abort handler; when jobA.1's own handler asks for an abort, jobA.1's
// abort handler runs and jobA.0's does not.
func TestAbortEventIsTheAskingProcess(t *testing.T) {
	w := e2e.NewWorld(t)
	if pmix.EventAbortRequested == pmix.ErrProcRequestedAbort {
		t.Fatal("the abort event shares PMIX_ERR_PROC_REQUESTED_ABORT's code")
	}
	outcomes := make(chan event.OutcomeReport, 64)
	w.Agents["a1"].OnOutcome(func(r event.OutcomeReport) { outcomes <- r })
	clients := []*e2e.Client{w.Client("A:jobA.0"), w.Client("A:jobA.1")}
	ask := pmix.ExternalErrBase - 22
	for _, c := range clients {
		for _, reg := range []struct {
			name  string
			codes []pmix.Status
			h     bus.Handler
		}{
			{"aborter", []pmix.Status{pmix.EventAbortRequested}, func(call *bus.Call, done bus.Done) { done(pmix.EventNoActionTaken, nil) }},
			{"watcher", []pmix.Status{pmix.ErrProcRequestedAbort}, func(call *bus.Call, done bus.Done) { done(pmix.EventNoActionTaken, nil) }},
			{"asker", []pmix.Status{ask}, func(call *bus.Call, done bus.Done) {
				done(pmix.EventPartialActionTaken, []pmix.Info{pmix.NewInfo(pmix.KeyEventAbortRequested, pmix.Bool(c.C.Proc().Rank == 1))})
			}},
		} {
			if _, err := c.C.RegisterEventHandler(t.Context(), reg.codes, []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String(reg.name))}, reg.h); err != nil {
				t.Fatal(err)
			}
		}
	}
	// ran waits for the outcome of client's chain for code and returns
	// the handlers it ran, and those of its abort chain.
	var others []event.OutcomeReport // came while another was awaited
	ran := func(client pmix.Proc, code pmix.Status) (chain, abort []string) {
		t.Helper()
		deadline := time.After(e2e.WaitTime)
		for {
			var r event.OutcomeReport
			if i := slices.IndexFunc(others, func(o event.OutcomeReport) bool { return o.Client == client && o.Outcome.Code == code }); i >= 0 {
				// Two statements: in one, whether others[i] is read before
				// or after slices.Delete zeroes the tail is unspecified,
				// and the report read was sometimes a zero one.
				r = others[i]
				others = slices.Delete(others, i, i+1)
			} else {
				select {
				case r = <-outcomes:
				case <-deadline:
					t.Fatalf("no outcome of %v's chain for %v", client, code)
				}
				if r.Client != client || r.Outcome.Code != code {
					others = append(others, r)
					continue
				}
			}
			for _, x := range r.Outcome.Ran {
				chain = append(chain, x.Name)
			}
			if r.Outcome.Abort != nil {
				for _, x := range r.Outcome.Abort.Ran {
					abort = append(abort, x.Name)
				}
			}
			return chain, abort
		}
	}
	if err := clients[0].C.Abort(t.Context(), 3, "bye", nil); err != nil {
		t.Fatal(err)
	}
	if chain, abort := ran(clients[1].C.Proc(), pmix.ErrProcRequestedAbort); !slices.Equal(chain, []string{"watcher"}) || abort != nil {
		t.Errorf("jobA.1 on jobA.0's PMIx_Abort ran %v, abort chain %v; want the watcher only", chain, abort)
	}
	if err := clients[0].C.NotifyEvent(t.Context(), ask, pmix.RangeNamespace, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range clients {
		chain, abort := ran(c.C.Proc(), ask)
		want := []string(nil)
		if c.C.Proc().Rank == 1 {
			want = []string{"aborter"}
		}
		if !slices.Equal(chain, []string{"asker"}) || !slices.Equal(abort, want) {
			t.Errorf("%v: chain %v, abort chain %v; want [asker] and %v", c.C.Proc(), chain, abort, want)
		}
	}
}

// TestFailedCommEndToEnd: a frame from the agent that the client cannot
// decode raises PMIX_ERR_COMM_FAILURE (RFC0002's PMIX_ERR_FAILED_COMM) in
// the client's own handlers; the client stays attached while its stream is
// in step, and loses the agent (PMIX_ERR_LOST_CONNECTION after
// PMIX_ERR_COMM_FAILURE) when it is not. A relay between client and agent
// slips the bad bytes in between two of the agent's frames.
func TestFailedCommEndToEnd(t *testing.T) {
	w := e2e.NewWorld(t)
	a := w.Agents["a1"]
	env := w.SoloEnv("a1", "tampered")
	tp := tamper(t, a.Addr())
	env[client.EnvAgent] = tp.addr
	c, err := client.Init(t.Context(), client.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Finalize(t.Context())
	rec := e2e.NewRecorder()
	code := pmix.ExternalErrBase - 30
	for _, cs := range [][]pmix.Status{{pmix.FailedComm}, {pmix.LostServerConnection}, {code}} {
		if _, err := c.RegisterEventHandler(t.Context(), cs, nil, rec.Handler(pmix.EventNoActionTaken)); err != nil {
			t.Fatal(err)
		}
	}

	tp.inject <- lengthPrefixed(3, []byte{0xc1, 0xc1, 0xc1}) // a body that is no frame
	rec.WaitCount(t, pmix.FailedComm, 1)
	// Still attached: an event sent afterwards arrives.
	if _, err := a.Notify(t.Context(), code, pmix.RangeNamespace, false, []pmix.Info{pmix.NewInfo(pmix.KeyNspace, pmix.String("tampered"))}); err != nil {
		t.Fatal(err)
	}
	rec.WaitCount(t, code, 1)
	if n := len(rec.Of(pmix.LostServerConnection)); n != 0 {
		t.Fatalf("connection lost after an undecodable frame in step (%d)", n)
	}

	tp.inject <- lengthPrefixed(proto.DefaultMaxFrame+1, nil) // a length the client refuses
	rec.WaitCount(t, pmix.LostServerConnection, 1)
	var seq []pmix.Status
	for _, d := range rec.All() {
		seq = append(seq, d.Code)
	}
	if want := []pmix.Status{pmix.FailedComm, code, pmix.FailedComm, pmix.LostServerConnection}; !slices.Equal(seq, want) {
		t.Fatalf("client's handlers ran for %v, want %v", seq, want)
	}
}

func lengthPrefixed(n uint32, body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, n), body...)
}

// tamperer relays one client's connection to its agent and can slip bytes
// into what the client reads, between two of the agent's frames.
type tamperer struct {
	addr   string // what the client dials instead of the agent
	inject chan []byte
	stop   chan struct{}
}

func tamper(t *testing.T, agentAddr string) *tamperer {
	t.Helper()
	sock := filepath.Join(e2e.ShortDir(t), "relay.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	tp := &tamperer{addr: "unix:" + sock, inject: make(chan []byte), stop: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Go(func() { tp.relay(t, ln, agentAddr, &wg) })
	t.Cleanup(func() {
		close(tp.stop)
		ln.Close()
		wg.Wait()
	})
	return tp
}

func (tp *tamperer) relay(t *testing.T, ln net.Listener, agentAddr string, wg *sync.WaitGroup) {
	cc, err := ln.Accept()
	if err != nil {
		return
	}
	defer cc.Close()
	network, addr, _ := strings.Cut(agentAddr, ":")
	ac, err := net.Dial(network, addr)
	if err != nil {
		t.Error(err)
		return
	}
	defer ac.Close()
	wg.Go(func() {
		_, _ = io.Copy(ac, cc)
		ac.Close() // the client left: so does the agent's side
	})
	frames := make(chan []byte)
	wg.Go(func() {
		defer close(frames)
		for {
			var hdr [4]byte
			if _, err := io.ReadFull(ac, hdr[:]); err != nil {
				return
			}
			f := make([]byte, 4+binary.BigEndian.Uint32(hdr[:]))
			copy(f, hdr[:])
			if _, err := io.ReadFull(ac, f[4:]); err != nil {
				return
			}
			select {
			case frames <- f:
			case <-tp.stop:
				return
			}
		}
	})
	for {
		var b []byte
		select {
		case f, ok := <-frames:
			if !ok {
				return
			}
			b = f
		case b = <-tp.inject:
		case <-tp.stop:
			return
		}
		if _, err := cc.Write(b); err != nil {
			return
		}
	}
}

// TestHandlerMayCallTheAgent: a handler that makes a blocking request to
// the agent (a notification, a publish) from inside its call gets its
// answer; the request used to wait behind the batch's corked answers,
// which waited for the handler: a deadlock until the request timed out.
func TestHandlerMayCallTheAgent(t *testing.T) {
	w := e2e.NewWorld(t)
	c := w.Client("A:jobA.0")
	done := make(chan error, 1)
	c.Register(t, nil, nil, pmix.EventNoActionTaken)
	if _, err := c.C.RegisterEventHandler(t.Context(), []pmix.Status{-3101}, nil, func(call *bus.Call, d bus.Done) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := c.C.NotifyEvent(ctx, -3102, pmix.RangeLocal, nil)
		if err == nil {
			err = c.C.Publish(ctx, []pmix.Info{pmix.NewInfo("from-handler", pmix.String("v"))})
		}
		done <- err
		d(pmix.EventNoActionTaken, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Agents["a1"].Notify(t.Context(), -3101, pmix.RangeLocal, false, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a request from inside a handler: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the handler never got its answer")
	}
	c.Rec.WaitCount(t, -3102, 1) // its own LOCAL event reached its default handler
}
