package agent_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
)

// The agent runs its PMIxLibDir's topology helper with a file of its own
// for the shared-memory copy: the file is the agent's uid's alone, its
// path, address and length are job-level keys of every client beside the
// XML, and the file is gone once the agent stopped.
func TestSharedTopologyKeysAndFile(t *testing.T) {
	libDir := t.TempDir()
	helper := `f="$2"; test "$1" = --shmem && head -c 8192 /dev/zero > "$f" && echo "shmem 0x2aaa80000000 8192"
printf '<?xml version="1.0"?>\n<topology version="2.0"></topology>\n'`
	if err := os.WriteFile(filepath.Join(libDir, agent.TopologyHelper), []byte("#!/bin/sh\n"+helper+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := clustertest.StartServer(t, "A")
	a := newAgent(t, srv.ClientURL(), "unix:"+filepath.Join(sockDir(t), "a.sock"), func(c *agent.Config) { c.PMIxLibDir = libDir })
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			shutdown(t, a)
		}
	})
	c := attachOne(t, a)
	job := pmix.Proc{Nspace: "j", Rank: pmix.RankWildcard}
	get := func(key string) pmix.Value {
		t.Helper()
		v, err := c.Get(t.Context(), job, key, nil)
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		return v
	}
	if _, ok := get(pmix.KeyLocalTopo).Str(); !ok {
		t.Errorf("PMIX_LOCAL_TOPO is not a string")
	}
	if v := get(pmix.KeyHwlocShmemAddr); !v.Equal(pmix.Uint64(0x2aaa80000000)) {
		t.Errorf("address %v", v)
	}
	if v := get(pmix.KeyHwlocShmemSize); !v.Equal(pmix.Uint64(8192)) {
		t.Errorf("length %v", v)
	}
	path, ok := get(pmix.KeyHwlocShmemFile).Str()
	if !ok {
		t.Fatal("PMIX_HWLOC_SHMEM_FILE is not a string")
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || st.Size() != 8192 {
		t.Errorf("%s: mode %v, %d bytes", path, st.Mode(), st.Size())
	}
	_ = c.Finalize(t.Context())
	shutdown(t, a)
	stopped = true
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s after the agent stopped: %v", path, err)
	}
}
