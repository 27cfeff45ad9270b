package publishlookup

import (
	"runtime"
	"runtime/metrics"
	"slices"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
)

func sampleRecords() []record {
	return []record{
		{Key: "k", Value: pmix.String("A:job1"), Publisher: a0, Range: pmix.RangeGlobal, Persistence: pmix.PersistApp, Time: time.Unix(1, 2).UTC()},
		{
			Key: "pmix.port", Value: pmix.Infos([]pmix.Info{pmix.NewInfo("x", pmix.Int8(-1))}),
			Publisher: Identity{Cluster: "B", Node: "n.1", Session: "", Proc: pmix.Proc{Nspace: "j:1", Rank: 7}, UID: -1, GID: -1},
			Range:     pmix.RangeCustom, Persistence: pmix.PersistFirstRead,
			AccessUIDs: []uint32{0, 4294967295}, AccessGIDs: []uint32{5},
			Custom: []pmix.Proc{{Nspace: "A:x", Rank: pmix.RankWildcard}}, Time: time.Unix(0, 0).UTC(),
		},
	}
}

func recordsEqual(a, b *record) bool {
	return a.Key == b.Key && a.Value.Equal(b.Value) && a.Publisher == b.Publisher && a.Range == b.Range &&
		a.Persistence == b.Persistence && slices.Equal(a.AccessUIDs, b.AccessUIDs) && slices.Equal(a.AccessGIDs, b.AccessGIDs) &&
		slices.Equal(a.Custom, b.Custom) && a.Time.Equal(b.Time)
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range sampleRecords() {
		b, err := r.marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := unmarshalRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		if !recordsEqual(&r, back) {
			t.Fatalf("round trip:\n in %+v\nout %+v", r, back)
		}
		for _, cut := range []int{0, 1, len(b) / 2, len(b) - 1} {
			if _, err := unmarshalRecord(b[:cut]); pmix.StatusOf(err) != pmix.ErrUnpackFailure {
				t.Fatalf("truncated at %d: %v", cut, err)
			}
		}
		if _, err := unmarshalRecord(append(b, 0xc0)); pmix.StatusOf(err) != pmix.ErrUnpackFailure {
			t.Fatalf("trailing bytes: %v", err)
		}
	}
}

func FuzzUnmarshalRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		b, err := r.marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	allocs := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r *record
		var err error
		bound := 64*uint64(len(b)) + 256<<10
		// Other goroutines of a fuzz worker allocate now and then: the
		// least of three runs must stay within bound. The metric counts
		// large allocations exactly, small ones up to a span early.
		for try := 0; ; try++ {
			metrics.Read(allocs)
			before := allocs[0].Value.Uint64()
			r, err = unmarshalRecord(b)
			metrics.Read(allocs)
			if n := allocs[0].Value.Uint64() - before; n <= bound {
				break
			} else if try == 2 {
				t.Fatalf("decoding %d bytes allocated %d KiB", len(b), n>>10)
			}
		}
		if err != nil {
			if pmix.StatusOf(err) != pmix.ErrUnpackFailure && pmix.StatusOf(err) != pmix.ErrUnknownDataType {
				t.Fatalf("error without an unpack status: %v", err)
			}
			return
		}
		again, err := r.marshal()
		if err != nil {
			t.Fatalf("decoded record does not encode: %v", err)
		}
		back, err := unmarshalRecord(again)
		if err != nil || !recordsEqual(r, back) {
			t.Fatalf("not the identity: %+v %+v %v", r, back, err)
		}
	})
}

// TestLyingRecordsKeepNoMemory: records whose msgpack lengths claim more
// than they hold (a bucket anyone on NATS can write) fail without
// allocating what they claim and leave no grown buffer in the pool.
func TestLyingRecordsKeepNoMemory(t *testing.T) {
	const records = 200
	claim := []byte{0xff, 0xff, 0xff, 0xff}
	head := []byte{0xdc, 0x00, recordFields, recordVersion}
	cases := map[string][]byte{
		"key str32":     append(append(head[:4:4], 0xdb), claim...),
		"value str32":   append(append(head[:4:4], 0xa1, 'k', 0x92, 0x03, 0xdb), claim...),
		"cluster str32": append(append(head[:4:4], 0xa1, 'k', 0x92, 0x03, 0xa1, 'v', 0xdb), claim...),
		"array claim":   append([]byte{0xdd}, claim...),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			var ms runtime.MemStats
			live := func() int64 { runtime.GC(); runtime.ReadMemStats(&ms); return int64(ms.HeapAlloc) }
			base := live()
			total := ms.TotalAlloc
			for i := range records {
				if _, err := unmarshalRecord(b); pmix.StatusOf(err) != pmix.ErrUnpackFailure {
					t.Fatalf("got %v, want an unpack failure", err)
				}
				if i%20 == 19 {
					if grown := live() - base; grown > 4<<20 {
						t.Fatalf("after %d records of %d bytes the live heap grew by %d MiB", i+1, len(b), grown>>20)
					}
				}
			}
			live()
			if per := (ms.TotalAlloc - total) / records; per > 16<<10 {
				t.Errorf("each %d-byte record allocated %d KiB", len(b), per>>10)
			}
		})
	}
}
