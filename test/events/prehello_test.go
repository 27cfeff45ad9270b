package events

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// Before hello a peer is nobody: what it sends must not cost the agent more
// than a hello's worth of memory, however it lies about lengths and however
// many connections it opens.

// loneAgent starts one agent on its own NATS server, adjusted by tweak.
func loneAgent(t *testing.T, tweak func(*agent.Config)) *agent.Agent {
	t.Helper()
	s := clustertest.StartServer(t, "A")
	cfg := agent.DefaultConfig("A", "n1")
	cfg.URL = s.ClientURL()
	cfg.Listen = "unix:" + filepath.Join(e2e.ShortDir(t), "n1.sock")
	cfg.Logger = clustertest.Logger(t)
	if tweak != nil {
		tweak(&cfg)
	}
	return e2e.RunAgent(t, cfg)
}

// liveHeap is the heap of the test process, agent included, once garbage
// is collected.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// rss is the process's resident set as /proc reports it, for the log.
func rss() string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:"))
		}
	}
	return "unknown"
}

// TestPreHelloLyingFramesKeepNoMemory: 15-byte frames whose str32 header
// claims 4 GiB, each on a new connection before hello, get an error frame
// and a disconnect, and leave the agent's heap where it was.
func TestPreHelloLyingFramesKeepNoMemory(t *testing.T) {
	a := loneAgent(t, nil)
	body := []byte{0x82, 0xa1, 't', 0x01, 0xa2, 'z', 'z', 0xdb, 0xff, 0xff, 0xff, 0xff}
	frame := lengthPrefixed(uint32(len(body)), body)
	const conns = 250
	base := liveHeap()
	t.Logf("before: live heap %d MiB, RSS %s", base>>20, rss())
	for i := range conns {
		r := e2e.DialRaw(t, a)
		if _, err := r.C.Write(frame); err != nil {
			t.Fatal(err)
		}
		if f := r.Recv(); f.Type != proto.TypeError || f.Status != pmix.ErrUnpackFailure {
			t.Fatalf("frame %d: got %v %v %q, want an unpack failure", i, f.Type, f.Status, f.Message)
		}
		r.ClosedByAgent()
		_ = r.C.Close()
		if i%25 == 24 {
			if grown := liveHeap() - base; grown > 16<<20 {
				t.Fatalf("after %d frames of %d bytes the live heap grew by %d MiB (RSS %s)", i+1, len(frame), grown>>20, rss())
			}
		}
	}
	t.Logf("after %d frames: live heap grew by %d KiB, RSS %s", conns, (liveHeap()-base)>>10, rss())
}

// TestPreHelloLengthsBeyondAHello: a connection that sends only a 4-byte
// length larger than a hello is told so and dropped at once; 200 of them
// cost the agent next to nothing.
func TestPreHelloLengthsBeyondAHello(t *testing.T) {
	a := loneAgent(t, nil)
	const conns = 200
	base := liveHeap()
	t.Logf("before: live heap %d MiB, RSS %s", base>>20, rss())
	raws := make([]*e2e.Raw, conns)
	for i := range raws {
		raws[i] = e2e.DialRaw(t, a)
		if _, err := raws[i].C.Write(lengthPrefixed(proto.DefaultMaxFrame-1, nil)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("while held: live heap grew by %d KiB, RSS %s", (liveHeap()-base)>>10, rss())
	for i, r := range raws {
		if f := r.Recv(); f.Type != proto.TypeError || f.Status != proto.ErrFrameTooLarge {
			t.Fatalf("connection %d: got %v %v %q, want a frame-too-large error", i, f.Type, f.Status, f.Message)
		}
		r.ClosedByAgent()
	}
	grown := liveHeap() - base
	t.Logf("after %d connections: live heap grew by %d KiB, RSS %s", conns, grown>>10, rss())
	if grown > 16<<20 {
		t.Fatalf("%d connections that sent only a length grew the live heap by %d MiB", conns, grown>>20)
	}
}

// TestPendingHelloLimit: connections beyond MaxPendingHello are told so and
// closed at once; a slot frees when a waiting connection leaves, and a
// client attaches then. Shutdown does not wait for silent connections.
func TestPendingHelloLimit(t *testing.T) {
	const limit = 8
	a := loneAgent(t, func(c *agent.Config) { c.MaxPendingHello = limit })
	silent := make([]*e2e.Raw, limit)
	for i := range silent {
		silent[i] = e2e.DialRaw(t, a)
	}
	extra := e2e.DialRaw(t, a) // accepted after the silent ones
	if f := extra.Recv(); f.Type != proto.TypeError || f.Status != pmix.ErrOutOfResource {
		t.Fatalf("connection %d: got %v %v %q, want an out-of-resource error", limit+1, f.Type, f.Status, f.Message)
	}
	extra.ClosedByAgent()

	if err := a.RegisterJob(t.Context(), agent.Job{Nspace: "job", Procs: map[pmix.Rank]string{0: "n1"}}); err != nil {
		t.Fatal(err)
	}
	env, err := a.RegisterClient(t.Context(), pmix.Proc{Nspace: "job", Rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	_ = silent[0].C.Close()
	// Until the agent has seen silent[0] go, a new connection is still
	// refused, and may be closed before its hello is written: try again.
	clustertest.WaitFor(t, e2e.WaitTime, func() error {
		r := e2e.DialRaw(t, a)
		defer r.C.Close()
		rank, _ := strconv.Atoi(env[agent.EnvRank])
		if err := proto.WriteFrame(r.C, &proto.Frame{Type: proto.TypeHello, Seq: 1, Version: proto.Version, Nspace: env[agent.EnvNspace], Rank: pmix.Rank(rank), Credential: env[agent.EnvCredential]}); err != nil {
			return fmt.Errorf("sending hello: %w", err)
		}
		_ = r.C.SetReadDeadline(time.Now().Add(e2e.WaitTime))
		f, err := proto.ReadFrame(r.C, proto.DefaultMaxFrame)
		if err != nil {
			return fmt.Errorf("reading the hello's answer: %w", err)
		}
		if f.Type != proto.TypeReply || f.Status != pmix.Success {
			return fmt.Errorf("hello answered %v %v %q", f.Type, f.Status, f.Message)
		}
		return nil
	})

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with %d silent connections: %v", limit-1, err)
	}
}
