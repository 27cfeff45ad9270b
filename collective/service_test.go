package collective

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// world is a cluster "A" with one service per node on one NATS server,
// and one job whose ranks run on nodes.
type world struct {
	t     *testing.T
	nc    *nats.Conn
	svcs  map[string]*Service
	ranks map[pmix.Rank]string
}

func newWorld(t *testing.T, nodes []string, cfg func(*Config)) *world {
	t.Helper()
	srv := clustertest.StartServer(t, "A")
	w := &world{t: t, svcs: map[string]*Service{}, ranks: map[pmix.Rank]string{}}
	w.nc = clustertest.Connect(t, srv.ClientURL())
	for r, n := range nodes {
		w.ranks[pmix.Rank(r)] = n
	}
	jobs := func(ns string) map[pmix.Rank]string {
		if ns == "job" {
			return w.ranks
		}
		return nil
	}
	for _, n := range nodes {
		if w.svcs[n] != nil {
			continue
		}
		c := Config{Cluster: cluster.ID("A"), Node: n, Conn: clustertest.Connect(t, srv.ClientURL()), Jobs: jobs, Logger: clustertest.Logger(t)}
		if cfg != nil {
			cfg(&c)
		}
		s, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		if err := s.JobChanged(t.Context(), "job"); err != nil {
			t.Fatal(err)
		}
		w.svcs[n] = s
	}
	return w
}

func (w *world) svc(r pmix.Rank) *Service { return w.svcs[w.ranks[r]] }

// fence runs one Join per rank in ranks, concurrently, and returns each
// one's error.
func (w *world) fence(ranks []pmix.Rank, req Request) map[pmix.Rank]error {
	_, errs := w.join(ranks, req)
	return errs
}

// join runs one Join per rank in ranks, concurrently, and returns each
// one's result and error.
func (w *world) join(ranks []pmix.Rank, req Request) (map[pmix.Rank]Result, map[pmix.Rank]error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	res, errs := map[pmix.Rank]Result{}, map[pmix.Rank]error{}
	for _, r := range ranks {
		wg.Go(func() {
			rq := req
			rq.Self = pmix.Proc{Nspace: "job", Rank: r}
			got, err := w.svc(r).Join(w.t.Context(), rq)
			mu.Lock()
			res[r], errs[r] = got, err
			mu.Unlock()
		})
	}
	wg.Wait()
	return res, errs
}

var all = []pmix.Proc{{Nspace: "job", Rank: pmix.RankWildcard}}

