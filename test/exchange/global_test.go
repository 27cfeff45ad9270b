package exchange

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/publishlookup"
)

// Where GLOBAL publish/lookup data lives in the topologies "pmixbus server
// -h" describes, none of which needs a hub named "hub"; and what a lookup
// that finds nothing says.

// natsAgent is the configuration of "pmixbus agent --cluster id --nats
// url" but for the node.
func natsAgent(id cluster.ID, url string) agent.Config {
	cfg := agent.DefaultConfig(id, "")
	cfg.URL = url
	return cfg
}

// jobOn starts one agent per distinct node on the NATS of cfg.URL, with
// cfg's GLOBAL domain, registers job nspace (rank r on nodes[r], session
// s1) with each, and attaches a client per rank. The clients come back in
// rank order.
func jobOn(t *testing.T, cfg agent.Config, nspace string, nodes ...string) []*e2e.Client {
	t.Helper()
	w := e2e.WorldOf(t, agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: cfg.Cluster, URL: cfg.URL}},
		Jobs:     []agenttest.Job{{Cluster: cfg.Cluster, Nspace: nspace, Session: "s1", Nodes: nodes}},
		Agent:    func(c *agent.Config) { c.GlobalDomain = cfg.GlobalDomain },
	}))
	out := make([]*e2e.Client, len(nodes))
	for r := range nodes {
		out[r] = w.Client(string(cfg.Cluster) + ":" + pmix.Proc{Nspace: nspace, Rank: pmix.Rank(r)}.String())
	}
	return out
}

// globalKeyIn reports whether GLOBAL key is published in the bucket of
// domain, read through the server at url.
func globalKeyIn(t *testing.T, url, domain, key string) bool {
	t.Helper()
	js, err := natsjs.NewWithDomain(clustertest.Connect(t, url), domain)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), publishlookup.DefaultBucket)
	if errors.Is(err, natsjs.ErrBucketNotFound) {
		return false
	}
	if err != nil {
		t.Fatalf("bucket in %s: %v", domain, err)
	}
	_, err = kv.Get(t.Context(), "g."+key)
	if err != nil && !errors.Is(err, natsjs.ErrKeyNotFound) {
		t.Fatalf("g.%s in %s: %v", key, domain, err)
	}
	return err == nil
}

// TestGlobalOnLoneServer: one "pmixbus server" and agents on it with
// --nats, the simplest setup there is; GLOBAL data lives in the cluster's
// own domain, the only one.
func TestGlobalOnLoneServer(t *testing.T) {
	srv := clustertest.StartServer(t, "solo")
	cs := jobOn(t, natsAgent("solo", srv.ClientURL()), "job", "n1", "n2")
	cs[0].Publish(t, e2e.Str("rendezvous", "solo:job"), e2e.Rng(pmix.RangeGlobal))
	cs[1].LookupOne(t, "rendezvous", "solo:job", "job.0")
	cs[1].LookupOne(t, "rendezvous", "solo:job", "job.0", e2e.Rng(pmix.RangeGlobal))
	if !globalKeyIn(t, srv.ClientURL(), "solo", "rendezvous") {
		t.Fatal("GLOBAL data is not in the cluster's own domain")
	}
}

// TestGlobalWithHubOfAnyName: two clusters joined by leaf links as
// "pmixbus server -h" says — through cluster A's own server acting as the
// hub, or through a hub server of a cluster named otherwise than "hub" —
// share GLOBAL data in the hub's domain, found by every agent on its own.
func TestGlobalWithHubOfAnyName(t *testing.T) {
	topologies := []struct {
		name  string
		start func(t *testing.T) (urlA, urlB, hubDomain string)
	}{
		{"cluster A is the hub", func(t *testing.T) (string, string, string) {
			cfg := cluster.DefaultConfig("A", t.TempDir())
			cfg.LeafPort = -1
			cfg.Logger = clustertest.Logger(t)
			a := startedServer(t, cfg)
			cfg = cluster.DefaultConfig("B", t.TempDir())
			cfg.LeafRemotes = []string{a.LeafURL()}
			cfg.Logger = clustertest.Logger(t)
			b := startedServer(t, cfg)
			return a.ClientURL(), b.ClientURL(), "A"
		}},
		{"a hub named central", func(t *testing.T) (string, string, string) {
			cfg := cluster.DefaultMultiClusterConfig(t.TempDir(), cluster.ClusterSpec{ID: "A", Servers: 1}, cluster.ClusterSpec{ID: "B", Servers: 1})
			cfg.HubDomain = "central"
			cfg.Logger = clustertest.Logger(t)
			mc, err := cluster.StartMultiCluster(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = mc.Shutdown(context.Background()) })
			return mc.Cluster("A").URL(), mc.Cluster("B").URL(), "central"
		}},
	}
	for _, tt := range topologies {
		t.Run(tt.name, func(t *testing.T) {
			urlA, urlB, hub := tt.start(t)
			a := jobOn(t, natsAgent("A", urlA), "jobA", "a1")[0]
			b := jobOn(t, natsAgent("B", urlB), "jobB", "b1")[0]
			b.Publish(t, e2e.Str("from-b", "B:jobB"), e2e.Rng(pmix.RangeGlobal))
			a.LookupOne(t, "from-b", "B:jobB", "B:jobB.0")
			a.Publish(t, e2e.Str("from-a", "A:jobA"), e2e.Rng(pmix.RangeGlobal))
			b.LookupOne(t, "from-a", "A:jobA", "A:jobA.0", e2e.Rng(pmix.RangeGlobal))
			a.LookupFails(t, []string{"absent"}, pmix.ErrNotFound)
			b.LookupFails(t, []string{"absent"}, pmix.ErrNotFound, e2e.Rng(pmix.RangeGlobal))
			if !globalKeyIn(t, urlB, hub, "from-a") || !globalKeyIn(t, urlA, hub, "from-b") {
				t.Fatalf("GLOBAL data is not in the hub's domain %s", hub)
			}
			if globalKeyIn(t, urlB, "B", "from-b") {
				t.Fatal("GLOBAL data in cluster B's own bucket")
			}
		})
	}
}

