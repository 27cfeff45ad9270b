package jobs

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/security"
)

// storeState is what a cluster's streams hold: messages and bytes by
// stream.
type storeState map[string][2]uint64

func readStores(t *testing.T, js natsjs.JetStream) storeState {
	t.Helper()
	out := storeState{}
	names := js.StreamNames(t.Context())
	for n := range names.Name() {
		s, err := js.Stream(t.Context(), n)
		if err != nil {
			t.Fatalf("stream %s: %v", n, err)
		}
		st := s.CachedInfo().State
		out[n] = [2]uint64{st.Msgs, st.Bytes}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// heapAfterGC is the Go heap in use after a collection: the agents' and
// the NATS servers' together (they run in this process).
func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// rssKB is this process's resident set, from /proc (0 where there is none).
func rssKB() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for l := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseUint(strings.Fields(rest)[0], 10, 64)
			return n
		}
	}
	return 0
}

// TestRunLoopLeavesNothing (PMIXBUS_SOAK=1; PMIXBUS_SOAK_RUNS=n for
// another count than 2000) runs a small job again and again — two ranks
// over two agents, a fence and a line of output each — as a long-lived
// DVM serves its users (issue 30, item 4), and checks that finished jobs
// leave nothing that grows: no client still registered with the agents,
// every stream but the jobs bucket as large at the end as halfway (the
// jobs bucket keeps a purge marker per job for a minute: bounded by the
// runs of the last minute), the heap of the agents and servers no more
// than a quarter larger (the stores' buffers and the duplicate windows
// fill for the first minutes).
func TestRunLoopLeavesNothing(t *testing.T) {
	if !e2e.Soak() {
		t.Skip("a soak: PMIXBUS_SOAK=1 runs it (2000 runs, about 15 minutes)")
	}
	runs := 2000
	if n, err := strconv.Atoi(os.Getenv("PMIXBUS_SOAK_RUNS")); err == nil && n >= 4 {
		runs = n
	}
	spec := e2e.LaunchSpec
	spec.Clusters = []agenttest.Cluster{{ID: "A", Nodes: []string{"a1", "a2"}}}
	spec.Agent = func(c *agent.Config) {
		e2e.LaunchSpec.Agent(c)
		// Output stays viewable for a day by default (bounded by
		// OutputStreamBytes); ten seconds here, so that the loop reaches
		// the steady state the age bound keeps.
		c.OutputMaxAge = 10 * time.Second
	}
	w := agenttest.Start(t, spec)
	nc := e2e.LauncherConn(t, w, "A")
	// The streams are read with the agent's key: the launcher's may read
	// only its own.
	agentJS, err := natsjs.NewWithDomain(clustertest.Connect(t, w.URL("A"), w.Keys().Option(security.RoleAgent)), cluster.ID("A").Domain())
	if err != nil {
		t.Fatal(err)
	}
	p := e2e.Prog(t)
	type sample struct {
		run    int
		at     time.Time
		stores storeState
		heap   uint64
		rss    uint64
	}
	var samples []sample
	var starts []time.Time
	profiles := os.Getenv("PMIXBUS_SOAK_PROFILES") // a directory: heap profiles at each sample
	take := func(run int) {
		samples = append(samples, sample{run: run, at: time.Now(), stores: readStores(t, agentJS), heap: heapAfterGC(), rss: rssKB()})
		s := samples[len(samples)-1]
		t.Logf("after %d runs: heap %d KiB, RSS %d KiB, stores %v", run, s.heap>>10, s.rss, s.stores)
		if profiles != "" {
			f, err := os.Create(filepath.Join(profiles, fmt.Sprintf("heap-%d.pprof", run)))
			if err == nil {
				err = pprof.WriteHeapProfile(f)
				f.Close()
			}
			if err != nil {
				t.Errorf("heap profile: %v", err)
			}
		}
	}
	for i := range runs {
		starts = append(starts, time.Now())
		res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Jobs: []launch.JobSpec{{N: 2, App: launch.App{Path: p, Args: []string{"-fence", "-say", "hello"}}}}})
		if res.ExitCode != 0 {
			t.Fatalf("run %d: %+v\n%s", i, res, out)
		}
		if i+1 == runs/10 || i+1 == runs/2 || i+1 == runs {
			take(i + 1)
		}
	}
	for _, n := range []string{"a1", "a2"} {
		if st := w.Agent(n).Stats(); st.ClientsRegistered != 0 || st.Connections != 0 {
			t.Errorf("agent %s after the runs: %d clients registered, %d connections; want none", n, st.ClientsRegistered, st.Connections)
		}
	}
	mid, end := samples[1], samples[2]
	// runsWithin counts the runs started within d before s was taken.
	runsWithin := func(s sample, d time.Duration) int {
		n := 0
		for _, st := range starts {
			if st.Before(s.at) && s.at.Sub(st) < d {
				n++
			}
		}
		return n
	}
	for name, e := range end.stores {
		m := mid.stores[name]
		switch name {
		case "KV_" + launch.JobsBucket: // a purge marker per job, for a minute
			if n := runsWithin(end, 70*time.Second); e[0] > uint64(n)+8 {
				t.Errorf("%s holds %d messages after %d runs, %d of them in the last 70 s", name, e[0], runs, n)
			}
		case iof.StreamName, "KV_" + iof.LimitsBucket:
			// Kept for the output's age (10 s): as many per recent run
			// at the end as halfway (the loop's pace follows the machine's
			// load).
			per := func(s sample, v uint64) float64 { return float64(v) / float64(max(runsWithin(s, 12*time.Second), 1)) }
			if pe, pm := per(end, e[0]), per(mid, m[0]); pe > 1.5*pm+1 {
				t.Errorf("%s: %.1f messages per run of the last 12 s at the end, %.1f halfway", name, pe, pm)
			}
		default:
			if e[1] > m[1]+m[1]/10+64<<10 {
				t.Errorf("%s grew from %d messages, %d bytes after %d runs to %d, %d after %d", name, m[0], m[1], mid.run, e[0], e[1], end.run)
			}
		}
	}
	if end.heap > mid.heap+mid.heap/4+4<<20 {
		t.Errorf("heap in use grew from %d KiB after %d runs to %d KiB after %d", mid.heap>>10, mid.run, end.heap>>10, end.run)
	}
	fmt.Fprintf(os.Stderr, "soak: %d runs in %v; heap %d -> %d -> %d KiB, RSS %d -> %d -> %d KiB\n", runs, end.at.Sub(starts[0]).Round(time.Second),
		samples[0].heap>>10, mid.heap>>10, end.heap>>10, samples[0].rss, mid.rss, end.rss)
}
