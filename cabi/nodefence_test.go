package cabi

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/nodefence"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// nodeJob is a world of one agent, n1, and a job of n ranks all on it,
// registered without attaching: its fences may take the node's barrier.
func nodeJob(nspace string, n int) agenttest.Spec {
	nodes := make([]string, n)
	for i := range nodes {
		nodes[i] = "n1"
	}
	return agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A", Nodes: []string{"n1"}}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: nspace, Nodes: nodes, Detached: true}},
	}
}

// TestNodeFenceLoop runs testdata/nodefence.c as four ranks of one node
// fencing 300 times in the barrier's three forms, with a fence with data
// (the agent's path) halfway and a PMIx_Fence_nb (the agent arrives for
// it) at the end: every fence succeeds, and each rank mapped the
// segment.
func TestNodeFenceLoop(t *testing.T) {
	forEachHeader(t, "nodefence.c", nodeJob("nf", 4), func(t *testing.T, bin string, w *agenttest.World) {
		fenceLoops(t, bin, w, "nf", 4, 300)
	})
}

// fenceLoops runs testdata/nodefence.c's loop of n fences as ranks 0 to
// count-1 of nspace: each maps the segment and every fence succeeds.
func fenceLoops(t *testing.T, bin string, w *agenttest.World, nspace string, count, n int) {
	ctx := testContext(t)
	var ranks []*started
	for r := range count {
		ranks = append(ranks, start(t, ctx, bin, w.Env(fmt.Sprintf("A:%s.%d", nspace, r)), "init 0", "loop", fmt.Sprint(n)))
	}
	for r, s := range ranks {
		out := s.wait(t)
		if !strings.Contains(out, "mapped 1\n") || !strings.Contains(out, "fences 0\n") || !strings.Contains(out, "finalize 0\n") {
			t.Errorf("rank %d:\n%s", r, out)
		}
	}
}

// twoNodeJob is a world of two agents, n1 and n2, and a job of four
// ranks, two on each: each node's ranks share a partial barrier.
func twoNodeJob(nspace string) agenttest.Spec {
	return agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A", Nodes: []string{"n1", "n2"}}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: nspace, Nodes: []string{"n1", "n1", "n2", "n2"}, Detached: true}},
	}
}

// TestNodeFencePartial: four C ranks on two nodes fence in a loop as in
// TestNodeFenceLoop: each node's last arrival has its agent run the
// job's fence across agents for the node's two ranks.
func TestNodeFencePartial(t *testing.T) {
	forEachHeader(t, "nodefence.c", twoNodeJob("part"), func(t *testing.T, bin string, w *agenttest.World) {
		fenceLoops(t, bin, w, "part", 4, 90)
	})
}

// TestNodeFencePartialRankKilled: ranks 0 and 1 (node n1) and 2 (n2)
// wait for rank 3 (n2), which is killed: every survivor's fence fails
// with PMIX_ERR_PROC_TERM_WO_SYNC — on n1, through the job's fence that
// n1's agent ran for its ranks — and so does its next one.
func TestNodeFencePartialRankKilled(t *testing.T) {
	forEachHeader(t, "nodefence.c", twoNodeJob("pk"), func(t *testing.T, bin string, w *agenttest.World) {
		killWhileWaiting(t, bin, w, "pk", 4)
	})
}

// killWhileWaiting starts the last of count ranks of nspace idle, the
// others fencing, kills it once they wait, and checks that each one's
// fence, and its next one, fail with PMIX_ERR_PROC_TERM_WO_SYNC.
func killWhileWaiting(t *testing.T, bin string, w *agenttest.World, nspace string, count int) {
	ctx := testContext(t)
	victim := start(t, ctx, bin, w.Env(fmt.Sprintf("A:%s.%d", nspace, count-1)), "ready", "idle")
	var waiting []*started
	for r := range count - 1 {
		waiting = append(waiting, start(t, ctx, bin, w.Env(fmt.Sprintf("A:%s.%d", nspace, r)), "ready", "wait"))
	}
	waitingInFutex(t, waiting...)
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for r, s := range waiting {
		out := s.wait(t)
		if !strings.Contains(out, "fence -200\n") || !strings.Contains(out, "after -200\n") {
			t.Errorf("rank %d:\n%s", r, out)
		}
	}
}

