package cabi

import (
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/pmix"
)

// kvsWorld is the world testdata/kvs.c runs in: three ranks, 0 and 1 on
// one node and 2 on another, as the program expects, and the job size
// among the job-level info.
func kvsWorld() agenttest.Spec {
	return agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs: []agenttest.Job{{Cluster: "A", Nspace: "kvs", Nodes: []string{"n1", "n1", "n2"}, Detached: true,
			Info: []pmix.Info{pmix.NewInfo(pmix.KeyJobSize, pmix.Uint32(3))}}},
	}
}

// TestKeyValueExchange runs testdata/kvs.c as three ranks on two nodes:
// each puts values of several types and scopes, commits and fences, with
// PMIX_COLLECT_DATA ("collect") or without it ("direct": each Get is
// fetched from the peer's agent), then reads every peer's values with
// PMIx_Get and PMIx_Get_nb with the types it put (PMIX_INT for
// pmix.exit.code), frees each, and gets PMIX_ERR_NOT_FOUND for an unknown
// key and for a value whose scope it is outside of. The job size comes
// from PMIx_Get of pmix.job.size (PMIX_UINT32) on the wildcard rank. A
// value stored with PMIx_Store_internal is read back; calls with bad
// arguments return PMIX_ERR_BAD_PARAM (-27); PMIx_Fence_nb completes.
func TestKeyValueExchange(t *testing.T) {
	for _, mode := range []string{"collect", "direct"} {
		t.Run(mode, func(t *testing.T) {
			forEachHeader(t, "kvs.c", kvsWorld(), func(t *testing.T, bin string, w *agenttest.World) {
				ctx := testContext(t)
				var ranks []*started
				for r := range 3 {
					ranks = append(ranks, start(t, ctx, bin, w.Env(fmt.Sprintf("A:kvs.%d", r)), "size 3", mode))
				}
				for r, s := range ranks {
					out := s.wait(t)
					want := []string{"fence 0", "get_nb-unknown -46", "fence_nb 0", "finalize 0"}
					for p := range 3 {
						if p != r {
							want = append(want, fmt.Sprintf("peer %d ok", p))
						}
					}
					for _, bad := range []string{"get-null-key", "get-long-key", "get-null-val", "get_nb-null-cb",
						"put-null-key", "put-long-key", "put-null-val", "put-scope", "store-null-proc",
						"fence-null-procs", "fence_nb-null-procs", "connect-null-procs", "disconnect-null-procs"} {
						want = append(want, "bad "+bad+" -27")
					}
					for _, line := range want {
						if !strings.Contains(out, line+"\n") {
							t.Errorf("rank %d's output lacks %q:\n%s", r, line, out)
						}
					}
					if strings.Contains(out, "FAIL") {
						t.Errorf("rank %d:\n%s", r, out)
					}
				}
			})
		})
	}
}

// TestConnect runs testdata/connect.c in two jobs, two ranks of "ja" on
// two nodes and one of "jb" with the _nb forms: the three connect, read
// the same new nspace and distinct ranks in it through pmixbus's Get keys,
// disconnect naming the procs in the other order, and a second
// disconnect fails with PMIX_ERR_INVALID_NAMESPACE (-44).
func TestConnect(t *testing.T) {
	forEachHeader(t, "connect.c", agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs: []agenttest.Job{
			{Cluster: "A", Nspace: "ja", Nodes: []string{"n1", "n2"}, Detached: true},
			{Cluster: "A", Nspace: "jb", Nodes: []string{"n1"}, Detached: true},
		},
	}, func(t *testing.T, bin string, w *agenttest.World) {
		ctx := testContext(t)
		procs := []*started{
			start(t, ctx, bin, w.Env("A:ja.0"), "ready", "ja", "jb"),
			start(t, ctx, bin, w.Env("A:ja.1"), "ready", "ja", "jb"),
			start(t, ctx, bin, w.Env("A:jb.0"), "ready", "ja", "jb", "nb"),
		}
		nspaces, ranks := map[string]bool{}, map[string]bool{}
		for i, p := range procs {
			out := p.wait(t)
			got := lines(out)
			if got["connect"] != "0" || got["disconnect"] != "0" || got["disconnect-again"] != "-44" ||
				got["finalize"] != "0" || strings.Contains(out, "FAIL") {
				t.Errorf("proc %d:\n%s", i, out)
			}
			ns, rank, _ := strings.Cut(got["connected"], " ")
			nspaces[ns], ranks[rank] = true, true
		}
		if len(nspaces) != 1 || len(ranks) != 3 || nspaces[""] {
			t.Errorf("new nspaces %v, ranks %v: want one nspace, three ranks", nspaces, ranks)
		}
		t.Logf("new nspace %v, ranks %v", nspaces, ranks)
	})
}

