package jobs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/publishlookup"
	"github.com/pmixbus/pmixbus/security"
)

// TestReplicatedCluster: on a cluster of three routed NATS servers every
// stream and bucket the agents create keeps three replicas by default
// (cluster.DefaultReplicas). With the server the agents were connected to
// killed, the job goes on: the events cached before are replayed to a new
// registration, a live event reaches a handler on the other node, a
// value published on one node is looked up on the other, and a new job
// launches and its output arrives. The publish/lookup bucket, made by the
// first publish after the loss, has three replicas too.
func TestReplicatedCluster(t *testing.T) {
	ctx := t.Context()
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A", Servers: 3, Nodes: []string{"a1", "a2"}}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "job", Nodes: []string{"a1", "a2"}}},
	})
	a1, a2 := w.Agent("a1"), w.Agent("a2")
	const code = pmix.EventProcTerminated
	for i := range 5 {
		if _, err := a1.Notify(ctx, code, pmix.RangeNamespace, false, append(e2e.SeqInfo(i), pmix.NewInfo(pmix.KeyNspace, pmix.String("job")))); err != nil {
			t.Fatal(err)
		}
	}
	e2e.WaitCached(t, a2, 5)

	// Kill the server a1 uses; a2 may use it too.
	var victim int = -1
	for i, s := range w.Cluster("A").Servers() {
		if s.ClientURL() == a1.NATS().ConnectedUrl() {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("a1 is connected to %s, none of the cluster's servers", a1.NATS().ConnectedUrl())
	}
	if err := w.Cluster("A").Server(victim).Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		for _, a := range []string{"a1", "a2"} {
			if nc := w.Agent(a).NATS(); !nc.IsConnected() || nc.ConnectedUrl() == w.Cluster("A").Server(victim).ClientURL() {
				return fmt.Errorf("agent %s not reconnected to another server", a)
			}
		}
		_, err := a1.CacheStats(ctx)
		return err
	})

	// Cached events survive, and live ones flow.
	rec := e2e.NewRecorder()
	c1 := w.Client("A:job.1")
	if _, err := c1.RegisterEventHandler(ctx, []pmix.Status{code}, []pmix.Info{e2e.JobLevel}, rec.Handler(pmix.EventNoActionTaken)); err != nil {
		t.Fatal(err)
	}
	rec.WaitCount(t, code, 5)
	if _, err := a1.Notify(ctx, code, pmix.RangeNamespace, false, append(e2e.SeqInfo(5), pmix.NewInfo(pmix.KeyNspace, pmix.String("job")))); err != nil {
		t.Fatal(err)
	}
	rec.WaitCount(t, code, 6)
	e2e.CheckRun(t, e2e.Seqs(rec.All()), 0, 5)

	// Publish on a1, look up on a2.
	if err := w.Client("A:job.0").Publish(ctx, []pmix.Info{pmix.NewInfo("replicated.key", pmix.String("survives"))}); err != nil {
		t.Fatal(err)
	}
	got, err := c1.Lookup(ctx, []string{"replicated.key"}, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("lookup after the server's loss: %v, %v", got, err)
	}

	// A new run starts, and its output arrives.
	out := &e2e.SyncBuffer{}
	run, err := launch.Launch(ctx, launch.Config{SignIn: w.SignIn(w.URL("A")), Stdout: out, Stderr: out,
		Jobs: []launch.JobSpec{{N: 2, MapBy: launch.MapByNode, App: launch.App{Path: "/bin/sh", Args: []string{"-c", "echo replicated output"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Wait(ctx)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run after the server's loss: %+v, %v\n%s", res, err, out.String())
	}
	if n := strings.Count(out.String(), "replicated output"); n != 2 {
		t.Fatalf("%d of 2 lines of output:\n%s", n, out.String())
	}

	// Every stream and bucket, the publish/lookup bucket made by the
	// first publish among them, has three replicas.
	nc := clustertest.Connect(t, w.URL("A"), w.Keys().Option(security.RoleAgent))
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	streams := js.ListStreams(ctx)
	for info := range streams.Info() {
		names = append(names, info.Config.Name)
		if r := info.Config.Replicas; r != 3 {
			t.Errorf("stream %s: %d replicas, want 3", info.Config.Name, r)
		}
	}
	if err := streams.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	for _, want := range []string{"KV_PMIXBUS_AGENTS", "KV_PMIXBUS_JOBS", "KV_" + security.JobKeysBucket, "PMIXBUS_IOF", "KV_PMIXBUS_GROUPS", "PMIXBUS_EVENTS_", "PMIXBUS_JOBEVENTS_", "KV_PMIXBUS_IOF_LIMITS", "KV_" + publishlookup.DefaultBucket} {
		if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, want) }) {
			t.Errorf("no stream %s* among %v", want, names)
		}
	}

}

// A run started while its cluster's JetStream does not answer (here the
// server restarting; on a replicated cluster, a leader election after a
// server's loss) waits for the agents bucket, within bounds, and starts
// once it answers, rather than fail with "agents bucket unreachable".
func TestRunStartsThroughAnOutage(t *testing.T) {
	w := agenttest.Start(t, e2e.LaunchSpec)
	// Signed in for its job before the outage, as pmixbus run is: it
	// connects first, then launches.
	nspace := launch.NewNspace()
	nc, err := w.SignIn(w.URL("A"))(nspace)
	if err != nil {
		t.Fatal(err)
	}
	srv := w.Cluster("A").Server(0)
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	restarted := make(chan error, 1)
	go func() {
		time.Sleep(time.Second) // the run is started meanwhile
		restarted <- srv.Restart(t.Context())
	}()
	out := &e2e.SyncBuffer{}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	run, err := launch.Launch(ctx, launch.Config{Conn: nc, Stdout: out, Stderr: out,
		Jobs: []launch.JobSpec{{Cluster: "A", Nspace: nspace, N: 2, MapBy: launch.MapByNode, App: launch.App{Path: "/bin/sh", Args: []string{"-c", "echo started"}}}}})
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("a run started during the outage: %v", err)
	}
	res, err := run.Wait(ctx)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v, %v\n%s", res, err, out)
	}
	if n := strings.Count(out.String(), "started"); n != 2 {
		t.Fatalf("%d of 2 lines:\n%s", n, out)
	}
}

