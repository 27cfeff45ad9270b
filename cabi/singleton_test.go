package cabi

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSingleton runs a program with no agent in its environment: PMIx_Init
// returns PMIX_ERR_UNREACH and initialises a singleton, as OpenPMIx does
// and as MPI libraries expect; calls needing the agent return UNREACH
// (PMIx_Abort too, and returns, as OpenPMIx's does when not connected); Get answers a
// singleton's job-level keys and what it put, and its Fence succeeds; a
// stubbed function returns PMIX_ERR_NOT_SUPPORTED rather than crashing;
// the C data helpers behave as 4.2.2's macros expect.
func TestSingleton(t *testing.T) {
	for _, h := range headers(t) {
		t.Run(h.name, func(t *testing.T) {
			bin := compile(t, "singleton.c", h, true)
			got := lines(run(t, t.Context(), bin, nil))
			want := map[string]string{
				"init": "-25", "rank": "0", "publish": "-25", "register": "0", "deregister": "0",
				"get": "0", "job_size": "PMIX_UINT32 1", "fence": "0", "get_unknown": "-46", "connect": "-25", "abort": "-25",
				"stub": "-47", "finalize": "0", "pmixbus": "1",
				"error_string": "UNREACHABLE", "range_string": "AVAIL TO PROCESSES IN SAME ALLOCATION ONLY",
			}
			checkLines(t, got, want)
			if !strings.HasPrefix(got["nspace"], "singleton.") {
				t.Errorf("nspace = %q, want singleton.<host>.<pid>", got["nspace"])
			}
		})
	}
}

// TestUnmodifiedBinary builds a program as a user of Debian's libpmix-dev
// would — its headers, linked against its library with a RUNPATH, as
// pkg-config's flags give — and runs it with pmixbus's library first on
// LD_LIBRARY_PATH: the binary loads pmixbus's library unrebuilt.
func TestUnmodifiedBinary(t *testing.T) {
	bin := compileAsOpenPMIxUser(t, "singleton.c")
	got := lines(run(t, t.Context(), bin, nil))
	if got["pmixbus"] != "1" || got["init"] != "-25" || got["stub"] != "-47" {
		t.Errorf("the binary did not run on pmixbus's library: %v", got)
	}
}

// lines parses "name value" lines.
func lines(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, " ")
		m[k] = v
	}
	return m
}

// checkLines reports each of want's names whose value in got differs.
func checkLines(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// TestHelpers runs testdata/helpers.c: the helper functions of 4.2.3+
// headers (argv, setenv, multicluster names, procs, values, info flags,
// info lists).
func TestHelpers(t *testing.T) {
	bin := compile(t, "helpers.c", headers(t)[0], true)
	if out := run(t, t.Context(), bin, nil); out != "ok\n" {
		t.Errorf("output:\n%s", out)
	}
}

// TestHelpersSanitized builds testdata/helpers.c with the library's C
// sources directly (no Go) under AddressSanitizer and UBSan, leak checks
// on: the data helpers neither overrun, misuse nor leak memory. It skips
// where the compiler has no sanitizer runtime.
func TestHelpersSanitized(t *testing.T) {
	cc := needCC(t)
	bin := filepath.Join(t.TempDir(), "helpers-asan")
	args := []string{"-std=gnu11", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
		"-fno-omit-frame-pointer", "-I", "include", "testdata/helpers.c", "src/values.c", "src/helpers.c", "src/objects.c", "-o", bin}
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Skipf("%s cannot build with sanitizers here: %v\n%s", cc, err, b)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(cmdEnv(t, nil), "ASAN_OPTIONS=detect_leaks=1")
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "ok\n" {
		t.Errorf("%v:\n%s", err, out)
	}
}