// TestNodeFenceMixed: two C ranks and a Go client rank (which maps
// nothing: the agent arrives for it) of one job fence together, in the
// same forms, the Go client with a context deadline (a timeout it marks
// as its own, which keeps its fences on the barrier).
func TestNodeFenceMixed(t *testing.T) {
	forEachHeader(t, "nodefence.c", nodeJob("mix", 3), func(t *testing.T, bin string, w *agenttest.World) {
		ctx := testContext(t)
		const n = 120
		var ranks []*started
		for r := range 2 {
			ranks = append(ranks, start(t, ctx, bin, w.Env(fmt.Sprintf("A:mix.%d", r)), "init 0", "loop", fmt.Sprint(n)))
		}
		c, err := client.Init(ctx, client.WithEnv(w.Env("A:mix.2")))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Finalize(ctx) }()
		wild := []pmix.Proc{{Nspace: "mix", Rank: pmix.RankWildcard}}
		for i := range n {
			if i == n/2 {
				if err := c.Fence(ctx, nil, []pmix.Info{pmix.NewInfo(pmix.KeyCollectData, pmix.Bool(true))}); err != nil {
					t.Fatalf("Go rank, fence with data: %v", err)
				}
			}
			var err error
			switch i % 3 {
			case 0:
				err = c.Fence(ctx, nil, nil)
			case 1:
				err = c.Fence(ctx, wild, nil)
			default:
				err = c.Fence(ctx, nil, []pmix.Info{pmix.NewInfo(pmix.KeyCollectData, pmix.Bool(false))})
			}
			if err != nil {
				t.Fatalf("Go rank, fence %d: %v", i, err)
			}
		}
		if err := c.Fence(ctx, nil, nil); err != nil { // the C ranks' PMIx_Fence_nb
			t.Fatalf("Go rank, last fence: %v", err)
		}
		for r, s := range ranks {
			out := s.wait(t)
			if !strings.Contains(out, "mapped 1\n") || !strings.Contains(out, "fences 0\n") {
				t.Errorf("rank %d:\n%s", r, out)
			}
		}
	})
}

// waitingInFutex waits, for a while, until each process's main thread
// sleeps in a futex: in the barrier, most likely (best effort: the
// results asserted hold whether it arrived yet or not).
func waitingInFutex(t *testing.T, ranks ...*started) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, s := range ranks {
		pid := s.cmd.Process.Pid
		for time.Now().Before(deadline) {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/wchan", pid, pid))
			if err != nil || strings.Contains(string(b), "futex") {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestNodeFenceRankKilled: two ranks wait at the barrier for a third,
// which is killed: both get PMIX_ERR_PROC_TERM_WO_SYNC (-200), what the
// agent's path answers when a participant terminates before it arrived,
// and their next fence, on the agent's path, gets it again.
func TestNodeFenceRankKilled(t *testing.T) {
	forEachHeader(t, "nodefence.c", nodeJob("kill", 3), func(t *testing.T, bin string, w *agenttest.World) {
		killWhileWaiting(t, bin, w, "kill", 3)
	})
}

// TestNodeFenceAgentGone: two ranks wait at the barrier for a third that
// never comes, and the agent shuts down: both get
// PMIX_ERR_LOST_CONNECTION (-61), as a fence waiting for the agent's
// reply does; their next fence takes the agent's path.
func TestNodeFenceAgentGone(t *testing.T) {
	forEachHeader(t, "nodefence.c", nodeJob("gone", 3), func(t *testing.T, bin string, w *agenttest.World) {
		ctx := testContext(t)
		a := start(t, ctx, bin, w.Env("A:gone.0"), "ready", "wait")
		b := start(t, ctx, bin, w.Env("A:gone.1"), "ready", "wait")
		waitingInFutex(t, a, b)
		if err := w.Agent("n1").Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		for r, s := range []*started{a, b} {
			out := s.wait(t)
			// The next fence takes the agent's path and fails: lost, or
			// refused by an agent shutting down (-158, -103), by timing.
			if !strings.Contains(out, "fence -61\n") || !strings.Contains(out, "after -") {
				t.Errorf("rank %d:\n%s", r, out)
			}
		}
	})
}

// TestNodeFenceHostileSegment hands testdata/nodefence.c, from a fake
// agent, segments that fail one check each: the library does not map
// them and its fence goes to the agent, which answers it. A good segment
// (one rank) is mapped and fenced on without the agent.
func TestNodeFenceHostileSegment(t *testing.T) {
	le := binary.NativeEndian
	good := func(b []byte) {
		le.PutUint32(b[nodefence.OffMagic:], nodefence.Magic)
		le.PutUint32(b[nodefence.OffVersion:], nodefence.Version)
		le.PutUint32(b[nodefence.OffN:], 1)
		le.PutUint32(b[nodefence.OffSize:], nodefence.Size)
	}
	cases := []struct {
		name   string
		size   int
		seal   bool
		garble func(b []byte)
		mapped bool
	}{
		{"good", nodefence.Size, true, nil, true},
		{"bad magic", nodefence.Size, true, func(b []byte) { b[0] ^= 0xff }, false},
		{"bad version", nodefence.Size, true, func(b []byte) { le.PutUint32(b[nodefence.OffVersion:], 99) }, false},
		{"more ranks than the job", nodefence.Size, true, func(b []byte) { le.PutUint32(b[nodefence.OffN:], 2) }, false},
		{"no ranks", nodefence.Size, true, func(b []byte) { le.PutUint32(b[nodefence.OffN:], 0) }, false},
		{"size field", nodefence.Size, true, func(b []byte) { le.PutUint32(b[nodefence.OffSize:], 1<<30) }, false},
		{"short", 64, true, nil, false},
		{"not sealed", nodefence.Size, false, nil, false},
		{"partial, of the whole job", nodefence.Size, true, func(b []byte) { le.PutUint32(b[nodefence.OffFlags:], nodefence.FlagPartial) }, false},
		{"unknown flags", nodefence.Size, true, func(b []byte) { le.PutUint32(b[nodefence.OffFlags:], 6) }, false},
	}
	bin := compile(t, "nodefence.c", headers(t)[0], true)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fd := segmentFD(t, tc.size, tc.seal, func(b []byte) {
				good(b)
				if tc.garble != nil {
					tc.garble(b)
				}
			})
			sock := filepath.Join(agenttest.SocketDir(t), "agent.sock")
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			fences := make(chan int, 1)
			go fenceAgent(l, fd, fences)
			out := run(t, testContext(t), bin, map[string]string{
				"PMIX_NAMESPACE": "hostile", "PMIX_RANK": "0",
				"PMIXBUS_AGENT": "unix:" + sock, "PMIXBUS_CREDENTIAL": "x",
			}, "one")
			want := fmt.Sprintf("init 0\nfence 0\nmapped %d\nfinalize 0\n", map[bool]int{false: 0, true: 1}[tc.mapped])
			if out != want {
				t.Errorf("output:\n%s\nwant:\n%s", out, want)
			}
			if n := <-fences; (n == 0) != tc.mapped {
				t.Errorf("the agent got %d fences; the segment mapped: %v", n, tc.mapped)
			}
		})
	}
}

