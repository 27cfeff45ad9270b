package event

import (
	"fmt"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
)

// Event messages and outcome reports arrive from NATS, where anyone
// connected can publish: their decoders must not allocate what a lying
// length claims.

// heapAllocated is the bytes allocated on the heap so far; large
// allocations are counted exactly, small ones up to a span early.
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// decodeBound is what decoding n bytes may allocate.
func decodeBound(n int) uint64 { return 256*uint64(n) + 256<<10 }

func TestLyingLengthsFromNATS(t *testing.T) {
	claim := []byte{0xff, 0xff, 0xff, 0xff}
	cases := map[string]struct {
		decode func([]byte) error
		b      []byte
	}{
		// 5 bytes asked reflection for 4 Gi reports: a fatal out-of-memory.
		"outcomes array32": {outcomes, append([]byte{0xdd}, claim...)},
		"outcomes str32":   {outcomes, append([]byte{0x91, 0x81, 0xa8, 'e', 'v', 'e', 'n', 't', '_', 'i', 'd', 0xdb}, claim...)},
		"message id str32": {message, append([]byte{0x9c, 0x01, 0xdb}, claim...)},
		"message targets":  {message, append([]byte{0x9c, 0x01, 0xa1, 'x', 0x01, 0x01, 0xc2, 0xa0, 0xa0, 0xa0, 0xc0, 0xdd}, claim...)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			before := heapAllocated()
			for range 50 {
				if err := c.decode(c.b); pmix.StatusOf(err) != pmix.ErrUnpackFailure {
					t.Fatalf("got %v, want an unpack failure", err)
				}
			}
			if per := (heapAllocated() - before) / 50; per > 16<<10 {
				t.Fatalf("each %d-byte input allocated %d KiB", len(c.b), per>>10)
			}
		})
	}
}

func outcomes(b []byte) error { _, err := UnmarshalOutcomes(b); return err }

// message decodes b; a message it accepts must encode again.
func message(b []byte) error {
	m, err := UnmarshalMessage(b)
	if err != nil {
		return err
	}
	if _, err := m.Marshal(); err != nil {
		panic(fmt.Sprintf("a decoded message does not encode: %v", err))
	}
	return nil
}

func FuzzUnmarshalMessage(f *testing.F) {
	m := &Message{ID: "x.1", Code: pmix.EventNodeDown, Range: pmix.RangeSession, Source: bus.Origin{Cluster: "A", Node: "n1", Proc: pmix.Proc{Nspace: "j", Rank: 2}},
		Targets: []pmix.Proc{{Nspace: "j", Rank: 1}}, Info: []pmix.Info{pmix.NewInfo("k", pmix.String("v"))}, Time: time.Unix(5, 6)}
	seed, err := m.Marshal()
	fuzzBounded(f, seed, err, message)
}

func FuzzUnmarshalOutcomes(f *testing.F) {
	seed, err := MarshalOutcomes([]OutcomeReport{{EventID: "x.1", Cluster: "A", Node: "n1", Client: pmix.Proc{Nspace: "j", Rank: 1},
		Outcome: bus.Outcome{Code: -231, Completed: true, Ran: []bus.Ran{{ID: 3, Name: "h", Status: pmix.EventActionComplete}}}}})
	fuzzBounded(f, seed, err, outcomes)
}

// fuzzBounded fuzzes decode from seed, failing when it allocates beyond
// decodeBound; whether decode succeeds does not matter.
func fuzzBounded(f *testing.F, seed []byte, err error, decode func([]byte) error) {
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		// Other goroutines of a fuzz worker allocate now and then: the
		// least of three runs must stay within the bound.
		for try := 0; ; try++ {
			before := heapAllocated()
			err := decode(b)
			if n := heapAllocated() - before; n <= decodeBound(len(b)) {
				return
			} else if try == 2 {
				t.Fatalf("decoding %d bytes allocated %d KiB (%v)", len(b), n>>10, err)
			}
		}
	})
}
