package cluster_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/cluster"
)

func TestParseID(t *testing.T) {
	tests := []struct {
		in      string
		wantErr string // substring of the error; "" means valid
	}{
		{in: "A"},
		{in: "cluster-1_east"},
		{in: strings.Repeat("x", cluster.MaxIDLength)},
		{in: "", wantErr: "empty"},
		{in: strings.Repeat("x", cluster.MaxIDLength+1), wantErr: "at most 64"},
		{in: "a:b", wantErr: "contains ':' at byte 1"},
		{in: ":", wantErr: "contains ':' at byte 0"},
		{in: "a.b", wantErr: `contains '.' at byte 1`},
		{in: "a*", wantErr: `contains '*'`},
		{in: "a>", wantErr: `contains '>'`},
		{in: "a b", wantErr: `contains ' '`},
		{in: "é", wantErr: `at byte 0`},
		{in: "tab\t", wantErr: `'\t' at byte 3`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			id, err := cluster.ParseID(tt.in)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ParseID(%q) = %v, want valid", tt.in, err)
				}
				if string(id) != tt.in {
					t.Fatalf("ParseID(%q) = %q", tt.in, id)
				}
				return
			}
			if !errors.Is(err, cluster.ErrInvalidID) {
				t.Fatalf("ParseID(%q) error = %v, want ErrInvalidID", tt.in, err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseID(%q) error = %q, want it to say %q", tt.in, err, tt.wantErr)
			}
			if id != "" {
				t.Fatalf("ParseID(%q) returned id %q with an error", tt.in, id)
			}
		})
	}
}

func TestQualifySplit(t *testing.T) {
	tests := []struct {
		name      string
		id        cluster.ID
		nspace    string
		qualified bool
	}{
		{name: "job1", nspace: "job1"},
		{name: "", nspace: ""},
		{name: "A:job1", id: "A", nspace: "job1", qualified: true},
		{name: "A:", id: "A", nspace: "", qualified: true},
		// An nspace may contain ':'; the name splits at its first ':'.
		{name: "A:job:1", id: "A", nspace: "job:1", qualified: true},
		{name: "A:B:job", id: "A", nspace: "B:job", qualified: true},
		{name: "A::", id: "A", nspace: ":", qualified: true},
		// Split is lexical: the id it returns may be invalid.
		{name: ":job", id: "", nspace: "job", qualified: true},
		{name: "a.b:job", id: "a.b", nspace: "job", qualified: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, ns, q := cluster.Split(tt.name)
			if id != tt.id || ns != tt.nspace || q != tt.qualified {
				t.Fatalf("Split(%q) = %q, %q, %v; want %q, %q, %v", tt.name, id, ns, q, tt.id, tt.nspace, tt.qualified)
			}
			if tt.qualified {
				if got := cluster.Qualify(id, ns); got != tt.name {
					t.Fatalf("Qualify(Split(%q)) = %q", tt.name, got)
				}
			}
		})
	}
}

func TestLocal(t *testing.T) {
	tests := []struct {
		id     cluster.ID
		name   string
		nspace string
		ok     bool
	}{
		{id: "A", name: "job", nspace: "job", ok: true},
		{id: "A", name: "A:job", nspace: "job", ok: true},
		{id: "A", name: "A:B:job", nspace: "B:job", ok: true},
		{id: "A", name: "B:job", ok: false},
		{id: "A", name: "AA:job", ok: false},
		{id: "A", name: ":job", ok: false},
	}
	for _, tt := range tests {
		t.Run(string(tt.id)+"/"+tt.name, func(t *testing.T) {
			ns, ok := tt.id.Local(tt.name)
			if ns != tt.nspace || ok != tt.ok {
				t.Fatalf("%q.Local(%q) = %q, %v; want %q, %v", tt.id, tt.name, ns, ok, tt.nspace, tt.ok)
			}
		})
	}
}

// FuzzSplit checks that any name either has no ':' and splits unqualified
// into itself, or splits into an id without ':' that Qualify joins back into
// the same name.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"", "job", "A:job", "A:job:1", ":", "::", ":x", "x:", "é:ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		id, ns, q := cluster.Split(name)
		if !q {
			if strings.Contains(name, ":") || id != "" || ns != name {
				t.Fatalf("Split(%q) = %q, %q, unqualified", name, id, ns)
			}
			return
		}
		if strings.Contains(string(id), ":") {
			t.Fatalf("Split(%q) gave id %q containing ':'", name, id)
		}
		if got := cluster.Qualify(id, ns); got != name {
			t.Fatalf("Qualify(Split(%q)) = %q", name, got)
		}
	})
}

// FuzzQualify checks that a valid id and any nspace round-trip through
// Qualify and Split, and that an id Validate accepts has no ':'.
func FuzzQualify(f *testing.F) {
	f.Add("A", "job")
	f.Add("A", "job:1")
	f.Add("A", "")
	f.Add("A:B", "job")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, rawID, nspace string) {
		id := cluster.ID(rawID)
		if err := id.Validate(); err != nil {
			if !errors.Is(err, cluster.ErrInvalidID) {
				t.Fatalf("Validate(%q) = %v, not ErrInvalidID", rawID, err)
			}
			return
		}
		if strings.Contains(rawID, ":") {
			t.Fatalf("Validate accepted %q", rawID)
		}
		gotID, gotNS, q := cluster.Split(cluster.Qualify(id, nspace))
		if gotID != id || gotNS != nspace || !q {
			t.Fatalf("Split(Qualify(%q, %q)) = %q, %q, %v", id, nspace, gotID, gotNS, q)
		}
		if ns, ok := id.Local(cluster.Qualify(id, nspace)); !ok || ns != nspace {
			t.Fatalf("%q.Local(Qualify) = %q, %v", id, ns, ok)
		}
	})
}