// TestKeyValueExchangeSanitized runs testdata/kvs.c built with
// AddressSanitizer against the library: every value the library hands
// out comes from the malloc the program frees it with, and none is freed
// twice or used after it is freed, and with leak detection, the program
// freeing every value it got leaves nothing allocated: no value or part
// of one is left to the caller that the PMIx macros would not free
// (skipped where the compiler has no sanitizer runtime).
func TestKeyValueExchangeSanitized(t *testing.T) {
	probe := exec.Command(needCC(t), "-fsanitize=address", "-x", "c", "-", "-o", filepath.Join(t.TempDir(), "probe"))
	probe.Stdin = strings.NewReader("int main(void) { return 0; }\n")
	if b, err := probe.CombinedOutput(); err != nil {
		t.Skipf("the C compiler cannot build with AddressSanitizer here: %v\n%s", err, b)
	}
	bin := compileWith(t, "kvs.c", headers(t)[0], true, "-g", "-fsanitize=address", "-fno-omit-frame-pointer")
	w := agenttest.Start(t, kvsWorld())
	ctx := testContext(t)
	var ranks []*started
	for r := range 3 {
		env := maps.Clone(w.Env(fmt.Sprintf("A:kvs.%d", r)))
		env["ASAN_OPTIONS"] = "detect_leaks=1"
		ranks = append(ranks, start(t, ctx, bin, env, "size 3", "collect"))
	}
	for r, s := range ranks {
		if out := s.wait(t); strings.Contains(out, "FAIL") {
			t.Errorf("rank %d:\n%s", r, out)
		}
	}
}

// TestDirectModex runs testdata/dmodex.c as three ranks on two nodes,
// with no fence: a get of a peer's key not committed yet waits for its
// commit, of the same node and of another; PMIX_TIMEOUT bounds the wait
// (PMIX_ERR_TIMEOUT, -24), PMIX_OPTIONAL does not wait
// (PMIX_ERR_NOT_FOUND, -46); a wait for a peer that exits without
// finalizing ends with PMIX_ERR_NOT_FOUND; a Finalize with a get still
// waiting returns.
func TestDirectModex(t *testing.T) {
	forEachHeader(t, "dmodex.c", dmodexWorld(), func(t *testing.T, bin string, w *agenttest.World) {
		ctx := testContext(t)
		r0 := start(t, ctx, bin, w.Env("A:dm.0"), "waiting")
		r1 := start(t, ctx, bin, w.Env("A:dm.1"), "init")
		r2 := start(t, ctx, bin, w.Env("A:dm.2"), "init")
		if out := r2.wait(t); !strings.Contains(out, "dying\n") || strings.Contains(out, "FAIL") {
			t.Errorf("rank 2:\n%s", out)
		}
		if out := r1.wait(t); !strings.Contains(out, "finalize 0\n") || strings.Contains(out, "FAIL") {
			t.Errorf("rank 1:\n%s", out)
		}
		out := r0.wait(t)
		for _, want := range []string{"late 1 0", "late 2 0", "timeout -24", "optional -46", "dead -46", "finalize 0"} {
			if !strings.Contains(out, want+"\n") {
				t.Errorf("rank 0's output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "FAIL") {
			t.Errorf("rank 0:\n%s", out)
		}
	})
}

func dmodexWorld() agenttest.Spec {
	return agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "dm", Nodes: []string{"n1", "n1", "n2"}, Detached: true}},
	}
}

// TestDataArrays runs testdata/arrays.c as two ranks on two nodes: data
// arrays of uint32, size_t, int, bool, float, double, strings, byte
// objects and values (nested), and an empty one, put by rank 0 and read
// by rank 1 with their C types and elements; an array of struct timeval
// is refused with PMIX_ERR_NOT_SUPPORTED (-47).
func TestDataArrays(t *testing.T) {
	forEachHeader(t, "arrays.c", agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "arr", Nodes: []string{"n1", "n2"}, Detached: true}},
	}, func(t *testing.T, bin string, w *agenttest.World) {
		ctx := testContext(t)
		r0 := start(t, ctx, bin, w.Env("A:arr.0"), "init")
		r1 := start(t, ctx, bin, w.Env("A:arr.1"), "init")
		out1 := r1.wait(t)
		for _, k := range []string{"u32", "size", "int", "bool", "float", "double", "empty", "str", "bytes", "values"} {
			if !strings.Contains(out1, "arr."+k+" ok\n") {
				t.Errorf("rank 1 did not check arr.%s:\n%s", k, out1)
			}
		}
		out0 := r0.wait(t)
		if !strings.Contains(out0, "put-timeval -47\n") {
			t.Errorf("rank 0: want put-timeval -47:\n%s", out0)
		}
		for r, out := range []string{out0, out1} {
			if strings.Contains(out, "FAIL") || !strings.Contains(out, "finalize 0\n") {
				t.Errorf("rank %d:\n%s", r, out)
			}
		}
	})
}
