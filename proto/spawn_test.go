package proto

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

func TestSpawnFrameRoundTrip(t *testing.T) {
	in := &Frame{Type: TypeSpawn, Seq: 3, Info: []pmix.Info{pmix.NewInfo(pmix.KeyMapBy, pmix.String("node"))}, Apps: []App{
		{Cmd: "./a", Argv: []string{"./a", "x"}, Env: []string{"A=1"}, Cwd: "/tmp", MaxProcs: 2, Info: []pmix.Info{pmix.NewInfo(pmix.KeyHost, pmix.String("n1:2"))}},
		{Cmd: "b", MaxProcs: 1},
	}}
	var buf bytes.Buffer
	if err := WriteFrame(&buf, in); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFrame(&buf, DefaultMaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	if got.Type != TypeSpawn || got.Seq != 3 || !pmix.InfosEqual(got.Info, in.Info) || len(got.Apps) != 2 {
		t.Fatalf("round trip: %+v", got)
	}
	for i, a := range in.Apps {
		g := got.Apps[i]
		if g.Cmd != a.Cmd || !slices.Equal(g.Argv, a.Argv) || !slices.Equal(g.Env, a.Env) || g.Cwd != a.Cwd || g.MaxProcs != a.MaxProcs || !pmix.InfosEqual(g.Info, a.Info) {
			t.Fatalf("app %d: in %+v out %+v", i, a, g)
		}
	}
	if TypeSpawn.String() != "spawn" {
		t.Fatalf("name %q", TypeSpawn.String())
	}
}

func TestSpawnFrameMalformed(t *testing.T) {
	good, err := (&Frame{Type: TypeSpawn, Apps: []App{{Cmd: "a", MaxProcs: 1}}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// Every truncation and a wrong element count fail as unpack errors.
	for n := range len(good) {
		if _, err := Unmarshal(good[:n]); err == nil {
			t.Fatalf("truncated at %d of %d: decoded", n, len(good))
		}
	}
	short := bytes.Replace(good, []byte{0x96}, []byte{0x95}, 1) // the app's array of 6 → 5
	if _, err := Unmarshal(short); !errors.Is(err, pmix.ErrUnpackFailure) {
		t.Fatalf("an app of 5 elements: %v", err)
	}
}
