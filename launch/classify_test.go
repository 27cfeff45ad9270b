package launch

import (
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

func TestClassify(t *testing.T) {
	attached := ClientState{Attached: true}
	finalized := ClientState{Attached: true, Finalized: true}
	aborted := ClientState{Attached: true, Aborted: true, AbortStatus: 7, AbortMessage: "bye"}
	for _, tt := range []struct {
		name   string
		exit   Exit
		st     ClientState
		killed bool
		state  pmix.Status
		code   int
	}{
		{"normal", Exit{}, finalized, false, pmix.Success, 0},
		{"plain program", Exit{}, ClientState{}, false, pmix.Success, 0},
		{"no finalize", Exit{}, attached, false, pmix.ErrProcTermWOSync, 0},
		{"non-zero", Exit{Code: 3}, attached, false, pmix.ErrExitNonzeroTerm, 3},
		{"non-zero after finalize", Exit{Code: 3}, finalized, false, pmix.ErrExitNonzeroTerm, 3},
		{"signal", Exit{Code: -1, Signal: syscall.SIGKILL}, attached, false, pmix.ErrProcAbortedBySig, 137},
		{"abort", Exit{Code: -1, Signal: syscall.SIGKILL}, aborted, false, pmix.ErrProcRequestedAbort, 7},
		{"abort with status 0", Exit{}, ClientState{Aborted: true}, false, pmix.ErrProcRequestedAbort, 1},
		{"killed on request", Exit{Code: -1, Signal: syscall.SIGTERM}, attached, true, pmix.ErrProcKilledByCmd, 143},
		{"aborted, then killed on request", Exit{Code: -1, Signal: syscall.SIGTERM}, aborted, true, pmix.ErrProcRequestedAbort, 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			state, code, text := Classify(tt.exit, tt.st, tt.killed)
			if state != tt.state || code != tt.code || text == "" {
				t.Errorf("Classify = %v, %d, %q; want %v, %d", state, code, text, tt.state, tt.code)
			}
		})
	}
}

func TestPlace(t *testing.T) {
	nodes := []Node{{Name: "a", Slots: 2}, {Name: "b", Slots: 3, Used: 1}, {Name: "c", Slots: 1, Used: 1}}
	ranksOf := func(ps []Placement) string {
		var b strings.Builder
		for _, p := range ps {
			b.WriteString(p.Node)
		}
		return b.String()
	}
	for _, tt := range []struct {
		n      int
		policy string
		over   bool
		want   string
		err    string
	}{
		{4, MapBySlot, false, "aabb", ""},
		{3, MapByNode, false, "aba", ""},
		{4, MapByNode, false, "abab", ""},
		{5, MapBySlot, false, "", "5 ranks, 4 free slots (a 2 of 2 free, b 2 of 3 free, c 0 of 1 free)"},
		{6, MapBySlot, true, "aabbab", ""},
		{1, "round", false, "", "map-by"},
		{0, MapBySlot, false, "", "0 ranks"},
	} {
		got, err := Place(tt.n, nodes, tt.policy, tt.over)
		if tt.err != "" {
			if !errors.Is(err, ErrPlacement) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Place(%d, %s) error %v, want %q", tt.n, tt.policy, err, tt.err)
			}
			continue
		}
		if err != nil || ranksOf(got) != tt.want {
			t.Errorf("Place(%d, %s, %v) = %s, %v; want %s", tt.n, tt.policy, tt.over, ranksOf(got), err, tt.want)
		}
		for i, p := range got {
			if int(p.Rank) != i {
				t.Errorf("rank %d at %d", p.Rank, i)
			}
		}
	}
}

func TestParseHosts(t *testing.T) {
	got, err := ParseHosts("a:2, b,c:1")
	if err != nil || len(got) != 3 || got[0] != (Node{Name: "a", Slots: 2}) || got[1] != (Node{Name: "b", Slots: 1}) {
		t.Fatalf("ParseHosts = %v, %v", got, err)
	}
	for _, bad := range []string{"", "a:0", "a:x", ":2"} {
		if _, err := ParseHosts(bad); !errors.Is(err, ErrPlacement) {
			t.Errorf("ParseHosts(%q) = %v", bad, err)
		}
	}
	// mpirun counts a repeated host as one more slot.
	if got, err := ParseHosts("a,b,a:2"); err != nil || len(got) != 2 || got[0] != (Node{Name: "a", Slots: 3}) {
		t.Fatalf("repeated: %v, %v", got, err)
	}
}

func TestParseHostfile(t *testing.T) {
	got, err := ParseHostfile(strings.NewReader("# nodes\nn1 slots=4 max_slots=8\n\n  n2   # no slots: the agent's\nn3 cpu=2\nn1 slots=1\n"))
	want := []Node{{Name: "n1", Slots: 5}, {Name: "n2"}, {Name: "n3", Slots: 2}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParseHostfile = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "# only a comment\n", "n1 slots=0\n", "n1 slots\n", "n1 foo=2\n", "n1:2\n"} {
		if _, err := ParseHostfile(strings.NewReader(bad)); !errors.Is(err, ErrPlacement) {
			t.Errorf("ParseHostfile(%q) = %v", bad, err)
		}
	}
}

func TestSpawnRequestCheck(t *testing.T) {
	ok := SpawnRequest{Nspace: "j", Map: []Placement{{0, "a"}, {1, "b"}}, App: App{Path: "/bin/true"}}
	if err := ok.check(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*SpawnRequest){
		"no nspace":     func(r *SpawnRequest) { r.Nspace = "" },
		"empty map":     func(r *SpawnRequest) { r.Map = nil },
		"rank twice":    func(r *SpawnRequest) { r.Map = []Placement{{0, "a"}, {0, "b"}} },
		"rank too high": func(r *SpawnRequest) { r.Map = []Placement{{0, "a"}, {5, "b"}} },
		"no node":       func(r *SpawnRequest) { r.Map = []Placement{{0, ""}, {1, "b"}} },
		"no program":    func(r *SpawnRequest) { r.App.Path = "" },
		"bad env":       func(r *SpawnRequest) { r.App.Env = map[string]string{"A=B": "x"} },
		"relative dir":  func(r *SpawnRequest) { r.App.Dir = "tmp" },
		"wildcard rank": func(r *SpawnRequest) { r.Map = []Placement{{pmix.RankWildcard, "a"}} },
		"huge limit":    func(r *SpawnRequest) { r.Output.Limit = 2 << 30 },
		"neg limit":     func(r *SpawnRequest) { r.Output.Limit = -1 },
	} {
		r := ok
		r.Map = append([]Placement(nil), ok.Map...)
		mod(&r)
		if err := r.check(); !errors.Is(err, pmix.ErrBadParam) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzDecodeSpawnRequest(f *testing.F) {
	f.Add([]byte(`{"nspace":"j","map":[{"rank":0,"node":"a"}],"app":{"path":"/bin/true"}}`))
	f.Add([]byte(`{"map":[{"rank":4294967295,"node":""}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r SpawnRequest
		if decode(b, &r) == nil {
			_ = r.check()
		}
	})
}
