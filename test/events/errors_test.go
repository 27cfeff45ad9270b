package events

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/collective"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/nodefence"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
	"github.com/pmixbus/pmixbus/publishlookup"
	"github.com/pmixbus/pmixbus/security"
)

// sentinels are the exported Err* variables of every package's errors.go,
// by "package.Name". TestSentinelsDistinct checks that the list is
// complete.
var sentinels = map[string]error{
	"agent.ErrInvalidConfig":              agent.ErrInvalidConfig,
	"agent.ErrUnknownJob":                 agent.ErrUnknownJob,
	"agent.ErrUnknownClient":              agent.ErrUnknownClient,
	"agent.ErrClientRegistered":           agent.ErrClientRegistered,
	"agent.ErrClosed":                     agent.ErrClosed,
	"agent.ErrAlreadyAttached":            agent.ErrAlreadyAttached,
	"bus.ErrClosed":                       bus.ErrClosed,
	"client.ErrInvalidOption":             client.ErrInvalidOption,
	"client.ErrAlreadyAttached":           client.ErrAlreadyAttached,
	"client.ErrLostConnection":            client.ErrLostConnection,
	"cluster.ErrInvalidID":                cluster.ErrInvalidID,
	"cluster.ErrInvalidConfig":            cluster.ErrInvalidConfig,
	"cluster.ErrNotReady":                 cluster.ErrNotReady,
	"cluster.ErrRunning":                  cluster.ErrRunning,
	"cluster.ErrNotRunning":               cluster.ErrNotRunning,
	"cluster.ErrClosed":                   cluster.ErrClosed,
	"cluster.ErrStoreInUse":               cluster.ErrStoreInUse,
	"cluster.ErrNoTop":                    cluster.ErrNoTop,
	"collective.ErrInvalidConfig":         collective.ErrInvalidConfig,
	"collective.ErrNotParticipant":        collective.ErrNotParticipant,
	"collective.ErrTimeout":               collective.ErrTimeout,
	"collective.ErrFinished":              collective.ErrFinished,
	"collective.ErrNotFound":              collective.ErrNotFound,
	"collective.ErrClosed":                collective.ErrClosed,
	"collective.ErrParticipantTerminated": collective.ErrParticipantTerminated,
	"collective.ErrPeerTerminated":        collective.ErrPeerTerminated,
	"iof.ErrClosed":                       iof.ErrClosed,
	"iof.ErrNoJob":                        iof.ErrNoJob,
	"launch.ErrNspaceTaken":               launch.ErrNspaceTaken,
	"launch.ErrVersion":                   launch.ErrVersion,
	"launch.ErrNoProgram":                 launch.ErrNoProgram,
	"launch.ErrStart":                     launch.ErrStart,
	"launch.ErrPlacement":                 launch.ErrPlacement,
	"launch.ErrUnknownJob":                launch.ErrUnknownJob,
	"launch.ErrClosed":                    launch.ErrClosed,
	"launch.ErrNoAgent":                   launch.ErrNoAgent,
	"launch.ErrNoStdin":                   launch.ErrNoStdin,
	"launch.ErrStdinFull":                 launch.ErrStdinFull,
	"nodefence.ErrBroken":                 nodefence.ErrBroken,
	"jetstream.ErrKeyExists":              jetstream.ErrKeyExists,
	"jetstream.ErrRevisionMismatch":       jetstream.ErrRevisionMismatch,
	"jetstream.ErrUnreachable":            jetstream.ErrUnreachable,
	"jetstream.ErrInvalidKey":             jetstream.ErrInvalidKey,
	"jetstream.ErrInvalidKVConfig":        jetstream.ErrInvalidKVConfig,
	"jetstream.ErrInvalidCacheConfig":     jetstream.ErrInvalidCacheConfig,
	"jetstream.ErrWatchEnded":             jetstream.ErrWatchEnded,
	"jetstream.ErrKVClosed":               jetstream.ErrKVClosed,
	"proto.ErrAlreadyAttached":            proto.ErrAlreadyAttached,
	"publishlookup.ErrInvalidConfig":      publishlookup.ErrInvalidConfig,
	"publishlookup.ErrDuplicate":          publishlookup.ErrDuplicate,
	"publishlookup.ErrNotFound":           publishlookup.ErrNotFound,
	"publishlookup.ErrPartial":            publishlookup.ErrPartial,
	"publishlookup.ErrNoPermissions":      publishlookup.ErrNoPermissions,
	"publishlookup.ErrTimeout":            publishlookup.ErrTimeout,
	"publishlookup.ErrClosed":             publishlookup.ErrClosed,
	"security.ErrNoKey":                   security.ErrNoKey,
	"security.ErrKeyFile":                 security.ErrKeyFile,
	"security.ErrJobClaimed":              security.ErrJobClaimed,
}

