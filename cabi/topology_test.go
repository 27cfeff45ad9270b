package cabi

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
)

// TestLoadTopology runs testdata/topo.c under an agent that gives its
// ranks a synthetic topology of 12 PUs as PMIX_LOCAL_TOPO: PMIx_Load_topology
// loads it with hwloc (source "hwloc", the same topology for every call);
// before PMIx_Init it is PMIX_ERR_INIT (-31), with a NULL topology
// PMIX_ERR_BAD_PARAM (-27), with another library's source
// PMIX_ERR_NOT_SUPPORTED (-47). Skipped without hwloc's headers.
func TestLoadTopology(t *testing.T) {
	if err := exec.Command("pkg-config", "--exists", "hwloc").Run(); err != nil {
		t.Skip("hwloc's headers are not installed (libhwloc-dev): the library has no PMIx_Load_topology")
	}
	for _, h := range headers(t) {
		t.Run(h.name, func(t *testing.T) {
			bin := compileWith(t, "topo.c", h, true, "-lhwloc")
			xml, err := exec.Command(bin, "export").Output()
			if err != nil || !strings.Contains(string(xml), "<topology") {
				t.Fatalf("export: %v\n%s", err, xml)
			}
			w := agenttest.Start(t, agenttest.Spec{
				Clusters: []agenttest.Cluster{{ID: "A"}},
				Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "topo", Nodes: []string{"n1"}, Detached: true}},
				Agent:    func(c *agent.Config) { c.Topology = string(xml) },
			})
			out := run(t, testContext(t), bin, w.Env("A:topo.0"), "load")
			for _, want := range []string{"before-init -31", "load 0", "pus 12", "bad -27", "other-source -47", "finalize 0"} {
				if !strings.Contains(out, want+"\n") {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "FAIL") {
				t.Error(out)
			}
		})
	}
}
