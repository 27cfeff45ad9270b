package pmix_test

import (
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

func TestKeyLevels(t *testing.T) {
	for _, tc := range []struct {
		key                 string
		reserved, procLevel bool
	}{
		{pmix.KeyRank, true, true},
		{pmix.KeyLocalRank, true, true},
		{pmix.KeyNodeRank, true, true},
		{pmix.KeyHostname, true, false},
		{pmix.KeyJobSize, true, false},
		{pmix.KeyCollectiveID, false, false}, // pmixbus's own
		{"my.port", false, false},
		{"pmix", false, false},
	} {
		if got := pmix.Reserved(tc.key); got != tc.reserved {
			t.Errorf("Reserved(%q) = %v", tc.key, got)
		}
		if got := pmix.ProcLevel(tc.key); got != tc.procLevel {
			t.Errorf("ProcLevel(%q) = %v", tc.key, got)
		}
	}
}