// reexported are sentinels that are another package's under a second name:
// the same error, not a second one.
var reexported = map[string]string{
	"agent.ErrAlreadyAttached":  "proto.ErrAlreadyAttached",
	"client.ErrAlreadyAttached": "proto.ErrAlreadyAttached",
	"nodefence.ErrBroken":       "collective.ErrParticipantTerminated",
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
	files, err := filepath.Glob("../../*/errors.go")
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

// refusals counts the agent's "client refused" warnings, passing records
// on to the test log at its level.
type refusals struct {
	slog.Handler
	n *atomic.Int64
}

func (h refusals) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.Handler.Enabled(ctx, l)
}

func (h refusals) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "client refused" {
		h.n.Add(1)
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h refusals) WithAttrs(as []slog.Attr) slog.Handler {
	return refusals{h.Handler.WithAttrs(as), h.n}
}

func (h refusals) WithGroup(g string) slog.Handler { return refusals{h.Handler.WithGroup(g), h.n} }

// soloAgent starts one agent on a server of its own, with a job "j" of
// ranks 0 and 1 on its node, and counts the clients it refuses. GLOBAL
// data stays in the cluster's domain unless mod says otherwise.
func soloAgent(t *testing.T, mod func(*agent.Config)) (*agent.Agent, *atomic.Int64) {
	t.Helper()
	srv := clustertest.StartServer(t, "A")
	dir := e2e.ShortDir(t)
	cfg := agent.DefaultConfig("A", "n1")
	cfg.URL = srv.ClientURL()
	cfg.Listen = "unix:" + filepath.Join(dir, "n1.sock")
	cfg.GlobalDomain = ""
	if mod != nil {
		mod(&cfg)
	}
	n := &atomic.Int64{}
	var base slog.Handler = slog.DiscardHandler
	if l := clustertest.Logger(t); l != nil {
		base = l.Handler()
	}
	cfg.Logger = slog.New(refusals{base, n})
	a := e2e.RunAgent(t, cfg)
	if err := a.RegisterJob(t.Context(), agent.Job{Nspace: "j", Session: "s1", Procs: map[pmix.Rank]string{0: "n1", 1: "n1"}}); err != nil {
		t.Fatal(err)
	}
	return a, n
}

func initClient(t *testing.T, env map[string]string) *client.Client {
	t.Helper()
	c, err := client.Init(t.Context(), client.WithEnv(env))
	if err != nil {
		t.Fatalf("init: %v", err)
	}
	t.Cleanup(func() { _ = c.Finalize(context.Background()) })
	return c
}

