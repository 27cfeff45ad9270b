package main

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

// TestStatus: "pmixbus status" through the hub lists both clusters, their
// agents with slots and the jobs they host, and an agent killed as down.
func TestStatus(t *testing.T) {
	keyDir := t.TempDir()
	w := startWithKeys(t, keyDir, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A", Nodes: []string{"a1", "a2", "a3"}}, {ID: "B", Nodes: []string{"b1"}}},
		Jobs: []agenttest.Job{
			{Cluster: "A", Nspace: "sim", Session: "s1", Nodes: []string{"a1", "a1", "a2", "a1"}},
			{Cluster: "B", Nspace: "far", Nodes: []string{"b1"}},
		},
		Agent: func(c *agent.Config) {
			c.Slots = 6
			c.LivenessInterval, c.LivenessTTL = 250*time.Millisecond, time.Second
		},
	})
	hub := w.MultiCluster().HubURL()
	watchKey := security.KeyFile(keyDir, security.RoleWatch) // status is read-only
	code, out, errOut := runCmd(t, "status", "--nats", hub, "--nkey", watchKey, "--wait", "5s")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	t.Logf("\n%s", out)
	for _, want := range []string{
		"cluster A (JetStream domain A): 3 agents up\n",
		"cluster B (JetStream domain B): 1 agent up\n",
		"NODE  STATE  SLOTS  USED  LAST BEAT",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	for _, re := range []string{
		`(?m)^  a1 +up +6 +3 +[0-9.]+m?s ago +\S+ +unix:\S+ +sim:0-1,3$`,
		`(?m)^  a2 +up +6 +1 +.* +sim:2$`,
		`(?m)^  a3 +up +6 +0 +.* +-$`,
		`(?m)^  b1 +up +6 +1 +.* +far:0$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("no line matching %s in\n%s", re, out)
		}
	}

	// a3 killed: once a1 has declared it down, status says so.
	w.Agent("a3").NATS().Close()
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if w.Agent("a1").LivenessStats().Declared == 0 {
			return errors.New("a3 not declared down yet")
		}
		return nil
	})
	code, out, errOut = runCmd(t, "status", "--nats", w.URL("A"), "--json", "--nkey", watchKey, "--wait", "5s")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var s statusJSON
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(s.Clusters) != 2 || s.Clusters[0].Cluster != "A" || len(s.Clusters[0].Agents) != 3 {
		t.Fatalf("status --json: %s", out)
	}
	a1, a3 := s.Clusters[0].Agents[0], s.Clusters[0].Agents[2]
	if a1.Node != "a1" || a1.State != "up" || a1.Slots != 6 || len(a1.Jobs) != 1 || a1.Jobs[0].Nspace != "sim" ||
		len(a1.Jobs[0].Ranks) != 3 || a1.AgeS > 5 || a1.TTLMS != 1000 {
		t.Errorf("a1: %+v", a1)
	}
	if a3.Node != "a3" || a3.State != "down" {
		t.Errorf("a3: %+v", a3)
	}
}

func TestStatusNothingThere(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	code, _, errOut := runCmd(t, "status", "--nats", srv.ClientURL(), "--wait", "100ms")
	if code != exitFail || !strings.Contains(errOut, "no pmixbus agent answered") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	code, out, errOut := runCmd(t, "status", "--nats", srv.ClientURL(), "--wait", "100ms", "--cluster", "A")
	if code != exitFail || !strings.Contains(out, "cluster A") || !strings.Contains(out, "no agents bucket") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, args := range [][]string{{"status", "--wait", "0s"}, {"status", "--cluster", "a:b"}, {"status", "extra"}} {
		if code, _, errOut := runCmd(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d: %s", args, code, errOut)
		}
	}
}

func TestFormatRanks(t *testing.T) {
	for _, tt := range []struct {
		in   []pmix.Rank
		want string
	}{
		{nil, ""}, {[]pmix.Rank{0}, "0"}, {[]pmix.Rank{3, 0, 1, 2, 8, 10, 11}, "0-3,8,10-11"}, {[]pmix.Rank{5, 7}, "5,7"},
	} {
		if got := launch.FormatRanks(tt.in); got != tt.want {
			t.Errorf("launch.FormatRanks(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// startWithKeys starts a world whose keys are in keyDir, as the commands
// find them in a keys directory.
func startWithKeys(t *testing.T, keyDir string, spec agenttest.Spec) *agenttest.World {
	t.Helper()
	keys, err := security.EnsureKeys(keyDir)
	if err != nil {
		t.Fatal(err)
	}
	spec.Keys = keys
	return agenttest.Start(t, spec)
}
