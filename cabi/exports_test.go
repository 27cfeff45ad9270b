package cabi

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExports checks that the library defines every PMIx_* function that
// Debian's OpenPMIx 4.2.2 libpmix.so.2 exports (testdata's list, taken
// from `nm -D --defined-only`), so that a consumer that binds them all at
// load time, as Open MPI's components do, loads; and the helper functions
// that the macros of 4.2.3+ headers call (testdata/helpers-4.2.3.txt; the
// statistics structures of later versions excepted); and nothing else:
// the Go and cgo symbols stay inside.
func TestExports(t *testing.T) {
	nm, err := exec.LookPath("nm")
	if err != nil {
		t.Skipf("no nm: %v", err)
	}
	out, err := exec.Command(nm, "-D", "--defined-only", filepath.Join(libDir(t), "libpmix.so.2")).Output()
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[1] == "T" {
			defined[f[2]] = true
		}
	}
	for _, list := range []string{"testdata/libpmix-4.2.2-exports.txt", "testdata/helpers-4.2.3.txt"} {
		want, err := os.ReadFile(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, sym := range strings.Fields(string(want)) {
			if !defined[sym] {
				t.Errorf("libpmix.so.2 does not define %s (%s)", sym, list)
			}
		}
	}
	for sym := range defined {
		if !strings.HasPrefix(sym, "PMIx_") {
			t.Errorf("libpmix.so.2 exports %s: only PMIx_* should be (libpmix.map)", sym)
		}
	}
	soname, err := exec.Command("readelf", "-d", filepath.Join(libDir(t), "libpmix.so.2")).Output()
	if err == nil && !strings.Contains(string(soname), "[libpmix.so.2]") {
		t.Errorf("SONAME is not libpmix.so.2:\n%s", soname)
	}
}

// openMPIPlugin is Debian's Open MPI 4.1 PMIx component, which imports 48
// PMIx_* functions, client and server ones, with immediate binding.
const openMPIPlugin = "/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_pmix_ext3x.so"

// TestOpenMPIPlugin opens Open MPI's PMIx component with RTLD_NOW against
// this library, where Debian's libopenmpi3 is installed: every symbol it
// binds at load time is here, so Open MPI can load it.
func TestOpenMPIPlugin(t *testing.T) {
	if _, err := os.Stat(openMPIPlugin); err != nil {
		t.Skipf("Debian's libopenmpi3 is not installed (%s)", openMPIPlugin)
	}
	bin := compile(t, "dlopen.c", headers(t)[0], false)
	out := run(t, t.Context(), bin, map[string]string{
		"LD_LIBRARY_PATH": libDir(t) + ":" + filepath.Dir(filepath.Dir(openMPIPlugin)),
	}, "libopen-pal.so.40", openMPIPlugin)
	if out != "loaded\n" {
		t.Errorf("dlopen %s: %s", openMPIPlugin, out)
	}
}