// TestSecondAttachRefusedAtOnce: a second process attaching with an
// identity already attached is refused at once with ErrAlreadyAttached,
// which a client tells apart from other errors of the status without
// knowing the agent; the agent says so once. When the holder's Finalize
// returns, the identity is free.
func TestSecondAttachRefusedAtOnce(t *testing.T) {
	a, refused := soloAgent(t, nil)
	env, err := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "j", Rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	first := initClient(t, env)

	ctx, cancel := context.WithTimeout(t.Context(), e2e.WaitTime)
	defer cancel()
	start := time.Now()
	_, err = client.Init(ctx, client.WithEnv(env))
	if took := time.Since(start); took > e2e.WaitTime/2 {
		t.Errorf("the refusal took %v", took)
	}
	switch {
	case !errors.Is(err, agent.ErrAlreadyAttached), !errors.Is(err, client.ErrAlreadyAttached),
		!errors.Is(err, pmix.ErrInvalidOperation):
		t.Fatalf("second attach: %v, want ErrAlreadyAttached", err)
	case errors.Is(err, agent.ErrClosed), errors.Is(err, publishlookup.ErrClosed):
		t.Fatalf("second attach: %v matches other sentinels of its status", err)
	}
	if want := "client already attached: j.0 (PMIX_ERR_INVALID_OPERATION)"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if n := refused.Load(); n != 1 {
		t.Errorf("the agent logged %d refusals, want 1", n)
	}

	// The identity is free when Finalize returns: no retry needed.
	if err := first.Finalize(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		c, err := client.Init(t.Context(), client.WithEnv(env))
		if err != nil {
			t.Fatalf("attach %d right after a finalize: %v", i, err)
		}
		if err := c.Finalize(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestErrorsReachTheClient: the errors a client gets from the agent keep
// the identity of the sentinel behind them and print their status once,
// without package prefixes; user input is not echoed at length; and a key
// or name too long for a NATS subject is refused before anything is sent,
// so the agent's connection survives it.
func TestErrorsReachTheClient(t *testing.T) {
	a, _ := soloAgent(t, nil)
	env0, _ := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "j", Rank: 0})
	env1, _ := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "j", Rank: 1})
	c0, c1 := initClient(t, env0), initClient(t, env1)

	checkText := func(what string, err error) {
		t.Helper()
		text := err.Error()
		if n := strings.Count(text, "("+pmix.StatusOf(err).String()+")"); n != 1 {
			t.Errorf("%s: %q names its status %d times", what, text, n)
		}
		for _, prefix := range []string{"publishlookup: ", "jetstream: ", "agent: ", "bus: "} {
			if strings.Contains(text, prefix) {
				t.Errorf("%s: %q has the package prefix %q", what, text, prefix)
			}
		}
		if len(text) > 300 {
			t.Errorf("%s: a message of %d bytes: %.100q…", what, len(text), text)
		}
	}

	_, err := c0.Lookup(t.Context(), []string{"absent"}, nil)
	if !errors.Is(err, publishlookup.ErrNotFound) || !errors.Is(err, pmix.ErrNotFound) || errors.Is(err, agent.ErrUnknownClient) {
		t.Errorf("lookup of an absent key: %v", err)
	}
	checkText("not found", err)

	if err := c0.Publish(t.Context(), []pmix.Info{e2e.Str("k", "v")}); err != nil {
		t.Fatal(err)
	}
	err = c1.Publish(t.Context(), []pmix.Info{e2e.Str("k", "w")})
	if !errors.Is(err, publishlookup.ErrDuplicate) || !errors.Is(err, pmix.ErrDuplicateKey) || errors.Is(err, jetstream.ErrKeyExists) {
		t.Errorf("duplicate publish: %v", err)
	}
	checkText("duplicate", err)

	long := strings.Repeat("k", 3000)
	err = c0.Publish(t.Context(), []pmix.Info{e2e.Str(long, "v")})
	if !errors.Is(err, pmix.ErrBadParam) || !strings.Contains(err.Error(), "key too long: 3000 bytes, at most 511") {
		t.Errorf("publish of a long key: %v", err)
	}
	checkText("long key", err)
	_, err = c0.Lookup(t.Context(), []string{long}, nil)
	if !errors.Is(err, pmix.ErrBadParam) || !strings.Contains(err.Error(), "key too long") {
		t.Errorf("lookup of a long key: %v", err)
	}

	// Names made into subjects: a client's CUSTOM target, the host's
	// NAMESPACE target.
	longProc := pmix.Proc{Nspace: strings.Repeat("n", 3000), Rank: 0}
	err = c0.NotifyEvent(t.Context(), 1, pmix.RangeCustom, []pmix.Info{pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{longProc}))})
	if !errors.Is(err, pmix.ErrBadParam) || !strings.Contains(err.Error(), "nspace too long: 3000 bytes, at most 255") {
		t.Errorf("notify to a long nspace: %v", err)
	}
	checkText("long nspace", err)
	_, err = a.Notify(t.Context(), 1, pmix.RangeNamespace, false, []pmix.Info{e2e.Str(pmix.KeyNspace, longProc.Nspace)})
	if !errors.Is(err, pmix.ErrBadParam) || !strings.Contains(err.Error(), "nspace too long") {
		t.Errorf("host notify to a long nspace: %v", err)
	}
	if err := a.RegisterJob(t.Context(), agent.Job{Nspace: "j2", Session: longProc.Nspace}); !errors.Is(err, pmix.ErrBadParam) {
		t.Errorf("job with a long session: %v", err)
	}
	if err := a.NATS().FlushTimeout(e2e.WaitTime); err != nil || !a.NATS().IsConnected() {
		t.Fatalf("the agent's NATS connection: %v (last error %v)", err, a.NATS().LastError())
	}
	if err := c1.NotifyEvent(t.Context(), 1, pmix.RangeNamespace, nil); err != nil {
		t.Errorf("notify after the refusals: %v", err)
	}

	// GLOBAL data in a hub domain that does not answer: the error keeps
	// the bucket's sentinel and says PMIX_ERR_UNREACH once.
	cut, _ := soloAgent(t, func(c *agent.Config) { c.GlobalDomain = "hub" })
	env, _ := cut.RegisterClient(t.Context(), pmix.Proc{Nspace: "j", Rank: 0})
	_, err = initClient(t, env).Lookup(t.Context(), []string{"k"}, []pmix.Info{e2e.Rng(pmix.RangeGlobal)})
	if !errors.Is(err, jetstream.ErrUnreachable) || !errors.Is(err, pmix.ErrUnreach) {
		t.Errorf("lookup in an unreachable domain: %v", err)
	}
	checkText("unreachable", err)
}