// segmentFD is a memfd of size bytes, filled by fill, sealed against
// shrinking if seal.
func segmentFD(t *testing.T, size int, seal bool, fill func([]byte)) int {
	t.Helper()
	fd, err := unix.MemfdCreate("pmixbus-fence", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Skipf("no memfd: %v", err)
	}
	t.Cleanup(func() { _ = unix.Close(fd) })
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, max(size, nodefence.Size))
	fill(b)
	if _, err := unix.Pwrite(fd, b[:size], 0); err != nil {
		t.Fatal(err)
	}
	if seal {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
			t.Fatal(err)
		}
	}
	return fd
}

// fenceAgent serves one client as an agent of a one-rank job would,
// passing fd with the hello's reply; it answers fences and finalize, and
// sends the number of fences it got on fences when the client leaves.
func fenceAgent(l net.Listener, fd int, fences chan<- int) {
	n := 0
	defer func() { fences <- n }()
	serveOne(l, func(conn net.Conn, w *proto.Writer, f *proto.Frame) bool {
		reply := &proto.Frame{Type: proto.TypeReply, Seq: f.Seq}
		switch f.Type {
		case proto.TypeHello:
			reply.Version = 2
			reply.Info = []pmix.Info{pmix.NewInfo(pmix.KeyClusterID, pmix.String("A")),
				pmix.NewInfo(pmix.KeyJobSize, pmix.Uint32(1)), pmix.NewInfo(pmix.KeyLocalSize, pmix.Uint32(1))}
			out, err := proto.AppendFrame(nil, reply)
			if err != nil {
				return false
			}
			_, _, err = conn.(*net.UnixConn).WriteMsgUnix(out, unix.UnixRights(fd), nil)
			return err == nil
		case proto.TypeFence:
			n++
		case proto.TypeFinalize:
		default:
			reply.Status = pmix.ErrNotSupported
		}
		return w.WriteFrame(reply) == nil && w.Flush() == nil
	})
}
