package exchange

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
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/query"
)

// TestModelDeclared: a model declared in Init's info
// (client.WithInitInfo) reaches a handler registered afterwards for
// PMIX_MODEL_DECLARED, once, with the declaration; a default handler
// registered after Init does not get it; deregistering an id never handed
// out calls the callback with PMIX_ERR_NOT_FOUND.
func TestModelDeclared(t *testing.T) {
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A", Nodes: []string{"a1"}}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "m", Nodes: []string{"a1"}, Detached: true}},
	})
	model := []pmix.Info{
		pmix.NewInfo(pmix.KeyProgrammingModel, pmix.String("MPI")),
		pmix.NewInfo(pmix.KeyModelLibraryName, pmix.String("TestMPI")),
		pmix.NewInfo(pmix.KeyModelLibraryVersion, pmix.String("1.0")),
		pmix.NewInfo(pmix.KeyThreadingModel, pmix.String("pthreads")),
		pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(5)), // not a declaration: ignored
	}
	if _, err := client.Init(t.Context(), client.WithEnv(w.Env("A:m.0")), client.WithInitInfo([]pmix.Info{pmix.NewInfo(pmix.KeyProgrammingModel, pmix.Int32(1))})); !errors.Is(err, client.ErrInvalidOption) {
		t.Fatalf("a model that is not a string: %v, want ErrInvalidOption", err)
	}
	c, err := client.Init(t.Context(), client.WithEnv(w.Env("A:m.0")), client.WithInitInfo(model))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { finalizeBounded(c) })
	def := e2e.NewRecorder()
	if _, err := c.RegisterEventHandler(t.Context(), nil, nil, def.Handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	rec := e2e.NewRecorder()
	if _, err := c.RegisterEventHandler(t.Context(), []pmix.Status{pmix.EventModelDeclared}, nil, rec.Handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	rec.WaitCount(t, pmix.EventModelDeclared, 1)
	got := rec.Of(pmix.EventModelDeclared)[0]
	for _, in := range model[:4] {
		if v, ok := pmix.LookupValue(got.Info, in.Key); !ok || v.String() != in.Value.String() {
			t.Errorf("PMIX_MODEL_DECLARED's info %v: %s is %v, want %v", got.Info, in.Key, v, in.Value)
		}
	}
	if _, ok := pmix.LookupValue(got.Info, pmix.KeyTimeout); ok {
		t.Errorf("PMIX_MODEL_DECLARED's info %v has a key that declares no model", got.Info)
	}
	// Deregistration of an id never handed out: the callback comes.
	errc := make(chan error, 1)
	c.DeregisterEventHandlerCB(12345, func(err error) { errc <- err })
	if err := <-errc; !errors.Is(err, pmix.ErrNotFound) {
		t.Errorf("deregistering an unknown id: %v, want PMIX_ERR_NOT_FOUND", err)
	}
	if n := len(def.Of(pmix.EventModelDeclared)); n != 0 || len(rec.All()) != 1 {
		t.Errorf("default handler called %d times, the model handler %d, want 0 and 1", n, len(rec.All()))
	}
}

// TestContinuousAbortReachesSurvivors: in a job run with --continuous
// (launch.Config.Continuous), rank 0 exits with status 1 after a fence
// and the three others, registered for PMIX_ERR_PROC_ABORTED alone (as
// OpenPMIx's fault.c is), hear of it, with rank 0 the affected proc, and
// end normally.
func TestContinuousAbortReachesSurvivors(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	aborted := fmt.Sprint(int(pmix.ErrProcAborted))
	res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Continuous: true, Jobs: []launch.JobSpec{{N: 4, App: launch.App{Path: p,
		Args: []string{"-watch", "-codes", aborted, "-fence", "-await", aborted, "-fail-rank", "0", "-fail", "exit:1"}}}}})
	if res.First == nil || res.First.Rank != 0 || res.First.State != pmix.ErrExitNonzeroTerm {
		t.Fatalf("first %+v\noutput:\n%s", res.First, out)
	}
	ns := res.Jobs[0].Nspace
	for r := 1; r < 4; r++ {
		if want := fmt.Sprintf("%d: event %s affected=%s.0 exit=1", r, aborted, ns); !strings.Contains(out.String(), want) {
			t.Errorf("no %q in output:\n%s", want, out)
		}
	}
	for _, e := range res.Jobs[0].Ends[1:] {
		if e.State != pmix.Success {
			t.Errorf("rank %d ended %v (%s), want a normal end", e.Rank, e.State, e.Text)
		}
	}
}

