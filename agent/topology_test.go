package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

// The topology helper's output is taken only when it is an hwloc XML
// topology of bounded size; a failing helper says why.
func TestRunTopologyHelper(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := script("good", `printf '<?xml version="1.0"?>\n<topology version="2.0"></topology>\n'`)
	xml, err := runTopologyHelper(context.Background(), good)
	if err != nil || !strings.Contains(xml, "<topology") {
		t.Fatalf("good helper: %q, %v", xml, err)
	}
	for name, body := range map[string]string{
		"fails":   `echo "no hwloc here" >&2; exit 3`,
		"not-xml": `echo hello`,
		"huge":    `printf '<?xml version="1.0"?><topology>'; head -c 5000000 /dev/zero | tr '\0' x`,
	} {
		if _, err := runTopologyHelper(context.Background(), script(name, body)); err == nil {
			t.Errorf("%s: no error", name)
		} else if name == "fails" && !strings.Contains(err.Error(), "no hwloc here") {
			t.Errorf("fails: %v does not carry the helper's message", err)
		}
	}
}

// The topology goes into every attach info unless the host gave one.
func TestWithTopology(t *testing.T) {
	a := &Agent{}
	info := []pmix.Info{pmix.NewInfo(pmix.KeyJobSize, pmix.Uint32(2))}
	if got := a.withTopology(info); len(got) != 1 {
		t.Fatalf("no topology: %v", got)
	}
	a.topology = "<?xml?><topology/>"
	got := a.withTopology(info)
	if v, ok := pmix.LookupValue(got, pmix.KeyLocalTopo); !ok || !v.Equal(pmix.String(a.topology)) {
		t.Fatalf("with a topology: %v", got)
	}
	given := append(info, pmix.NewInfo(pmix.KeyLocalTopo, pmix.String("the host's")))
	if v, _ := pmix.LookupValue(a.withTopology(given), pmix.KeyLocalTopo); !v.Equal(pmix.String("the host's")) {
		t.Errorf("the host's topology replaced by %v", v)
	}
	if len(info) != 1 {
		t.Errorf("the caller's slice changed: %v", info)
	}
}
