package cabi

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/launch"
)

var topoLib struct {
	once sync.Once
	dir  string // libpmix.so.2 (a link to libDir's) and pmixbus-topology
	err  error
}

// topologyLibDir returns a directory holding the library and the topology
// helper, built by the Makefile as `make` builds lib/pmixbus-topology, or
// skips t where hwloc's headers are not installed. It is not libDir: the
// other tests' agents keep running without a topology.
func topologyLibDir(t *testing.T) string {
	t.Helper()
	lib := libDir(t)
	if err := exec.Command("pkg-config", "--exists", "hwloc").Run(); err != nil {
		t.Skip("hwloc's headers are not installed (Debian: apt-get install libhwloc-dev): no topology helper")
	}
	topoLib.once.Do(func() {
		dir := filepath.Join(scratch, "topolib")
		if topoLib.err = makeInto(dir, filepath.Join(dir, agent.TopologyHelper)); topoLib.err != nil {
			return
		}
		for _, name := range []string{"libpmix.so.2", "libpmix.so"} {
			if err := os.Symlink(filepath.Join(lib, name), filepath.Join(dir, name)); err != nil {
				topoLib.err = err
				return
			}
		}
		topoLib.dir = dir
	})
	if topoLib.err != nil {
		t.Fatal(topoLib.err)
	}
	return topoLib.dir
}

// An agent whose PMIxLibDir has the topology helper gives its ranks the
// node's topology as XML and in a shared-memory file: PMIx_Get answers the
// file's keys with the types Open MPI asks for (the address and the length
// PMIX_SIZE), the file adopts into this machine's topology, and where the
// range is taken in a rank the adoption fails cleanly and the XML loads
// (testdata/topology.c). Open MPI 4.1's MPI_Init adopts it.
func TestSharedTopology(t *testing.T) {
	dir := topologyLibDir(t)
	hwloc, err := exec.Command("pkg-config", "--libs", "hwloc").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := compileWith(t, "topology.c", header{"pmixbus", "include"}, true, strings.Fields(string(hwloc))...)
	w := launchClustersWith(t, func(c *agent.Config) { c.PMIxLibDir = dir }, agenttest.Cluster{ID: "A", Nodes: []string{"a1"}})
	res, out := launchJob(t, w, launch.Config{}, launch.JobSpec{N: 1, App: launch.App{Path: bin}})
	if res.ExitCode != 0 || !strings.Contains(out, "topology ok pus ") {
		t.Fatalf("result %+v\noutput:\n%s", res, out)
	}

	t.Run("open mpi", func(t *testing.T) {
		mpi := buildMPIHello(t)
		// A binding policy of the rank's own: the launcher then does not
		// tell Open MPI it bound the ranks, and MPI_Init loads the
		// topology (docs/launch.md, Binding).
		env := map[string]string{"TMPDIR": t.TempDir(), "OMPI_MCA_hwloc_base_verbose": "5", "OMPI_MCA_hwloc_base_binding_policy": "none"}
		res, out := launchJob(t, w, launch.Config{}, launch.JobSpec{N: 2, App: launch.App{Path: mpi, Env: env}})
		if res.ExitCode != 0 || !strings.Contains(out, "hello from 1 of 2, appnum 0, sum 1") {
			t.Fatalf("result %+v\noutput:\n%s", res, out)
		}
		if n := strings.Count(out, "hwloc:base: topology in shared memory"); n != 2 {
			t.Errorf("%d ranks of 2 adopted the shared topology:\n%s", n, out)
		}
	})
}

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
