package launch

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

func TestParseSpawn(t *testing.T) {
	parent := pmix.Proc{Nspace: "job", Rank: 2}
	hf := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hf, []byte("n1 slots=2\nn2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	str := func(k, v string) pmix.Info { return pmix.NewInfo(k, pmix.String(v)) }
	req, err := ParseSpawn(parent, []pmix.Info{str(pmix.KeyMapBy, "node:OVERSUBSCRIBE"), str(pmix.KeyWdir, "/w"), pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(5))}, []SpawnApp{
		{Cmd: "./a", Argv: []string{"./a", "x", "y"}, Env: []string{"A=1", "B=x=y"}, MaxProcs: 2, Info: []pmix.Info{str(pmix.KeyHost, "n1:2,n2")}},
		{Cmd: "b", MaxProcs: 1, Dir: "/d", Info: []pmix.Info{str(pmix.KeyHostfile, hf), str(pmix.KeySpawnCluster, "west"), pmix.NewInfo(pmix.KeyNoOver, pmix.Bool(true))}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, b := req.Apps[0], req.Apps[1]
	if req.Parent != parent || req.Timeout != 5000 || len(req.Apps) != 2 {
		t.Fatalf("request %+v", req)
	}
	if a.N != 2 || a.MapBy != MapByNode || !a.Oversubscribe || a.App.Path != "./a" || !slices.Equal(a.App.Args, []string{"x", "y"}) ||
		a.App.Env["A"] != "1" || a.App.Env["B"] != "x=y" || a.App.Dir != "/w" || len(a.Hosts) != 2 || a.Hosts[0] != (Node{Name: "n1", Slots: 2}) || a.Cluster != "" {
		t.Errorf("app 0 %+v", a)
	}
	if b.N != 1 || b.App.Dir != "/d" || b.Cluster != "west" || b.Oversubscribe || !b.NoOversubscribe || len(b.Hosts) != 2 || b.Hosts[0].Slots != 2 || b.App.Args != nil {
		t.Errorf("app 1 %+v", b)
	}
	for _, tt := range []struct {
		name string
		info []pmix.Info
		apps []SpawnApp
	}{
		{"no app", nil, nil},
		{"no command", nil, []SpawnApp{{MaxProcs: 1}}},
		{"no ranks", nil, []SpawnApp{{Cmd: "a"}}},
		{"too many ranks", nil, []SpawnApp{{Cmd: "a", MaxProcs: MaxSpawnRanks}, {Cmd: "b", MaxProcs: 1}}},
		{"bad env", nil, []SpawnApp{{Cmd: "a", MaxProcs: 1, Env: []string{"NOEQUALS"}}}},
		{"host not a string", []pmix.Info{pmix.NewInfo(pmix.KeyHost, pmix.Int32(1))}, []SpawnApp{{Cmd: "a", MaxProcs: 1}}},
		{"bad host", []pmix.Info{str(pmix.KeyHost, "n1:x")}, []SpawnApp{{Cmd: "a", MaxProcs: 1}}},
		{"missing hostfile", []pmix.Info{str(pmix.KeyHostfile, "/nonexistent")}, []SpawnApp{{Cmd: "a", MaxProcs: 1}}},
		{"bad policy", nil, []SpawnApp{{Cmd: "a", MaxProcs: 1, Info: []pmix.Info{str(pmix.KeyMapBy, "ppr:2:node")}}}},
		{"bad cluster", []pmix.Info{str(pmix.KeySpawnCluster, "a.b")}, []SpawnApp{{Cmd: "a", MaxProcs: 1}}},
		{"negative timeout", []pmix.Info{pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(-1))}, []SpawnApp{{Cmd: "a", MaxProcs: 1}}},
	} {
		if _, err := ParseSpawn(parent, tt.info, tt.apps); !errors.Is(err, pmix.ErrBadParam) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestSpawnedJobs(t *testing.T) {
	var s SpawnedJobs
	for i := range maxSpawnedJobs + 1 {
		s.Add(string(rune('a'+i%26))+string(rune(i)), []pmix.Info{pmix.NewInfo(pmix.KeyJobSize, pmix.Uint32(uint32(i)))})
	}
	if _, ok := s.Info("a\x00"); ok {
		t.Error("the oldest is kept past the bound")
	}
	if info, ok := s.Info(string(rune('a'+maxSpawnedJobs%26)) + string(rune(maxSpawnedJobs))); !ok || len(info) != 1 {
		t.Errorf("the newest: %v %v", info, ok)
	}
}
