package launch

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"

	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/pmix"
)

// record puts the subscription's records and a repair's together: every
// record once, in sequence, whatever the order they come in.
func TestRecordMergesBySequence(t *testing.T) {
	job := &runJob{nspace: "j", cluster: "A"}
	rec := func(seq uint64, repair bool) incoming {
		in := incoming{Delivered: iof.Delivered{Parsed: iof.Parsed{Record: iof.Record{Nspace: "j", Rank: 0, Channel: iof.STDOUT, Seq: seq, Data: []byte(fmt.Sprintf("%d\n", seq))}}, Pending: 1}}
		if repair {
			in.repair = job
		}
		return in
	}
	direct := func(seq uint64) incoming {
		in := rec(seq, false)
		in.direct = true
		return in
	}
	live := func(seq uint64) incoming {
		in := rec(seq, false)
		in.Live = true
		return in
	}
	for _, tc := range []struct {
		name string
		in   []incoming
		want string
	}{
		{"in order", []incoming{rec(1, false), rec(2, false), rec(3, false)}, "1\n2\n3\n"},
		{"a gap the repair fills", []incoming{rec(1, false), rec(3, false), rec(4, false), rec(1, true), rec(2, true), rec(3, true)}, "1\n2\n3\n4\n"},
		{"duplicates", []incoming{rec(1, false), rec(1, true), rec(2, true), rec(2, false)}, "1\n2\n"},
		{"the stream dropped some", []incoming{rec(1, false), rec(3, false), rec(5, true), rec(5, false)}, "1\n3\n5\n"},
		// The stream brings a stored record while live ones sent before it
		// (over the limit: never stored) are still on their way on the
		// subscription: it waits for them (seen once in a full run: a
		// rank's end shown first, all of its lines then dropped as seen).
		{"live ones still coming", []incoming{rec(1, false), rec(4, true), live(2), live(3), rec(4, false)}, "1\n2\n3\n4\n"},
		{"the repair first", []incoming{rec(1, true), rec(2, true), rec(1, false), rec(3, false)}, "1\n2\n3\n"},
		{"over the limit, live", []incoming{rec(1, false), live(3), live(4), rec(2, true)}, "1\n3\n4\n"},
		// A direct path (direct.go) ahead of the subscription, which
		// brings every record again.
		{"direct first", []incoming{direct(1), direct(2), rec(1, false), direct(3), rec(2, false), rec(3, false)}, "1\n2\n3\n"},
		// Attached late: the subscription brings the first ones.
		{"direct attached late", []incoming{direct(3), direct(4), rec(1, false), rec(2, false), rec(3, false), rec(4, false)}, "1\n2\n3\n4\n"},
		// The subscription misses one the direct path holds: the repair
		// brings what neither brought, nothing is skipped.
		{"both miss one", []incoming{rec(1, false), direct(3), rec(3, false), rec(2, true), rec(3, true)}, "1\n2\n3\n"},
		{"the direct path dropped some", []incoming{direct(1), direct(4), rec(1, false), rec(2, false), rec(3, false), rec(4, false)}, "1\n2\n3\n4\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			// A repair is running from the start (so a gap starts none).
			r := &Run{cfg: Config{Stdout: &out, Stderr: &out}, log: slog.New(slog.DiscardHandler), jobs: []*runJob{job},
				nspace: "j", places: []Placement{{Cluster: "A"}},
				repairs: map[*runJob]*repairState{job: {f: &iof.Follower{}}}, completes: map[rankKey]int{}, held: map[rankKey]heldEnd{},
				out: outputState{chans: map[chanKey]*chanState{}, seenJob: map[string]bool{}}}
			for _, in := range tc.in {
				r.record(in)
			}
			if out.String() != tc.want {
				t.Errorf("shown %q, want %q", out.String(), tc.want)
			}
			if r.out.heldBytes != 0 {
				t.Errorf("%d bytes still held", r.out.heldBytes)
			}
		})
	}
}

