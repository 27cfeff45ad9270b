package liveness

import (
	"encoding/json"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

func TestParseRecord(t *testing.T) {
	good := Record{Cluster: "A", Node: "n1", Slots: 4, Jobs: []HostedJob{{Nspace: "sim", Ranks: []pmix.Rank{0, 3}}}}
	b, _ := json.Marshal(good)
	r, err := parseRecord(b)
	if err != nil || r.Node != "n1" || len(r.Jobs) != 1 || r.Jobs[0].Ranks[1] != 3 {
		t.Fatalf("parseRecord(good) = %+v, %v", r, err)
	}
	for _, bad := range []string{
		``, `[]`, `{"node":""}`, `{"cluster":"A"}`,
		`{"node":"n1","jobs":[{"nspace":"","ranks":[0]}]}`,
		`{"node":"n1","jobs":[{"nspace":"sim","ranks":[4294967295]}]}`, // PMIX_RANK_UNDEF
		`{"node":"n1","jobs":[{"nspace":"sim","ranks":[-1]}]}`,
	} {
		if _, err := parseRecord([]byte(bad)); err == nil {
			t.Errorf("parseRecord(%s): no error", bad)
		}
	}
}

// FuzzParseRecord: any bytes in a key's value (every agent of a cluster
// may write the bucket) give a record or an error, never a panic, and a
// record names a node and only valid ranks.
func FuzzParseRecord(f *testing.F) {
	f.Add([]byte(`{"node":"n1","jobs":[{"nspace":"sim","ranks":[0,1]}]}`))
	f.Add([]byte(`{"node":"n1","slots":-3,"ttl_ms":1e30}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRecord(b)
		if err != nil {
			return
		}
		if r.Node == "" {
			t.Fatal("a record without a node")
		}
		for _, j := range r.Jobs {
			for _, rk := range j.Ranks {
				if !rk.Valid() {
					t.Fatalf("rank %v accepted", rk)
				}
			}
		}
	})
}

// The watch role's permissions name the agents bucket's stream.
func TestWatchRoleReadsTheAgentsBucket(t *testing.T) {
	if "KV_"+Bucket != security.AgentsStream {
		t.Fatalf("the agents bucket's stream is KV_%s, the watch role may read %s", Bucket, security.AgentsStream)
	}
}
