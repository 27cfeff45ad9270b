package bus

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
)

// BenchmarkChain measures what docs/PERFORMANCE.md reports:
//
//   - handlers=N: one Notify of an event (two infos) through a chain of N
//     handlers that complete within their call, the registry's default
//     timeout armed as in production (DefaultHandlerTimeout, real clock). It
//     reports ns/handler and allocs/handler, whole-chain costs divided by
//     N; the outcome callback is included.
//   - handlers=N/async: the same, each handler completing from a
//     long-lived worker goroutine (a channel hand-off per handler), which is
//     how the agent's handlers complete.
//   - start/registries=16[/async]: the agent's delivery of one event to 16
//     clients: Prepare once, then Start and Run in 16 registries of one
//     handler each (completing within its call, or from a worker
//     goroutine). It reports ns/delivery and allocs/delivery, per registry.
//   - register/existing=K/…: one Register plus one Deregister with K
//     handlers already registered (spread over 100 codes and the three
//     categories), for several ways of placing the new one.
//   - notify-after-change/existing=K: a registration change followed by one
//     Notify of an 8-handler code, so the cost of rebuilding that code's
//     cached chain with K handlers registered for other codes (single and
//     multi category: default handlers would be part of the chain).
func BenchmarkChain(b *testing.B) {
	info := []pmix.Info{
		pmix.NewInfo(pmix.KeyEventAffectedProc, pmix.ProcValue(pmix.Proc{Nspace: "A:job1", Rank: 3})),
		pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String("bench")),
	}
	for _, n := range []int{1, 8, 64, 512} {
		b.Run(fmt.Sprintf("handlers=%d", n), func(b *testing.B) {
			r := benchRegistry(b)
			for range n {
				mustRegister(b, r, codes(codeA), "", noAction)
			}
			benchNotify(b, r, Event{Code: codeA, Info: info}, n)
		})
	}
	for _, n := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("handlers=%d/async", n), func(b *testing.B) {
			r := benchRegistry(b)
			work := make(chan Done, 1)
			go func() {
				for done := range work {
					done(pmix.EventNoActionTaken, nil)
				}
			}()
			defer close(work)
			for range n {
				mustRegister(b, r, codes(codeA), "", func(_ *Call, done Done) { work <- done })
			}
			benchNotify(b, r, Event{Code: codeA, Info: info}, n)
		})
	}

	for _, async := range []bool{false, true} {
		name := "start/registries=16"
		if async {
			name += "/async"
		}
		b.Run(name, func(b *testing.B) { benchStart(b, 16, async, info) })
	}

	for _, existing := range []int{100, 10_000, 100_000} {
		for _, place := range []struct {
			name  string
			attrs []pmix.Info
		}{
			{"prepend", nil},
			{"append", []pmix.Info{appendAt}},
			{"before", []pmix.Info{before("target")}},
			{"named", nil},
		} {
			b.Run(fmt.Sprintf("register/existing=%d/%s", existing, place.name), func(b *testing.B) {
				r := benchRegistry(b)
				fill(b, r, existing, true)
				attrs := place.attrs
				if place.name == "named" {
					attrs = []pmix.Info{name("bench-handler")}
				}
				// Keep the registry at its size, but do not undo each
				// insertion at once: retire the one made 64 iterations
				// earlier, so that repeated BEFORE insertions crowd the
				// labels around the target and relabelling is paid for.
				var ring [64]ID
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					cs := codes(pmix.Status(-5000 - i%100))
					if place.name == "named" {
						cs = codes(codeA)
					}
					id, err := r.Register(cs, attrs, noAction)
					if err != nil {
						b.Fatal(err)
					}
					slot := &ring[i%len(ring)]
					if *slot != 0 {
						r.Deregister(*slot)
					}
					*slot = id
					if place.name == "named" {
						r.Deregister(id)
						*slot = 0
					}
					i++
				}
			})
		}
	}

	for _, existing := range []int{100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("notify-after-change/existing=%d", existing), func(b *testing.B) {
			r := benchRegistry(b)
			fill(b, r, existing, false)
			for range 8 {
				mustRegister(b, r, codes(codeA), "", noAction)
			}
			ev := Event{Code: codeA, Info: info}
			done := func(Outcome) {}
			b.ReportAllocs()
			for b.Loop() {
				id, _ := r.Register(codes(codeB), nil, noAction)
				r.Deregister(id)
				r.Notify(ev, done)
			}
		})
	}
}

func benchRegistry(b *testing.B) *Registry {
	cfg := DefaultConfig()
	cfg.Self = selfOrigin
	r, err := NewRegistry(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Close)
	return r
}

// fill registers k handlers over 100 codes (none of them codeA or codeB):
// 70% single, 20% multi, 10% default (or single, without defaults), with a
// named "target" in the single category for BEFORE.
func fill(b *testing.B, r *Registry, k int, defaults bool) {
	mustRegister(b, r, codes(-5000), "target", noAction)
	for i := 1; i < k; i++ {
		c := pmix.Status(-5000 - i%100)
		cs := codes(c)
		switch i % 10 {
		case 0:
			if defaults {
				cs = nil
			}
		case 1, 2:
			cs = codes(c, c-1)
		}
		mustRegister(b, r, cs, "h"+strconv.Itoa(i), noAction)
	}
}

func benchNotify(b *testing.B, r *Registry, ev Event, n int) {
	got := make(chan Outcome, 1)
	done := func(o Outcome) { got <- o }
	// One warm-up chain builds the cached plan.
	r.Notify(ev, done)
	if o := <-got; len(o.Ran) != n {
		b.Fatalf("ran %d handlers, want %d", len(o.Ran), n)
	}
	measure(b, n, "handler", func() {
		r.Notify(ev, done)
		<-got
	})
}

// measure runs round b.N times and reports its time and allocations per
// unit, n units a round.
func measure(b *testing.B, n int, unit string, round func()) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		round()
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	calls := float64(b.N) * float64(n)
	b.ReportMetric(float64(elapsed.Nanoseconds())/calls, "ns/"+unit)
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/calls, "allocs/"+unit)
}

func benchStart(b *testing.B, regs int, async bool, info []pmix.Info) {
	work := make(chan Done, regs)
	go func() {
		for done := range work {
			done(pmix.EventNoActionTaken, nil)
		}
	}()
	defer close(work)
	h := noAction
	if async {
		h = func(_ *Call, done Done) { work <- done }
	}
	rs := make([]*Registry, regs)
	for i := range rs {
		rs[i] = benchRegistry(b)
		mustRegister(b, rs[i], codes(codeA), "", h)
	}
	got := make(chan Outcome, regs)
	done := func(o Outcome) { got <- o }
	measure(b, regs, "delivery", func() {
		p := Prepare(Event{Code: codeA, Info: info})
		for _, r := range rs {
			r.Start(p).Run(done)
		}
		for range rs {
			<-got
		}
	})
}