// What is still held when the run ends, or a rank's end is acted on
// without its output's end, is shown, in order.
func TestFlushHeld(t *testing.T) {
	job := &runJob{nspace: "j", cluster: "A"}
	var out bytes.Buffer
	r := &Run{cfg: Config{Stdout: &out, Stderr: &out}, log: slog.New(slog.DiscardHandler), jobs: []*runJob{job},
		nspace: "j", places: []Placement{{Cluster: "A"}, {Cluster: "A"}},
		repairs: map[*runJob]*repairState{job: {f: &iof.Follower{}}}, completes: map[rankKey]int{}, held: map[rankKey]heldEnd{},
		out: outputState{chans: map[chanKey]*chanState{}, seenJob: map[string]bool{}}}
	for _, rank := range []pmix.Rank{1, 0} {
		for _, seq := range []uint64{1, 3, 4} {
			in := incoming{Delivered: iof.Delivered{Parsed: iof.Parsed{Record: iof.Record{Nspace: "j", Rank: rank, Channel: iof.STDOUT, Seq: seq, Data: []byte(fmt.Sprintf("%d.%d\n", rank, seq))}}, Pending: 1}, repair: job}
			r.record(in)
		}
	}
	r.flushHeld(rankKey{"j", 1}, false)
	if want := "1.1\n0.1\n1.3\n1.4\n"; out.String() != want {
		t.Fatalf("rank 1 flushed: %q, want %q", out.String(), want)
	}
	r.flushHeld(rankKey{}, true)
	if want := "1.1\n0.1\n1.3\n1.4\n0.3\n0.4\n"; out.String() != want || r.out.heldBytes != 0 {
		t.Fatalf("all flushed: %q (%d bytes held), want %q", out.String(), r.out.heldBytes, want)
	}
}

// A record of a repair that was stopped, still queued, neither counts as
// the current repair's nor stops it.
func TestRecordIgnoresStoppedRepair(t *testing.T) {
	var out bytes.Buffer
	j := &runJob{nspace: "j", cluster: "A"}
	r := &Run{cfg: Config{Stdout: &out, Stderr: &out}, log: slog.New(slog.DiscardHandler), jobs: []*runJob{j},
		nspace: "j", places: []Placement{{Cluster: "A"}},
		repairs: map[*runJob]*repairState{j: {f: &iof.Follower{}, gen: 2, readTo: 10}}, completes: map[rankKey]int{}, held: map[rankKey]heldEnd{},
		out: outputState{chans: map[chanKey]*chanState{}, seenJob: map[string]bool{}}}
	stale := incoming{Delivered: iof.Delivered{Parsed: iof.Parsed{Record: iof.Record{Nspace: "j", Channel: iof.STDOUT, Seq: 1, Data: []byte("x\n")}}, StreamSeq: 50}, repair: j, gen: 1}
	r.record(stale)
	if rs := r.repairs[j]; rs.f == nil || rs.readTo != 10 || out.Len() != 0 {
		t.Fatalf("a stale record was taken: readTo %d, stopped %v, shown %q", rs.readTo, rs.f == nil, out.String())
	}
}

// A record of a process the run did not start is not shown, and leaves
// no state behind.
func TestRecordIgnoresOtherProcesses(t *testing.T) {
	var out bytes.Buffer
	r := &Run{cfg: Config{Stdout: &out, Stderr: &out}, log: slog.New(slog.DiscardHandler), jobs: []*runJob{{nspace: "j", cluster: "A"}},
		nspace: "j", places: []Placement{{Cluster: "A"}, {Rank: 1, Cluster: "A"}},
		repairs: map[*runJob]*repairState{}, completes: map[rankKey]int{}, held: map[rankKey]heldEnd{},
		out: outputState{chans: map[chanKey]*chanState{}, seenJob: map[string]bool{}}}
	for _, rec := range []iof.Record{{Nspace: "j", Rank: 2, Seq: 1}, {Nspace: "other", Rank: 0, Seq: 1}} {
		rec.Channel, rec.Data = iof.STDOUT, []byte("x\n")
		r.record(incoming{Delivered: iof.Delivered{Parsed: iof.Parsed{Record: rec}}})
	}
	if out.Len() != 0 || len(r.out.chans) != 0 {
		t.Fatalf("shown %q, %d channels kept", out.String(), len(r.out.chans))
	}
}
