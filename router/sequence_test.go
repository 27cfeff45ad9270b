package router

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
)

// seqKey carries a test event's number.
const seqKey = "test.n"

// seqRig is a router with the sequenced dispatch over a MemStream.
type seqRig struct {
	t       *testing.T
	tr      *MemTransport
	stream  *MemStream
	r       *Router
	place   event.Place
	clients []*fakeClient
	host    *fakeHost

	mu     sync.Mutex
	events []seqEvent // published, in stream order
}

type seqEvent struct {
	n    int
	code pmix.Status
	rng  pmix.Range
	ns   string
	from int // the client that notified it; -1: the RM
}

// seqReg is a registration whose handler records the numbers it gets.
type seqReg struct {
	c     *fakeClient
	codes []pmix.Status
	id    bus.ID
	mu    sync.Mutex
	got   []int
	gone  bool
}

func (g *seqReg) handler(call *bus.Call, done bus.Done) {
	for _, in := range call.Info {
		if in.Key == seqKey {
			s, _ := in.Value.Str()
			n, _ := strconv.Atoi(s)
			g.mu.Lock()
			g.got = append(g.got, n)
			g.mu.Unlock()
		}
	}
	done(pmix.EventNoActionTaken, nil)
}

func (g *seqReg) received() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.got)
}

func newSeqRig(t *testing.T, tr *MemTransport, max, inbox int) *seqRig {
	t.Helper()
	return newSeqRigWith(t, tr, max, inbox, func(*Router) {})
}

// newSeqRigWith is newSeqRig with prepare run on the router before it
// takes the stream's order.
func newSeqRigWith(t *testing.T, tr *MemTransport, max, inbox int, prepare func(*Router)) *seqRig {
	t.Helper()
	place := event.Place{Cluster: "A", Node: "n1"}
	s := &seqRig{t: t, tr: tr, place: place, stream: NewMemStream(tr, "A", max)}
	for _, p := range []pmix.Proc{{Nspace: "jobA", Rank: 0}, {Nspace: "jobA", Rank: 1}, {Nspace: "jobB", Rank: 0}} {
		s.clients = append(s.clients, newFakeClient(t, place, p, "s-"+p.Nspace))
	}
	s.host = &fakeHost{jobs: map[string]map[pmix.Rank]string{"jobA": {0: "n1", 1: "n1"}, "jobB": {0: "n1"}}}
	for _, c := range s.clients {
		s.host.clients = append(s.host.clients, c)
	}
	s.r = startRouter(t, tr, place, s.host, inbox, func(r *Router) {
		prepare(r)
		if err := r.sequence(t.Context(), s.stream); err != nil {
			t.Fatal(err)
		}
	})
	return s
}

func (s *seqRig) publish(code pmix.Status, rng pmix.Range, ns string) {
	s.t.Helper()
	s.publishFrom(-1, code, rng, ns)
}

// publishFrom publishes as client from does (-1: as the RM), from its
// own nspace for RangeNamespace.
func (s *seqRig) publishFrom(from int, code pmix.Status, rng pmix.Range, ns string) {
	s.t.Helper()
	src := bus.Origin{Cluster: "A", Node: "n1"}
	var sender *event.Sender
	if from >= 0 {
		c := s.clients[from]
		src.Proc, src.Session = c.proc, c.session
		sender = &event.Sender{Proc: c.proc, Session: c.session}
		if rng == pmix.RangeNamespace {
			ns = c.proc.Nspace
		}
	}
	s.mu.Lock()
	n := len(s.events) + 1
	s.events = append(s.events, seqEvent{n: n, code: code, rng: rng, ns: ns, from: from})
	s.mu.Unlock()
	info := []pmix.Info{pmix.NewInfo(seqKey, pmix.String(strconv.Itoa(n)))}
	if rng == pmix.RangeNamespace && from < 0 {
		info = append(info, pmix.NewInfo(pmix.KeyNspace, pmix.String(ns)))
	}
	m := &event.Message{ID: fmt.Sprint("e", n), Code: code, Range: rng, Info: info, Source: src, Time: time.Now()}
	if err := s.r.Publish(m, sender); err != nil {
		s.t.Fatal(err)
	}
}

// logDups logs the events got holds more than once.
func (s *seqRig) logDups(got []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[int]bool{}
	for _, n := range got {
		if seen[n] {
			s.t.Logf("event %d came twice: %+v", n, s.events[n-1])
		}
		seen[n] = true
	}
}

