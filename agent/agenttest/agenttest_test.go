package agenttest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

func TestSpecValidate(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want []string // in the error; none: valid
	}{
		{name: "two clusters", spec: Spec{
			Clusters: []Cluster{{ID: "A"}, {ID: "B", Servers: 3, Nodes: []string{"b1", "b2"}}},
			Jobs:     []Job{{Cluster: "A", Nspace: "j", Nodes: []string{"a1", "a2"}}, {Cluster: "B", Nspace: "j", Nodes: []string{"b2"}}},
		}},
		{name: "no cluster", spec: Spec{}, want: []string{"Clusters: none"}},
		{name: "bad and twice", spec: Spec{Clusters: []Cluster{{ID: "a.b"}, {ID: "B"}, {ID: "B"}}},
			want: []string{"Clusters[0].ID", `Clusters[2].ID: "B" appears twice`}},
		{name: "some URLs", spec: Spec{Clusters: []Cluster{{ID: "A", URL: "nats://h:1"}, {ID: "B"}}},
			want: []string{"1 of 2 have a URL"}},
		{name: "insecure with keys, TLS for one cluster", spec: Spec{Clusters: []Cluster{{ID: "A"}}, Insecure: true, Keys: &security.Keys{}, LeafTLS: &cluster.LeafTLS{}},
			want: []string{"Insecure: given with Keys", "LeafTLS: for the leaf links of a world that starts several clusters"}},
		{name: "node in two clusters", spec: Spec{Clusters: []Cluster{{ID: "A", Nodes: []string{"n"}}, {ID: "B", Nodes: []string{"n"}}}},
			want: []string{`node "n" is also a node of cluster A`}},
		{name: "job problems", spec: Spec{
			Clusters: []Cluster{{ID: "A", Nodes: []string{"a1"}}, {ID: "B"}},
			Jobs: []Job{
				{Cluster: "C", Nspace: "j", Nodes: []string{"c1"}},
				{Cluster: "A", Nspace: "x:y", Nodes: []string{"a2"}},
				{Cluster: "B", Nspace: "j"},
				{Cluster: "B", Nspace: "j", Nodes: []string{"a1"}},
			},
		}, want: []string{`Jobs[0].Cluster: no cluster "C"`, `Jobs[1].Nspace: "x:y"`, `node "a2" is not one of cluster A's nodes`,
			"Jobs[2].Nodes: none", "Jobs[3].Nspace: B:j appears twice", `node "a1" is a node of cluster A, not of B`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("error %v, want ErrInvalidSpec", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestWorld starts two clusters and sends an event from one to the other;
// restarts an agent and attaches its client again; adds a job later.
func TestWorld(t *testing.T) {
	w := Start(t, Spec{
		Clusters: []Cluster{{ID: "A"}, {ID: "B"}},
		Jobs: []Job{
			{Cluster: "A", Nspace: "sim", Session: "s1", Nodes: []string{"a1", "a1", "a2"}},
			{Cluster: "B", Nspace: "viz", Nodes: []string{"b1"}},
			{Cluster: "B", Nspace: "ext", Nodes: []string{"b1"}, Detached: true},
		},
		Agent: func(c *agent.Config) { c.HandlerTimeout = 5 * time.Second },
	})
	if got := strings.Join(w.Nodes(), " "); got != "a1 a2 b1" {
		t.Errorf("nodes %s", got)
	}
	var names []string
	for _, p := range w.Procs() {
		names = append(names, p.Name+"@"+p.Node)
	}
	if got := strings.Join(names, " "); got != "A:sim.0@a1 A:sim.1@a1 A:sim.2@a2 B:viz.0@b1 B:ext.0@b1" {
		t.Errorf("procs %s", got)
	}
	if w.MultiCluster() == nil || w.Cluster("B") == nil || w.URL("A") != w.Cluster("A").URL() || w.URL("C") != "" {
		t.Errorf("topology accessors: %v %v %q", w.MultiCluster(), w.Cluster("B"), w.URL("A"))
	}
	if w.Client("B:ext.0") != nil || w.Env("B:ext.0")["PMIX_NAMESPACE"] != "ext" {
		t.Errorf("detached client: %v, env %v", w.Client("B:ext.0"), w.Env("B:ext.0"))
	}

	const code = pmix.ExternalErrBase - 1
	got := make(chan pmix.Proc, 1)
	if _, err := w.Client("B:viz.0").RegisterEventHandler(t.Context(), []pmix.Status{code}, nil, func(c *bus.Call, done bus.Done) {
		got <- c.Source
		done(pmix.EventActionComplete, nil)
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := w.WaitSourced(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.WaitPropagation(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Client("A:sim.2").NotifyEvent(ctx, code, pmix.RangeGlobal, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		if p.String() != "A:sim.2" {
			t.Errorf("source %v", p)
		}
	case <-ctx.Done():
		t.Fatal("the event never arrived")
	}

	old := w.Agent("a2")
	if err := old.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	a2, err := w.StartAgent(ctx, "a2")
	if err != nil || w.Agent("a2") != a2 || a2 == old {
		t.Fatalf("restart: %v", err)
	}
	if err := a2.RegisterJob(t.Context(), agent.Job{Nspace: "sim", Session: "s1", Procs: map[pmix.Rank]string{2: "a2"}}); err != nil {
		t.Fatal(err)
	}
	if c, err := w.Attach(ctx, "A:sim.2"); err != nil || w.Client("A:sim.2") != c {
		t.Fatalf("attach again: %v", err)
	}

	if err := w.AddJob(ctx, Job{Cluster: "A", Nspace: "late", Nodes: []string{"a2"}}); err != nil {
		t.Fatal(err)
	}
	if c := w.Client("A:late.0"); c == nil || c.Proc().Nspace != "late" {
		t.Fatalf("late client %v", c)
	}
	if err := w.AddJob(ctx, Job{Cluster: "A", Nspace: "nowhere", Nodes: []string{"a9"}}); !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("a job on an unknown node: %v", err)
	}
}

// TestNew starts a lone cluster outside a test's helpers, and closes it
// leaving nothing behind.
func TestNew(t *testing.T) {
	clustertest.CheckGoroutines(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	w, err := New(t.Context(), Spec{
		Clusters: []Cluster{{ID: "solo"}},
		Jobs:     []Job{{Cluster: "solo", Nspace: "j", Nodes: []string{"n1", "n2"}}},
	}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if w.MultiCluster() != nil || w.Cluster("solo") == nil || len(w.Cluster("solo").Servers()) != 1 {
		t.Fatal("a lone cluster of one server")
	}
	if w.Keys() == nil {
		t.Fatal("a world is secured by default")
	}
	clustertest.Refused(t, w.URL("solo"))
	a, b := w.Client("solo:j.0"), w.Client("solo:j.1")
	if err := a.Publish(t.Context(), []pmix.Info{pmix.NewInfo("k", pmix.String("v")), pmix.NewInfo(pmix.KeyRange, pmix.RangeValue(pmix.RangeGlobal))}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Lookup(t.Context(), []string{"k"}, nil); err != nil || len(got) != 1 {
		t.Fatalf("lookup %v %v", got, err)
	}
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(t.Context()); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := w.StartAgent(t.Context(), "n1"); !errors.Is(err, ErrClosed) {
		t.Errorf("start after close: %v", err)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("left %v behind", left)
	}

	if _, err := New(t.Context(), Spec{}, "", nil); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("New of an empty spec: %v", err)
	}
}

// TestExternalServers runs a world on a server it did not start.
func TestExternalServers(t *testing.T) {
	srv := clustertest.StartServer(t, "ext")
	w := Start(t, Spec{
		Clusters: []Cluster{{ID: "ext", URL: srv.ClientURL()}},
		Jobs:     []Job{{Cluster: "ext", Nspace: "j", Nodes: []string{"n1"}}},
	})
	if w.URL("ext") != srv.ClientURL() || w.Cluster("ext") != nil || w.Client("ext:j.0") == nil {
		t.Fatalf("url %q, cluster %v", w.URL("ext"), w.Cluster("ext"))
	}
	if w.Keys() != nil {
		t.Errorf("a world on servers it did not start has keys %v unless given them", w.Keys())
	}
	if err := w.WaitPropagation(t.Context()); !errors.Is(err, errNoServers) {
		t.Errorf("wait on servers not started here: %v", err)
	}
}
