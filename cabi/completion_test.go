package cabi

import (
	"net"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// TestCompletionsBatched sends testdata/lost.c's default handler a burst
// of invocations in one invoke-batch frame, from a fake agent that records
// the frames the library writes back: the handlers run back to back, so
// their completions come in one invoke-done-batch frame, in the order the
// handlers ran, with their status and no prior results (docs/cabi.md,
// "Completions go back in batches").
func TestCompletionsBatched(t *testing.T) {
	const burst = 5
	var frames []*proto.Frame
	invoked, done := false, 0
	out := runAgainst(t, "lost.c", func(conn net.Conn, w *proto.Writer, f *proto.Frame) bool {
		switch {
		case f.Type == proto.TypeHello:
			writeHello(w, f)
		case f.Type == proto.TypeRegister:
			_ = w.WriteFrame(&proto.Frame{Type: proto.TypeReply, Seq: f.Seq, ID: 7})
			inv := make([]proto.Invoke, burst)
			for i := range inv {
				inv[i] = proto.Invoke{Seq: uint64(100 + i), ID: 7, Name: "h", Code: pmix.Status(-3000 - i)}
			}
			_ = w.WriteFrame(&proto.Frame{Type: proto.TypeInvokeBatch, Invokes: inv})
			invoked = true
		case invoked:
			frames = append(frames, f)
			if done += len(f.Dones); f.Type == proto.TypeInvokeDone {
				done++
			}
			if done >= burst {
				return false // closing: the library raises -61 and ends
			}
		}
		return w.Flush() == nil
	})
	want := "init 0\nregistered 1\nevent -3000\nevent -3001\nevent -3002\nevent -3003\nevent -3004\nevent -61\nfence -61\nfinalize 0\n"
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
	if len(frames) != 1 || frames[0].Type != proto.TypeInvokeDoneBatch {
		types := make([]string, len(frames))
		for i, f := range frames {
			types[i] = f.Type.String()
		}
		t.Fatalf("the completions came in %d frames (%v), want one invoke-done-batch", len(frames), types)
	}
	var seqs []uint64
	for _, d := range frames[0].Dones {
		seqs = append(seqs, d.Seq)
		if d.Status != pmix.Success || len(d.Results) != 0 || d.HasPrior {
			t.Errorf("completion %d: status %v, %d results, prior %v; want success, none, none", d.Seq, d.Status, len(d.Results), d.HasPrior)
		}
	}
	if want := []uint64{100, 101, 102, 103, 104}; !slices.Equal(seqs, want) {
		t.Errorf("completions %v, want %v", seqs, want)
	}
}

// TestNotifySent runs testdata/notifysent.c against a fake agent that
// answers a notify only when its range is SESSION, with an error: a
// blocking notify of range RM, LOCAL, NAMESPACE or GLOBAL returns once
// sent, as OpenPMIx's does, while a SESSION one waits for the answer and
// returns it; every event reaches the agent, in order (docs/cabi.md,
// PMIx_Notify_event).
func TestNotifySent(t *testing.T) {
	var ranges []pmix.Range
	out := runAgainst(t, "notifysent.c", func(conn net.Conn, w *proto.Writer, f *proto.Frame) bool {
		switch f.Type {
		case proto.TypeHello:
			writeHello(w, f)
		case proto.TypeNotify:
			ranges = append(ranges, f.Range)
			if f.Range == pmix.RangeSession {
				_ = w.WriteFrame(&proto.Frame{Type: proto.TypeReply, Seq: f.Seq, Status: pmix.ErrBadParam})
			}
		case proto.TypeFinalize:
			_ = w.WriteFrame(&proto.Frame{Type: proto.TypeReply, Seq: f.Seq})
		}
		return w.Flush() == nil
	})
	want := "init 0\nnotify 1 0\nnotify 2 0\nnotify 3 0\nnotify 5 0\nnotify 4 -27\nfinalize 0\n"
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
	if want := []pmix.Range{pmix.RangeRM, pmix.RangeLocal, pmix.RangeNamespace, pmix.RangeGlobal, pmix.RangeSession}; !slices.Equal(ranges, want) {
		t.Errorf("the agent read notifies of ranges %v, want %v", ranges, want)
	}
}

// runAgainst runs the testdata program src, attached to a fake agent that
// hands each frame it reads to serve (serveOne), and returns its output
// once the agent's side has ended too: what serve recorded can be read.
func runAgainst(t *testing.T, src string, serve func(conn net.Conn, w *proto.Writer, f *proto.Frame) bool) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		serveOne(l, serve)
	}()
	bin := compile(t, src, headers(t)[0], true)
	out := run(t, testContext(t), bin, map[string]string{
		"PMIX_NAMESPACE": "fake", "PMIX_RANK": "0",
		"PMIXBUS_AGENT": "unix:" + sock, "PMIXBUS_CREDENTIAL": "x",
	})
	l.Close() // serve never accepted: the process did not attach
	<-served
	return out
}

// writeHello answers a hello as an agent of protocol version 2 in
// cluster A.
func writeHello(w *proto.Writer, f *proto.Frame) {
	_ = w.WriteFrame(&proto.Frame{Type: proto.TypeReply, Seq: f.Seq, Version: 2,
		Info: []pmix.Info{pmix.NewInfo(pmix.KeyClusterID, pmix.String("A"))}})
}