// bySender splits event numbers by their sender, keeping their order.
func (s *seqRig) bySender(ns []int) map[int][]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int][]int{}
	for _, n := range ns {
		from := s.events[n-1].from
		out[from] = append(out[from], n)
	}
	return out
}

// ownedInOrder reports whether got holds each event of want once, each
// sender's in its order (the stream's order across senders does not
// hold for LOCAL events run early: local.go); with prefix, what got holds
// of each sender may stop early.
func (s *seqRig) ownedInOrder(got, want []int, prefix bool) bool {
	if !prefix && len(got) != len(want) {
		return false
	}
	g, w := s.bySender(got), s.bySender(want)
	for from, gs := range g {
		ws := w[from]
		if len(gs) > len(ws) || !slices.Equal(gs, ws[:len(gs)]) || !prefix && len(gs) != len(ws) {
			return false
		}
	}
	return true
}

func (s *seqRig) register(c *fakeClient, codes []pmix.Status) *seqReg {
	s.t.Helper()
	g := &seqReg{c: c, codes: codes}
	id, replied, err := s.r.Register(s.t.Context(), c, codes, nil, g.handler)
	if err != nil {
		s.t.Fatal(err)
	}
	g.id = id
	replied()
	return g
}

// want is what g is owed: every event published for its client and codes,
// in order.
func (s *seqRig) want(g *seqReg) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, e := range s.events {
		if e.rng == pmix.RangeNamespace && e.ns != g.c.proc.Nspace {
			continue
		}
		if len(g.codes) > 0 && !slices.Contains(g.codes, e.code) {
			continue
		}
		out = append(out, e.n)
	}
	return out
}

// check waits until every registration still there got what it is owed,
// and checks that every one got each event once, in order: a prefix of it
// for those deregistered.
func (s *seqRig) check(regs []*seqReg) {
	s.t.Helper()
	s.r.CheckTail()
	clustertest.WaitFor(s.t, 10*time.Second, func() error {
		s.r.CheckTail()
		for i, g := range regs {
			got, want := g.received(), s.want(g)
			if g.gone {
				if !s.ownedInOrder(got, want, true) {
					s.logDups(got)
					return fmt.Errorf("deregistered registration %d (%v of %v) got %v, not a prefix of %v", i, g.codes, g.c.proc, got, want)
				}
				continue
			}
			if !s.ownedInOrder(got, want, false) {
				s.logDups(got)
				return fmt.Errorf("registration %d (%v of %v) got %d events, want %d\n got %v\nwant %v", i, g.codes, g.c.proc, len(got), len(want), got, want)
			}
		}
		return nil
	})
}

// A copy lost on its way (as a slow consumer or a leader change loses
// one) is fetched by sequence and dispatched in its place; a copy that
// comes twice runs once; one lost at the tail is found by CheckTail.
func TestSequencedGapFetched(t *testing.T) {
	s := newSeqRig(t, &MemTransport{}, 512, 0)
	all := s.register(s.clients[0], nil)
	s.stream.SetFaults(Faults{
		DropCopy: func(seq uint64) bool { return seq%5 == 0 }, // 40, the last, too
		DupCopy:  func(seq uint64) bool { return seq%7 == 0 },
	})
	for range 40 {
		s.publish(-3001, pmix.RangeLocal, "")
	}
	s.check([]*seqReg{all})
	st := s.r.SeqStats()
	// A tail check may also fetch what was still in the inbox, whose
	// copies then come as duplicates.
	if st.Fetched < 8 || st.Duplicates < 4 || st.Lost != 0 || st.Next != 41 {
		t.Errorf("stats %+v, want at least 8 fetched (7 gaps, 1 at the tail), at least 4 duplicates (35 is lost), none lost, next 41", st)
	}
}

// A copy lost at the tail, which no later copy reveals, is found when the
// stream elects a leader: the router's own subscription to the advisory
// (Transport.SubscribeFunc) looks, with the periodic look far off.
func TestSequencedTailFoundOnLeaderElection(t *testing.T) {
	s := newSeqRigWith(t, &MemTransport{}, 512, 0, func(r *Router) { r.tailEvery = time.Hour })
	all := s.register(s.clients[0], nil)
	s.stream.SetFaults(Faults{DropCopy: func(seq uint64) bool { return seq == 3 }})
	for range 3 {
		s.publish(-3001, pmix.RangeLocal, "")
	}
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if err := s.stream.ElectLeader(); err != nil {
			return err
		}
		if got := all.received(); !slices.Equal(got, []int{1, 2, 3}) {
			return fmt.Errorf("got %v, want [1 2 3]", got)
		}
		return nil
	})
	if st := s.r.SeqStats(); st.Fetched != 1 || st.Lost != 0 {
		t.Errorf("stats %+v, want the tail's one event fetched, none lost", st)
	}
}

