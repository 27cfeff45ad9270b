package main

import (
	"strings"
	"testing"
)

// TestSingleton runs a program with no agent in its environment: PMIx_Init
// returns PMIX_ERR_UNREACH and initialises a singleton, as OpenPMIx does
// and as MPI libraries expect; calls needing the agent return UNREACH; a
// stubbed function returns PMIX_ERR_NOT_SUPPORTED rather than crashing;
// the C data helpers behave as 4.2.2's macros expect.
func TestSingleton(t *testing.T) {
	for _, h := range headers(t) {
		t.Run(h.name, func(t *testing.T) {
			bin := compile(t, "singleton.c", h, true)
			got := lines(run(t, t.Context(), bin, nil))
			want := map[string]string{
				"init": "-25", "rank": "0", "publish": "-25", "register": "0", "deregister": "0",
				"get": "-47", "finalize": "0",
				"error_string": "UNREACHABLE", "range_string": "AVAIL TO PROCESSES IN SAME ALLOCATION ONLY",
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if !strings.HasPrefix(got["nspace"], "singleton.") {
				t.Errorf("nspace = %q, want singleton.<host>.<pid>", got["nspace"])
			}
		})
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
