package test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
	"github.com/pmixbus/pmixbus/publishlookup"
)

// sentinels are the exported Err* variables of every package's errors.go,
// by "package.Name". TestSentinelsDistinct checks that the list is
// complete.
var sentinels = map[string]error{
	"agent.ErrInvalidConfig":          agent.ErrInvalidConfig,
	"agent.ErrUnknownJob":             agent.ErrUnknownJob,
	"agent.ErrUnknownClient":          agent.ErrUnknownClient,
	"agent.ErrClientRegistered":       agent.ErrClientRegistered,
	"agent.ErrClosed":                 agent.ErrClosed,
	"agent.ErrAlreadyAttached":        agent.ErrAlreadyAttached,
	"bus.ErrClosed":                   bus.ErrClosed,
	"client.ErrInvalidOption":         client.ErrInvalidOption,
	"client.ErrAlreadyAttached":       client.ErrAlreadyAttached,
	"client.ErrLostConnection":        client.ErrLostConnection,
	"cluster.ErrInvalidID":            cluster.ErrInvalidID,
	"cluster.ErrInvalidConfig":        cluster.ErrInvalidConfig,
	"cluster.ErrNotReady":             cluster.ErrNotReady,
	"cluster.ErrRunning":              cluster.ErrRunning,
	"cluster.ErrClosed":               cluster.ErrClosed,
	"cluster.ErrStoreInUse":           cluster.ErrStoreInUse,
	"jetstream.ErrKeyExists":          jetstream.ErrKeyExists,
	"jetstream.ErrRevisionMismatch":   jetstream.ErrRevisionMismatch,
	"jetstream.ErrUnreachable":        jetstream.ErrUnreachable,
	"jetstream.ErrInvalidKey":         jetstream.ErrInvalidKey,
	"jetstream.ErrInvalidKVConfig":    jetstream.ErrInvalidKVConfig,
	"jetstream.ErrInvalidCacheConfig": jetstream.ErrInvalidCacheConfig,
	"jetstream.ErrWatchEnded":         jetstream.ErrWatchEnded,
	"jetstream.ErrKVClosed":           jetstream.ErrKVClosed,
	"proto.ErrAlreadyAttached":        proto.ErrAlreadyAttached,
	"publishlookup.ErrInvalidConfig":  publishlookup.ErrInvalidConfig,
	"publishlookup.ErrDuplicate":      publishlookup.ErrDuplicate,
	"publishlookup.ErrNotFound":       publishlookup.ErrNotFound,
	"publishlookup.ErrPartial":        publishlookup.ErrPartial,
	"publishlookup.ErrNoPermissions":  publishlookup.ErrNoPermissions,
	"publishlookup.ErrTimeout":        publishlookup.ErrTimeout,
	"publishlookup.ErrClosed":         publishlookup.ErrClosed,
}

// reexported are sentinels that are another package's under a second name:
// the same error, not a second one.
var reexported = map[string]string{
	"agent.ErrAlreadyAttached":  "proto.ErrAlreadyAttached",
	"client.ErrAlreadyAttached": "proto.ErrAlreadyAttached",
}

// TestSentinelsDistinct: no two sentinels of the project match each other
// under errors.Is, also when wrapped and after crossing the wire (a proto
// frame, or pmix's msgpack form of an error), while each still matches
// itself and its PMIx status.
func TestSentinelsDistinct(t *testing.T) {
	checkSentinelList(t)
	wire := map[string]func(error) error{
		"local": func(err error) error { return err },
		"proto frame": func(err error) error {
			f := &proto.Frame{Type: proto.TypeReply, Seq: 1}
			f.SetErr(err)
			b, merr := f.Marshal()
			if merr != nil {
				t.Fatal(merr)
			}
			back, uerr := proto.Unmarshal(b)
			if uerr != nil {
				t.Fatal(uerr)
			}
			return back.Err()
		},
		"pmix msgpack": func(err error) error {
			b, merr := msgpack.Marshal(&pmix.Error{Status: pmix.StatusOf(err), Code: pmix.CodeOf(err), Message: pmix.MessageOf(err)})
			if merr != nil {
				t.Fatal(merr)
			}
			var back pmix.Error
			if uerr := msgpack.Unmarshal(b, &back); uerr != nil {
				t.Fatal(uerr)
			}
			return &back
		},
	}
	codes := map[string]string{}
	for name, s := range sentinels {
		var pe *pmix.Error
		if !errors.As(s, &pe) {
			continue
		}
		if pe.Code == "" {
			t.Errorf("%s has no code", name)
		}
		if other, ok := codes[pe.Code]; ok && !sameSentinel(name, other) {
			t.Errorf("%s and %s share the code %q", name, other, pe.Code)
		}
		codes[pe.Code] = name
		if strings.Contains(pe.Message, ": ") {
			t.Errorf("%s: message %q has a package prefix", name, pe.Message)
		}
	}
	for how, cross := range wire {
		t.Run(how, func(t *testing.T) {
			for name, s := range sentinels {
				if _, ok := s.(*pmix.Error); !ok && how != "local" {
					continue // plain errors of cluster never cross the wire
				}
				got := cross(fmt.Errorf("%w: some detail", s))
				if !errors.Is(got, s) {
					t.Errorf("%s: %v does not match its sentinel", name, got)
				}
				if st := pmix.StatusOf(s); st != pmix.ErrGeneral && !errors.Is(got, st) {
					t.Errorf("%s: %v does not match its status %v", name, got, st)
				}
				if n := strings.Count(got.Error(), "(PMIX_"); n > 1 {
					t.Errorf("%s: %q names a status %d times", name, got, n)
				}
				for other, o := range sentinels {
					if other != name && !sameSentinel(name, other) && errors.Is(got, o) {
						t.Errorf("errors.Is(%s, %s) holds", name, other)
					}
				}
			}
		})
	}
}

func sameSentinel(a, b string) bool {
	ra, rb := a, b
	if r, ok := reexported[a]; ok {
		ra = r
	}
	if r, ok := reexported[b]; ok {
		rb = r
	}
	return ra == rb
}

// checkSentinelList fails for an exported Err* variable of a package's
// errors.go that sentinels does not list, so a new sentinel cannot escape
// TestSentinelsDistinct.
func checkSentinelList(t *testing.T) {
	t.Helper()
	files, err := filepath.Glob("../*/errors.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, path := range files {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if !n.IsExported() || !strings.HasPrefix(n.Name, "Err") {
						continue
					}
					seen++
					if _, ok := sentinels[f.Name.Name+"."+n.Name]; !ok {
						t.Errorf("%s: %s.%s is missing from the sentinels of this test", path, f.Name.Name, n.Name)
					}
				}
			}
		}
	}
	if seen != len(sentinels) {
		t.Errorf("errors.go files define %d sentinels, the test lists %d", seen, len(sentinels))
	}
}