// A registration made during a flood of 1000 job events gets all of them,
// each once, in order: those before its place replayed, the rest live.
func TestSequencedRegistrationDuringFlood(t *testing.T) {
	s := newSeqRig(t, &MemTransport{}, 100, 0)
	const n = 1000
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			if i == 100 {
				close(started)
			}
			s.publish(-3001, pmix.RangeNamespace, "jobA")
		}
	}()
	<-started
	g := s.register(s.clients[1], []pmix.Status{-3001})
	<-done
	s.check([]*seqReg{g})
	if got := len(g.received()); got != n {
		t.Fatalf("%d of %d", got, n)
	}
}

// The model: random interleavings of publishing, registering,
// deregistering, copies lost (alone, in runs as on a reconnect, or by a
// full inbox) or repeated (a leader change), on the in-memory transport
// and stream; every registration gets each event it is owed once, in
// order. PMIXBUS_MODEL_SEEDS runs more seeds than the default.
func TestSequencedModel(t *testing.T) {
	seeds := 30
	if v, err := strconv.Atoi(os.Getenv("PMIXBUS_MODEL_SEEDS")); err == nil && v > 0 {
		seeds = v
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runModel(t, uint64(seed)) })
	}
}

func runModel(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 27))
	tr := &MemTransport{dropWhenFull: rnd.IntN(2) == 0}
	s := newSeqRigWith(t, tr, 4+rnd.IntN(60), 4+rnd.IntN(60), func(r *Router) {
		if seed%2 == 1 {
			// Publish hardly waits for the runs: copies may come
			// first (a dispatch goroutine busy fetching a gap).
			r.earlyWait = time.Nanosecond
		}
	})
	var fmu sync.Mutex
	var drop, dup map[uint64]bool = map[uint64]bool{}, map[uint64]bool{}
	s.stream.SetFaults(Faults{
		DropCopy: func(seq uint64) bool { fmu.Lock(); defer fmu.Unlock(); return drop[seq] },
		DupCopy:  func(seq uint64) bool { fmu.Lock(); defer fmu.Unlock(); return dup[seq] },
	})
	next := func() uint64 { // the sequence the next event gets
		last, _ := s.stream.lastSeq(t.Context())
		return last + 1
	}
	codes := [][]pmix.Status{nil, {-3001}, {-3002}, {-3001, -3002}}
	var regs []*seqReg
	for range 150 + rnd.IntN(150) {
		switch op := rnd.IntN(100); {
		case op < 60:
			// As the RM, or as a client: a client's LOCAL events run
			// before their copies come when its order allows.
			code := []pmix.Status{-3001, -3002}[rnd.IntN(2)]
			from := rnd.IntN(len(s.clients)+1) - 1
			if rnd.IntN(2) == 0 {
				s.publishFrom(from, code, pmix.RangeLocal, "")
			} else {
				s.publishFrom(from, code, pmix.RangeNamespace, []string{"jobA", "jobB"}[rnd.IntN(2)])
			}
		case op < 75:
			regs = append(regs, s.register(s.clients[rnd.IntN(len(s.clients))], codes[rnd.IntN(len(codes))]))
		case op < 80:
			if len(regs) > 0 {
				g := regs[rnd.IntN(len(regs))]
				if !g.gone {
					if err := s.r.Deregister(g.c, g.c.reg, g.id); err != nil {
						t.Fatal(err)
					}
					g.gone = true
				}
			}
		case op < 88: // a copy lost, or a run of them (a reconnect)
			from, k := next(), uint64(1+rnd.IntN(8))
			fmu.Lock()
			for q := from; q < from+k; q++ {
				drop[q] = true
			}
			fmu.Unlock()
		case op < 93: // copies repeated (a new leader sends again)
			fmu.Lock()
			dup[next()+uint64(rnd.IntN(3))] = true
			fmu.Unlock()
		case op < 96: // the tail checked: a reconnect, an advisory, the timer
			s.r.CheckTail()
		default:
			runtime.Gosched()
		}
	}
	s.check(regs)
}