func TestFenceCollectsData(t *testing.T) {
	w := newWorld(t, []string{"n1", "n1", "n2", "n2", "n3", "n3"}, nil)
	ranks := []pmix.Rank{0, 1, 2, 3, 4, 5}
	for _, r := range ranks {
		err := w.svc(r).Commit(pmix.Proc{Nspace: "job", Rank: r}, []proto.Put{
			{Scope: pmix.ScopeGlobal, Key: "g", Value: pmix.Uint32(uint32(r))},
			{Scope: pmix.ScopeLocal, Key: "l", Value: pmix.Uint32(uint32(r))},
			{Scope: pmix.ScopeRemote, Key: "r", Value: pmix.Uint32(uint32(r))},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for r, err := range w.fence(ranks, Request{Kind: KindFence, Procs: all, Collect: true, Timeout: 10 * time.Second}) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	me := pmix.Proc{Nspace: "job", Rank: 0} // on n1
	ctx := t.Context()
	immediate := []pmix.Info{pmix.NewInfo(pmix.KeyImmediate, pmix.Bool(true))}
	for _, tc := range []struct {
		peer pmix.Rank
		key  string
		ok   bool
		info []pmix.Info
	}{
		// A key committed with a scope outside the reader's is not
		// waited for.
		{4, "g", true, nil}, {4, "r", true, nil}, {4, "l", false, nil}, // another node
		{1, "g", true, nil}, {1, "l", true, nil}, {1, "r", false, nil}, // the same node
		// One never committed would be waited for (direct modex).
		{4, "nope", false, immediate},
		{1, "nope", false, immediate},
	} {
		v, err := w.svc(0).Get(ctx, me, pmix.Proc{Nspace: "job", Rank: tc.peer}, tc.key, tc.info)
		if tc.ok && (err != nil || !v.Equal(pmix.Uint32(uint32(tc.peer)))) {
			t.Errorf("get %s of rank %d: %v, %v", tc.key, tc.peer, v, err)
		}
		if !tc.ok && !errors.Is(err, pmix.ErrNotFound) {
			t.Errorf("get %s of rank %d: %v, %v; want PMIX_ERR_NOT_FOUND", tc.key, tc.peer, v, err)
		}
	}
	for _, peer := range []pmix.Rank{1, 4} {
		_, err := w.svc(0).Get(ctx, me, pmix.Proc{Nspace: "job", Rank: peer}, "nope", []pmix.Info{pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(1))})
		if !errors.Is(err, pmix.ErrTimeout) {
			t.Errorf("get of a key rank %d never commits, PMIX_TIMEOUT 1: %v, want PMIX_ERR_TIMEOUT", peer, err)
		}
	}
}

func TestFenceTimeoutNamesWhoIsMissing(t *testing.T) {
	w := newWorld(t, []string{"n1", "n2", "n3"}, func(c *Config) { c.Grace = 4 * time.Second })
	start := time.Now()
	errs := w.fence([]pmix.Rank{0, 1}, Request{Kind: KindFence, Procs: all, Timeout: time.Second})
	for r, err := range errs {
		if !errors.Is(err, pmix.ErrTimeout) || !errors.Is(err, ErrTimeout) {
			t.Fatalf("rank %d: %v, want the collective's PMIX_ERR_TIMEOUT", r, err)
		}
		if want := "job.{2} (1 of 3 ranks)"; !strings.Contains(err.Error(), want) {
			t.Errorf("rank %d: %v; want it to name %q", r, err, want)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v; the coordinator's release, not the grace, should end it", d)
	}
	// The one that never came is a latecomer now.
	_, err := w.svc(2).Join(t.Context(), Request{Kind: KindFence, Procs: all, Self: pmix.Proc{Nspace: "job", Rank: 2}, Timeout: time.Second})
	if !errors.Is(err, ErrFinished) {
		t.Fatalf("latecomer: %v, want ErrFinished", err)
	}
}

// TestConcurrentFencesToldApartByID: two fences of the same participants
// at once, told apart by their ids, each complete; and the same fence
// run twice in a row is two operations.
func TestConcurrentFencesToldApartByID(t *testing.T) {
	w := newWorld(t, []string{"n1", "n2"}, nil)
	var wg sync.WaitGroup
	for _, id := range []string{"x", "y"} {
		wg.Go(func() {
			for range 2 {
				for r, err := range w.fence([]pmix.Rank{0, 1}, Request{Kind: KindFence, ID: id, Procs: all, Timeout: 10 * time.Second}) {
					if err != nil {
						t.Errorf("fence %s, rank %d: %v", id, r, err)
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestMessagesGrowWithAgents: a fence sends one contribution per agent and
// one release on the collective subjects, whatever the number of procs.
func TestMessagesGrowWithAgents(t *testing.T) {
	for _, perNode := range []int{1, 8} {
		t.Run(fmt.Sprint(perNode), func(t *testing.T) {
			var nodes []string
			for _, n := range []string{"n1", "n2", "n3"} {
				for range perNode {
					nodes = append(nodes, n)
				}
			}
			w := newWorld(t, nodes, nil)
			var ranks []pmix.Rank
			for r := range nodes {
				ranks = append(ranks, pmix.Rank(r))
			}
			// The first operation a coordinator sees of an nspace also
			// asks once for its terminations (AskSubject): count the next.
			for r, err := range w.fence(ranks, Request{Kind: KindFence, Procs: all, Timeout: 10 * time.Second}) {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			var count atomic.Int64
			sub, err := w.nc.Subscribe(Prefix+".>", func(*nats.Msg) { count.Add(1) })
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			if err := w.nc.Flush(); err != nil {
				t.Fatal(err)
			}
			for r, err := range w.fence(ranks, Request{Kind: KindFence, Procs: all, Timeout: 10 * time.Second}) {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			if err := w.nc.Flush(); err != nil {
				t.Fatal(err)
			}
			want := int64(3 + 1) // a contribution per agent, one release
			clustertest.WaitFor(t, 5*time.Second, func() error {
				if n := count.Load(); n != want {
					return fmt.Errorf("%d messages on %s.>, want %d", n, Prefix, want)
				}
				return nil
			})
		})
	}
}

// TestNoTimeoutWarnsWhoIsMissing: a fence with no timeout never fails, but
// its agents log who has not arrived.
func TestNoTimeoutWarnsWhoIsMissing(t *testing.T) {
	rec := &logRecorder{}
	w := newWorld(t, []string{"n1", "n1", "n2"}, func(c *Config) {
		c.WarnAfter = 100 * time.Millisecond
		c.Logger = slog.New(rec)
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := w.svc(0).Join(ctx, Request{Kind: KindFence, Procs: all, Self: pmix.Proc{Nspace: "job", Rank: 0}})
		done <- err
	}()
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if !rec.has("job.1") {
			return errors.New("no warning naming A:job.1")
		}
		return nil
	})
	cancel()
	if err := <-done; !errors.Is(err, pmix.ErrTimeout) {
		t.Fatalf("Join after its context ended: %v", err)
	}
}

// logRecorder is a slog.Handler that keeps every record's text.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	r.mu.Lock()
	r.lines = append(r.lines, line)
	r.mu.Unlock()
	return nil
}

func (r *logRecorder) has(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// TestCoordinatorRestartMidOperation: a coordinator that restarts forgets
// the contributions it had; the agents send theirs again, and the
// operation completes.
func TestCoordinatorRestartMidOperation(t *testing.T) {
	cfg := func(c *Config) { c.Recheck = 200 * time.Millisecond }
	w := newWorld(t, []string{"n1", "n2"}, cfg)
	done := make(chan error, 1)
	go func() {
		_, err := w.svc(1).Join(t.Context(), Request{Kind: KindFence, Procs: all, Self: pmix.Proc{Nspace: "job", Rank: 1}, Timeout: 20 * time.Second})
		done <- err
	}()
	// n2's contribution reached n1, the coordinator (rank 0's agent).
	clustertest.WaitFor(t, 10*time.Second, func() error {
		s := w.svcs["n1"]
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.coord) == 0 {
			return errors.New("the coordinator has no contribution yet")
		}
		return nil
	})
	old := w.svcs["n1"]
	if err := old.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := old.cfg
	restarted, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = restarted.Close(context.Background()) })
	if err := restarted.JobChanged(t.Context(), "job"); err != nil {
		t.Fatal(err)
	}
	w.svcs["n1"] = restarted
	if _, err := restarted.Join(t.Context(), Request{Kind: KindFence, Procs: all, Self: pmix.Proc{Nspace: "job", Rank: 0}, Timeout: 20 * time.Second}); err != nil {
		t.Fatalf("rank 0, at the restarted coordinator: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("rank 1: %v", err)
	}
}

// TestFenceOnOneNodeDecidedThere: a fence whose participants are all
// processes of one node completes, with its data, and sends nothing on
// NATS; one that times out there names who did not arrive, at once.
func TestFenceOnOneNodeDecidedThere(t *testing.T) {
	w := newWorld(t, []string{"n1", "n1", "n1"}, nil)
	sub, err := w.nc.SubscribeSync(Prefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for r := range pmix.Rank(3) {
		if err := w.svc(r).Commit(pmix.Proc{Nspace: "job", Rank: r}, []proto.Put{{Scope: pmix.ScopeGlobal, Key: "k", Value: pmix.Uint32(uint32(r))}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, req := range []Request{{Kind: KindFence, Procs: all, Collect: true}, {Kind: KindFence, Procs: all}} {
		for r, err := range w.fence([]pmix.Rank{0, 1, 2}, req) {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
	}
	v, err := w.svc(0).Get(t.Context(), pmix.Proc{Nspace: "job", Rank: 0}, pmix.Proc{Nspace: "job", Rank: 2}, "k", nil)
	if err != nil || !v.Equal(pmix.Uint32(2)) {
		t.Fatalf("get of rank 2's value after the fence: %v, %v", v, err)
	}

	start := time.Now()
	errs := w.fence([]pmix.Rank{0, 1}, Request{Kind: KindFence, Procs: all, Timeout: time.Second})
	for r, err := range errs {
		if !errors.Is(err, pmix.ErrTimeout) || !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "job.{2} (1 of 3 ranks)") {
			t.Fatalf("rank %d: %v, want the collective's PMIX_ERR_TIMEOUT naming job.{2}", r, err)
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v; the timeout, not a grace, should end it", d)
	}
	if err := w.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(0); err == nil {
		t.Fatalf("a fence of one node's processes sent %s on NATS", m.Subject)
	}
}

// TestJobEndForgetsItsOperations: once a job is deregistered at its
// agents, they keep nothing of its fences — no instance count, and at the
// coordinator no subscription to its terminations — so a long-lived agent
// does not grow with every job it ran; and the same nspace run again
// fences afresh.
func TestJobEndForgetsItsOperations(t *testing.T) {
	var ended atomic.Bool
	ranks := map[pmix.Rank]string{0: "n1", 1: "n2"}
	w := newWorld(t, []string{"n1", "n2"}, func(c *Config) {
		c.Jobs = func(ns string) map[pmix.Rank]string {
			if ns != "job" || ended.Load() {
				return nil
			}
			return ranks
		}
	})
	fence := func() {
		t.Helper()
		for r, err := range w.fence([]pmix.Rank{0, 1}, Request{Kind: KindFence, Procs: []pmix.Proc{{Nspace: "job", Rank: pmix.RankWildcard}}, Timeout: 10 * time.Second}) {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
	}
	fence()
	fence()
	lead := w.svc(0)
	lead.mu.Lock()
	gens, subs := len(lead.gens), len(lead.goneSubs)
	lead.mu.Unlock()
	if gens != 1 || subs != 1 {
		t.Fatalf("while the job runs: %d counts, %d termination subscriptions at the coordinator; want 1 and 1", gens, subs)
	}
	ended.Store(true)
	for _, s := range w.svcs {
		if err := s.JobChanged(t.Context(), "job"); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		gens, subs, sigs, asked := len(s.gens), len(s.goneSubs), len(s.sigsOf), len(s.asked)
		s.mu.Unlock()
		if gens+subs+sigs+asked != 0 {
			t.Errorf("after the job's end: %d counts, %d subscriptions, %d signature sets, %d asks kept", gens, subs, sigs, asked)
		}
	}
	ended.Store(false)
	for _, s := range w.svcs {
		if err := s.JobChanged(t.Context(), "job"); err != nil {
			t.Fatal(err)
		}
	}
	fence()
}

// TestJoinFunc: JoinFunc answers each participant once, with what Join
// gives; one whose context ends first gets Join's error for it while
// the others complete; an invalid request is answered at once.
func TestJoinFunc(t *testing.T) {
	w := newWorld(t, []string{"n1", "n1", "n1", "n2", "n2"}, nil)
	type answer struct {
		r   pmix.Rank
		err error
	}
	answers := make(chan answer, 16)
	req := Request{Kind: KindFence, Procs: all, Timeout: 10 * time.Second}
	join := func(ctx context.Context, r pmix.Rank) {
		rq := req
		rq.Self = pmix.Proc{Nspace: "job", Rank: r}
		w.svc(r).JoinFunc(ctx, rq, func(_ Result, err error) { answers <- answer{r, err} })
	}
	gone, cancel := context.WithCancel(t.Context())
	join(gone, 2)
	cancel()
	select {
	case a := <-answers:
		if a.r != 2 || pmix.StatusOf(a.err) != pmix.ErrTimeout {
			t.Fatalf("cancelled rank 2: got rank %d, %v; want PMIX_ERR_TIMEOUT", a.r, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer for a cancelled participant")
	}
	for _, r := range []pmix.Rank{0, 1, 3, 4} {
		join(t.Context(), r)
	}
	got := map[pmix.Rank]int{}
	for range 4 {
		select {
		case a := <-answers:
			if a.err != nil {
				t.Fatalf("rank %d: %v", a.r, a.err)
			}
			got[a.r]++
		case <-time.After(10 * time.Second):
			t.Fatalf("answers: %v; want ranks 0, 1, 3, 4", got)
		}
	}
	if len(got) != 4 {
		t.Fatalf("answers: %v; want ranks 0, 1, 3, 4 once each", got)
	}
	bad := req
	bad.Self = pmix.Proc{Nspace: "other", Rank: 0}
	called := false
	w.svc(0).JoinFunc(t.Context(), bad, func(_ Result, err error) {
		called = true
		if !errors.Is(err, ErrNotParticipant) {
			t.Errorf("a proc that does not take part: %v; want ErrNotParticipant", err)
		}
	})
	if !called {
		t.Fatal("an invalid request was not answered at once")
	}
	select {
	case a := <-answers:
		t.Fatalf("a second answer, rank %d: %v", a.r, a.err)
	default:
	}
}
