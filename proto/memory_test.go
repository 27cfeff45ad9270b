package proto

import (
	"errors"
	"math"
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

// liveHeap is the heap still in use once garbage is collected: what pools
// and caches keep.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// allocated is the bytes allocated on the heap so far. It is cheap enough
// for a fuzz body; large allocations are counted exactly, small ones up to
// a span's worth early.
func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// allocatedBy is what f allocates; when that exceeds bound, the least of up
// to three runs, as other goroutines of a fuzz worker allocate now and then.
func allocatedBy(bound uint64, f func()) uint64 {
	least := uint64(math.MaxUint64)
	for range 3 {
		before := allocated()
		f()
		if least = min(least, allocated()-before); least <= bound {
			break
		}
	}
	return least
}

// allocBound is what decoding len n bytes may allocate: the decoded
// structures are larger than their wire form, but never by a megabyte.
func allocBound(n int) uint64 { return 64*uint64(n) + 256<<10 }

// lyingBodies are frame bodies whose str32/bin32/ext32 header claims 4 GiB
// that the body does not hold: the kind of 15-byte frame that grew a
// pooled decoder's buffer by a megabyte or more each time.
func lyingBodies() map[string][]byte {
	claim := []byte{0xff, 0xff, 0xff, 0xff}
	head := []byte{0x82, 0xa1, 't', 0x01} // {"t": 1, …
	with := func(key string, code byte) []byte {
		b := append(append([]byte{}, head...), 0xa0|byte(len(key)))
		b = append(append(b, key...), code)
		return append(b, claim...)
	}
	return map[string][]byte{
		"unknown key str32": with("zz", 0xdb),
		"unknown key bin32": with("zz", 0xc6),
		"unknown key ext32": with("zz", 0xc9),
		"message str32":     with("m", 0xdb),
		"key str32":         append(append([]byte{}, head...), 0xdb, 0xff, 0xff, 0xff, 0xff),
		"info value str32": append(append([]byte{}, head...),
			0xa2, 'i', 'n', 0x91, 0x93, 0xa1, 'k', 0x00, 0x92, 0x03, 0xdb, 0xff, 0xff, 0xff, 0xff),
		"map32 claim": {0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 't', 0x01},
		// An ext of one byte, which msgpack's DecodeMapLen reads as a
		// header: the map it then reads is not the value CheckLengths measured.
		"map in an ext": append([]byte{0xd4, 0x00}, with("zz", 0xdb)...),
		"codes claim":   append(append([]byte{}, head...), 0xa2, 'c', 's', 0xdd, 0xff, 0xff, 0xff, 0xff),
	}
}

// TestLyingLengthsKeepNoMemory: frames whose msgpack lengths claim more
// than they hold fail without allocating what they claim, and leave no
// grown buffer behind in a pool.
func TestLyingLengthsKeepNoMemory(t *testing.T) {
	const frames = 200
	for name, body := range lyingBodies() {
		t.Run(name, func(t *testing.T) {
			base, before := liveHeap(), allocated()
			for i := range frames {
				if _, err := Unmarshal(body); !errors.Is(err, pmix.ErrUnpackFailure) {
					t.Fatalf("got %v, want an unpack failure", err)
				}
				if i%20 == 19 {
					if grown := liveHeap() - base; grown > 4<<20 {
						t.Fatalf("after %d frames of %d bytes the live heap grew by %d MiB", i+1, len(body), grown>>20)
					}
				}
			}
			if per := (allocated() - before) / frames; per > 16<<10 {
				t.Errorf("each %d-byte frame allocated %d KiB", len(body), per>>10)
			}
		})
	}
}