// startedServer starts a server of cfg, shut down at cleanup.
func startedServer(t *testing.T, cfg cluster.Config) *cluster.Server {
	t.Helper()
	s, err := cluster.StartServer(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

// TestGlobalDomainNotFound: an agent whose cluster links to a hub that is
// not there, and which was given no GLOBAL domain, cannot know where GLOBAL
// data lives: it fails at start, naming the flag that fixes it. Given one,
// it starts, and a GLOBAL publish is PMIX_ERR_UNREACH until that domain
// answers.
func TestGlobalDomainNotFound(t *testing.T) {
	cfg := cluster.DefaultConfig("B", t.TempDir())
	cfg.LeafRemotes = []string{"nats-leaf://127.0.0.1:1"} // no hub there
	cfg.Logger = clustertest.Logger(t)
	srv := startedServer(t, cfg)

	acfg := natsAgent("B", srv.ClientURL())
	acfg.Node = "b1"
	acfg.Listen = "unix:" + filepath.Join(e2e.ShortDir(t), "b1.sock")
	acfg.Logger = clustertest.Logger(t)
	a, err := agent.New(acfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err = a.Start(ctx)
	if err == nil {
		_ = a.Shutdown(context.Background())
		t.Fatal("the agent started without knowing where GLOBAL data lives")
	}
	for _, want := range []string{"GLOBAL", `"hub"`, "--global-domain"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start error %q does not say %q", err, want)
		}
	}

	acfg.GlobalDomain = "hub"
	b := jobOn(t, acfg, "jobB", "b1")[0]
	b.Publish(t, e2e.Str("mine", "x"), e2e.Rng(pmix.RangeNamespace))
	b.LookupOne(t, "mine", "x", "jobB.0")
	if err := b.C.Publish(t.Context(), []pmix.Info{e2e.Str("everyone", "x"), e2e.Rng(pmix.RangeGlobal)}); !errors.Is(err, pmix.ErrUnreach) {
		t.Fatalf("GLOBAL publish without the hub: %v", err)
	}
}

// TestLookupMissIsNotFound: a key published nowhere is PMIX_ERR_NOT_FOUND
// at every range; a lookup that finds some keys names the others; an
// unpublish of a key already unpublished is PMIX_ERR_NOT_FOUND.
func TestLookupMissIsNotFound(t *testing.T) {
	srv := clustertest.StartServer(t, "solo")
	cs := jobOn(t, natsAgent("solo", srv.ClientURL()), "job", "n1", "n2")
	custom := pmix.NewInfo(publishlookup.KeyCustomRange, pmix.Procs([]pmix.Proc{{Nspace: "job", Rank: pmix.RankWildcard}}))
	for _, directives := range [][]pmix.Info{
		nil,
		{e2e.Rng(pmix.RangeLocal)},
		{e2e.Rng(pmix.RangeNamespace)},
		{e2e.Rng(pmix.RangeSession)},
		{e2e.Rng(pmix.RangeGlobal)},
		{e2e.Rng(pmix.RangeCustom), custom},
	} {
		cs[1].LookupFails(t, []string{"absent"}, pmix.ErrNotFound, directives...)
	}

	cs[0].Publish(t, e2e.Str("here", "x"), e2e.Rng(pmix.RangeGlobal))
	got, err := cs[1].C.Lookup(t.Context(), []string{"here", "absent", "gone"}, nil)
	if !errors.Is(err, pmix.ErrPartialSuccess) || len(got) != 1 || got[0].Key != "here" {
		t.Fatalf("partial lookup: %+v %v", got, err)
	}
	for _, missing := range []string{`"absent"`, `"gone"`} {
		if !strings.Contains(err.Error(), missing) {
			t.Errorf("partial lookup error %q does not name %s", err, missing)
		}
	}

	for _, directives := range [][]pmix.Info{nil, {e2e.Rng(pmix.RangeGlobal)}} {
		cs[0].Publish(t, e2e.Str("twice", "x"), e2e.Rng(pmix.RangeGlobal))
		if err := cs[0].C.Unpublish(t.Context(), []string{"twice"}, directives); err != nil {
			t.Fatalf("unpublish %v: %v", directives, err)
		}
		if err := cs[0].C.Unpublish(t.Context(), []string{"twice"}, directives); !errors.Is(err, pmix.ErrNotFound) {
			t.Fatalf("second unpublish %v: %v", directives, err)
		}
	}
}