// TestJobControlKill: rank 0 of a job over two agents ends rank 3 (on
// the other agent) with PMIx_Job_control's PMIX_JOB_CTRL_KILL
// (client.JobControl); the call returns once it is done, rank 3 ends
// PMIX_ERR_PROC_KILLED_BY_CMD, which does not abort the job: the others
// end normally after their sleep.
func TestJobControlKill(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{{N: 4, App: launch.App{Path: p,
		Args: []string{"-fence", "-kill", "3", "-sleep", "2s"}}}}})
	if !strings.Contains(out.String(), "0: killed 3 err=<nil>") {
		t.Fatalf("output:\n%s", out)
	}
	ends := res.Jobs[0].Ends
	if len(ends) != 4 || ends[3].State != pmix.ErrProcKilledByCmd || res.ExitCode != 0 {
		t.Fatalf("result %+v, ends %+v", res, ends)
	}
	for _, e := range ends[:3] {
		if e.State != pmix.Success {
			t.Errorf("rank %d ended %v (%s), want a normal end", e.Rank, e.State, e.Text)
		}
	}
	if ends[3].Node != "a2" {
		t.Errorf("rank 3 ran on %s, want a2 (another agent than rank 0's)", ends[3].Node)
	}
}

// TestLogSyslog: client.Log's PMIX_LOG_SYSLOG messages reach the agent's
// syslog (agent.Config.Syslog) at PMIX_LOG_SYSLOG_PRI, stamped with
// PMIX_LOG_TIMESTAMP and the source; PMIX_LOG_ONCE logs to the first
// channel that takes it; PMIX_LOG_EMAIL is refused.
func TestLogSyslog(t *testing.T) {
	var mu sync.Mutex
	var got []string
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A", Nodes: []string{"a1"}}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "lg", Nodes: []string{"a1"}, Detached: true}},
		Agent: func(c *agent.Config) {
			c.Syslog = func(pri int, msg string) error {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, fmt.Sprintf("%d %s", pri, msg))
				return nil
			}
		},
	})
	c, err := client.Init(t.Context(), client.WithEnv(w.Env("A:lg.0")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { finalizeBounded(c) })
	at := time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC)
	email := pmix.NewInfo(pmix.KeyLogEmail, pmix.String("x"))
	if err := c.Log(t.Context(), []pmix.Info{pmix.NewInfo(pmix.KeyLogSyslog, pmix.String("disk full"))}, []pmix.Info{
		pmix.NewInfo(pmix.KeyLogSyslogPri, pmix.Int32(4)), pmix.NewInfo(pmix.KeyLogTimestamp, pmix.Time(at)),
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Log(t.Context(), []pmix.Info{email, pmix.NewInfo(pmix.KeyLogLocalSyslog, pmix.String("once"))},
		[]pmix.Info{pmix.NewInfo(pmix.KeyLogOnce, pmix.Bool(true))}); err != nil {
		t.Fatal(err)
	}
	if err := c.Log(t.Context(), []pmix.Info{email}, nil); !errors.Is(err, pmix.ErrNotSupported) {
		t.Errorf("email: %v, want PMIX_ERR_NOT_SUPPORTED", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"4 Sat Nov 28 02:00:00 2026 WARNING PROC lg:0 REPORTS: disk full", "3 N/A ERROR PROC lg:0 REPORTS: once"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("syslog:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestQuery: client.Query through real agents: the running jobs of the
// cluster, the job size, the proc tables (with the pids of the local
// ranks), an unknown key not found, a mix partially answered, a hook
// (agent.Queries) answering a key of another capability.
func TestQuery(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	out := &e2e.SyncBuffer{}
	r, err := launch.Launch(t.Context(), launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Stdout: out, Stderr: out,
		Jobs: []launch.JobSpec{{N: 3, App: launch.App{Path: p, Args: []string{"-sleep", "30s"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Terminate(true); _, _ = r.Wait(context.Background()) })
	ns := r.Nspaces()[0][len("A:"):]
	// A client of another job on a1 asks.
	if err := w.AddJob(t.Context(), agenttest.Job{Cluster: "A", Nspace: "asker", Nodes: []string{"a1"}, Detached: true}); err != nil {
		t.Fatal(err)
	}
	c, err := client.Init(t.Context(), client.WithEnv(w.Env("A:asker.0")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Finalize(context.Background()) })
	w.Agent("a1").Queries().Handle(pmix.KeyQueryNumPsets, func(context.Context, pmix.Proc, string, []pmix.Info) (pmix.Value, error) {
		return pmix.Uint64(2), nil
	})
	of := []pmix.Info{pmix.NewInfo(pmix.KeyNspace, pmix.String(ns))}
	var got []pmix.Info
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		got, err = c.Query(t.Context(), []query.Query{{Keys: []string{pmix.KeyQueryNamespaces}}, {Keys: []string{pmix.KeyJobSize, pmix.KeyQueryProcTable, pmix.KeyQueryLocalProcTable}, Qualifiers: of}})
		if err != nil {
			return err
		}
		if v, _ := got[0].Value.Str(); !strings.Contains(v, ns) || !strings.Contains(v, "asker") {
			return fmt.Errorf("namespaces %q", v)
		}
		return nil
	})
	if n, _ := got[1].Value.Int(); n != 3 {
		t.Errorf("job size %v", got[1].Value)
	}
	table, _ := got[2].Value.Infos()
	local, _ := got[3].Value.Infos()
	if len(table) != 3 || len(local) != 2 {
		t.Fatalf("proc table %v, local %v", table, local)
	}
	for i, e := range table {
		in, _ := e.Value.Infos()
		rk, _ := pmix.LookupValue(in, pmix.KeyRank)
		host, _ := pmix.LookupValue(in, pmix.KeyHostname)
		_, hasPid := pmix.LookupValue(in, pmix.KeyProcPid)
		if n, _ := rk.Int(); n != int64(i) || (i < 2) != (host.String() == `"a1"`) || (i < 2) != hasPid {
			t.Errorf("entry %d: %v", i, in)
		}
	}
	if _, err := c.Query(t.Context(), []query.Query{{Keys: []string{"pmix.qry.nosuch"}}}); !errors.Is(err, pmix.ErrNotFound) {
		t.Errorf("unknown key: %v", err)
	}
	got, err = c.Query(t.Context(), []query.Query{{Keys: []string{"pmix.qry.nosuch", pmix.KeyQueryNumPsets}}})
	if pmix.StatusOf(err) != pmix.QueryPartialSuccess || len(got) != 1 || got[0].Key != pmix.KeyQueryNumPsets {
		t.Errorf("partial: %v %v", got, err)
	}
}

// TestNodeInfo: a launched rank reads its job's node list, node count,
// its node id and its agent's URI with Get, through real agents.
func TestNodeInfo(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	keys := strings.Join([]string{pmix.KeyNodeList, pmix.KeyNumNodes, pmix.KeyNodeID, pmix.KeyServerURI}, ",")
	res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{{N: 3, App: launch.App{Path: p, Args: []string{"-get", keys}}}}})
	if res.ExitCode != 0 {
		t.Fatalf("result %+v\n%s", res, out)
	}
	for _, want := range []string{
		`0: get pmix.nlist = "a1,a2"`, `2: get pmix.nlist = "a1,a2"`, "1: get pmix.num.nodes = 2 ",
		"0: get pmix.nodeid = 0 ", "2: get pmix.nodeid = 1 ",
		`0: get pmix.srvr.uri = "` + w.Agent("a1").Addr() + `"`, `2: get pmix.srvr.uri = "` + w.Agent("a2").Addr() + `"`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in output:\n%s", want, out)
		}
	}
}

// finalizeBounded finalizes c at cleanup, when t.Context() is already
// canceled, waiting for the agent's answer 10 s at most.
func finalizeBounded(c *client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.Finalize(ctx)
}
