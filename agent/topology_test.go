package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

// helperScript writes an executable shell script into dir.
func helperScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

const helperXML = `printf '<?xml version="1.0"?>\n<topology version="2.0"></topology>\n'`

// The topology helper's output is taken only when it is an hwloc XML
// topology of bounded size; a failing helper says why.
func TestRunTopologyHelper(t *testing.T) {
	dir := t.TempDir()
	good := helperScript(t, dir, "good", helperXML)
	xml, shared, err := runTopologyHelper(context.Background(), good, "")
	if err != nil || shared != nil || !strings.Contains(xml, "<topology") {
		t.Fatalf("good helper: %q, %v, %v", xml, shared, err)
	}
	for name, body := range map[string]string{
		"fails":   `echo "no hwloc here" >&2; exit 3`,
		"not-xml": `echo hello`,
		"huge":    `printf '<?xml version="1.0"?><topology>'; head -c 5000000 /dev/zero | tr '\0' x`,
	} {
		if _, _, err := runTopologyHelper(context.Background(), helperScript(t, dir, name, body), ""); err == nil {
			t.Errorf("%s: no error", name)
		} else if name == "fails" && !strings.Contains(err.Error(), "no hwloc here") {
			t.Errorf("fails: %v does not carry the helper's message", err)
		}
	}
}

// Asked for a shared-memory copy, the helper's "shmem ADDRESS LENGTH" line
// is taken when it names a page-aligned range the file holds; a bad line
// is an error that keeps the XML, a helper that shared nothing gives the
// XML alone.
func TestRunTopologyHelperShared(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "topo.hwloc")
	if err := os.WriteFile(file, make([]byte, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(name, line string) (string, *sharedTopology, error) {
		t.Helper()
		return runTopologyHelper(context.Background(), helperScript(t, dir, name, line+helperXML), file)
	}
	xml, shared, err := run("good", `echo "shmem 0x2aaa80000000 8192"; `)
	if err != nil || shared == nil || *shared != (sharedTopology{path: file, addr: 0x2aaa80000000, size: 8192}) || !strings.HasPrefix(xml, "<?xml") {
		t.Fatalf("good helper: %q, %+v, %v", xml, shared, err)
	}
	if xml, shared, err := run("none", ""); err != nil || shared != nil || xml == "" {
		t.Errorf("helper sharing nothing: %q, %+v, %v", xml, shared, err)
	}
	for name, line := range map[string]string{
		"words":      "shmem here there",
		"one":        "shmem 0x2aaa80000000",
		"unaligned":  "shmem 0x2aaa80000001 8192",
		"null":       "shmem 0 8192",
		"empty":      "shmem 0x2aaa80000000 0",
		"wraps":      "shmem 0xfffffffffffff000 8192",
		"past-file":  "shmem 0x2aaa80000000 16384",
		"huge":       "shmem 0x2aaa80000000 1073741824",
		"negative":   "shmem 0x2aaa80000000 -4096",
		"hex-length": "shmem 0x2aaa80000000 0x2000",
	} {
		xml, shared, err := run(name, `echo "`+line+`"; `)
		if err == nil || shared != nil || xml == "" {
			t.Errorf("%s (%q): %q, %+v, %v", name, line, xml, shared, err)
		}
	}
}

// The topology goes into every attach info unless the host gave one; its
// shared-memory copy goes beside it to the clients of the agent's uid
// and root, with sizes on the wire as uint64.
func TestWithTopology(t *testing.T) {
	a := &Agent{}
	a.topo.uid = 1000
	info := []pmix.Info{pmix.NewInfo(pmix.KeyJobSize, pmix.Uint32(2))}
	if got := a.withTopology(info, 1000); len(got) != 1 {
		t.Fatalf("no topology: %v", got)
	}
	a.topo.xml = "<?xml?><topology/>"
	got := a.withTopology(info, 1000)
	if v, ok := pmix.LookupValue(got, pmix.KeyLocalTopo); !ok || !v.Equal(pmix.String(a.topo.xml)) || len(got) != 2 {
		t.Fatalf("with a topology: %v", got)
	}
	given := append(info, pmix.NewInfo(pmix.KeyLocalTopo, pmix.String("the host's")))
	if v, _ := pmix.LookupValue(a.withTopology(given, 1000), pmix.KeyLocalTopo); !v.Equal(pmix.String("the host's")) {
		t.Errorf("the host's topology replaced by %v", v)
	}

	a.topo.shared = &sharedTopology{path: "/dev/shm/t.hwloc", addr: 0x2aaa80000000, size: 8192}
	for _, uid := range []int{1000, 0} {
		got := a.withTopology(info, uid)
		for key, want := range map[string]pmix.Value{
			pmix.KeyLocalTopo:      pmix.String(a.topo.xml),
			pmix.KeyHwlocShmemFile: pmix.String("/dev/shm/t.hwloc"),
			pmix.KeyHwlocShmemAddr: pmix.Uint64(0x2aaa80000000),
			pmix.KeyHwlocShmemSize: pmix.Uint64(8192),
		} {
			if v, ok := pmix.LookupValue(got, key); !ok || !v.Equal(want) {
				t.Errorf("uid %d: %s is %v, want %v", uid, key, v, want)
			}
		}
	}
	for _, uid := range []int{1001, -1} {
		got := a.withTopology(info, uid)
		if _, ok := pmix.Lookup(got, pmix.KeyHwlocShmemFile); ok || len(got) != 2 {
			t.Errorf("uid %d, who cannot read the file: %v", uid, got)
		}
	}
	if _, ok := pmix.Lookup(a.withTopology(given, 1000), pmix.KeyHwlocShmemFile); ok {
		t.Error("the shared topology given beside the host's XML")
	}
	if len(info) != 1 {
		t.Errorf("the caller's slice changed: %v", info)
	}
}