// TestLauncherSurvivesItsServer: on a cluster of three servers, the
// server a launcher signed in to with its job credential is killed under
// a running job. The launcher reconnects to another server with the same
// credential (the job's binding is replicated and every server answers
// for job credentials), the job's output and end arrive, and its
// PMIX_EVENT_JOB_END is published: the run ends with exit 0.
func TestLauncherSurvivesItsServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A", Servers: 3, Nodes: []string{"a1", "a2"}}},
	})
	servers := w.Cluster("A").Servers()
	signIn := w.SignIn(servers[0].ClientURL())
	var reconnected = make(chan struct{}, 1)
	out := &e2e.SyncBuffer{}
	file := filepath.Join(t.TempDir(), "go")
	run, err := launch.Launch(ctx, launch.Config{SignIn: func(nspace string) (*nats.Conn, error) {
		nc, err := signIn(nspace)
		if err == nil {
			nc.SetReconnectHandler(func(*nats.Conn) {
				select {
				case reconnected <- struct{}{}:
				default:
				}
			})
		}
		return nc, err
	}, Stdout: out, Stderr: out, Jobs: []launch.JobSpec{{N: 2, MapBy: launch.MapByNode, App: launch.App{Path: "/bin/sh",
		Args: []string{"-c", `echo before; while [ ! -e "$0" ]; do sleep 0.05; done; echo after`, file}}}}})
	if err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		if n := strings.Count(out.String(), "before"); n != 2 {
			return fmt.Errorf("%d of 2 ranks started:\n%s", n, out)
		}
		return nil
	})
	if err := servers[0].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reconnected:
	case <-ctx.Done():
		t.Fatal("the launcher did not reconnect to another server")
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := run.Wait(ctx)
	if err != nil || res.ExitCode != 0 || res.Lost {
		t.Fatalf("%+v, %v\n%s", res, err, out)
	}
	if strings.Count(out.String(), "before") != 2 || strings.Count(out.String(), "after") != 2 {
		t.Fatalf("output:\n%s", out)
	}
	// Its end, published with the job credential after the reconnect.
	agentNC := clustertest.Connect(t, servers[1].ClientURL(), w.Keys().Option(security.RoleAgent))
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		_, m, err := launch.CachedJobEnd(ctx, agentNC, "A", run.Nspace())
		if err == nil && m == nil {
			err = fmt.Errorf("no PMIX_EVENT_JOB_END of %s cached", run.Nspace())
		}
		return err
	})
}
