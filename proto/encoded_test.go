package proto

import (
	"bytes"
	"slices"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

// TestEncodedInfosSameBytes: an invocation whose info was encoded once
// appends exactly the bytes of one encoding it each time, and an encoding
// that is not its info's (another event's, or of infos changed since) is
// not used.
func TestEncodedInfosSameBytes(t *testing.T) {
	rich, _ := fanoutEntries(true)
	lists := map[string][]pmix.Info{
		"event":  rich[0].Info,
		"empty":  {},
		"nested": sampleInvokes(2)[0].Info,
		"many":   slices.Repeat(rich[0].Info, 8), // an array16 header
	}
	appendAll := func(invs []Invoke) []byte { return appendBatch(t, invs, nil) }
	var cache InfoCache
	for name, info := range lists {
		invs := sampleInvokes(6)
		for i := range invs {
			invs[i].Info = slices.Clone(info) // as each client's chain copies it
		}
		want := appendAll(invs)
		enc, err := EncodeInfoList(info)
		if err != nil {
			t.Fatal(err)
		}
		for i := range invs {
			invs[i].Encoded = enc
		}
		if got := appendAll(invs); !bytes.Equal(got, want) {
			t.Errorf("%s: with the info encoded once:\n%x\nwant\n%x", name, got, want)
		}
		if cache.Get(info) != cache.Get(slices.Clone(info)) {
			t.Errorf("%s: the cache encoded equal infos twice", name)
		}
	}
	// Not the encoding of the invocation's info: encoded as usual.
	other, err := EncodeInfoList(lists["event"][:1])
	if err != nil {
		t.Fatal(err)
	}
	invs := sampleInvokes(3)
	want := appendAll(invs)
	changed := slices.Clone(invs[0].Info)
	changed[1].Value = pmix.Int8(4)
	mismatched, err := EncodeInfoList(changed)
	if err != nil {
		t.Fatal(err)
	}
	invs[0].Encoded, invs[1].Encoded = other, mismatched
	if got := appendAll(invs); !bytes.Equal(got, want) {
		t.Errorf("with another list's encoding:\n%x\nwant\n%x", got, want)
	}
	if cache.Get(changed) == cache.Get(invs[0].Info) {
		t.Error("the cache gave the encoding of other infos")
	}
	if e, err := EncodeInfoList([]pmix.Info{{Key: "k", Value: pmix.Value{}}}); err != nil || e == nil {
		t.Fatalf("undef value: %v", err)
	}
}

// TestInfoCacheInterleaved: the invocations of several events interleave
// (clients' chains start as their windows allow); each event's list is
// encoded once, and a list whose contents changed is encoded again.
func TestInfoCacheInterleaved(t *testing.T) {
	var cache InfoCache
	lists := make([][]pmix.Info, 8)
	first := make([]*EncodedInfos, len(lists))
	for i := range lists {
		lists[i] = []pmix.Info{pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String("event")), pmix.NewInfo("n", pmix.Int64(int64(i)))}
		first[i] = cache.Get(lists[i])
	}
	for range 3 {
		for i := range lists {
			if cache.Get(lists[i]) != first[i] {
				t.Fatalf("list %d encoded again", i)
			}
		}
	}
	lists[3][1].Value = pmix.Int64(-1)
	if e := cache.Get(lists[3]); e == first[3] || !e.Of(lists[3]) {
		t.Error("a list whose infos changed got its old encoding")
	}
	for i := range cacheEntries + 1 { // past the bound: starts afresh, still right
		l := []pmix.Info{pmix.NewInfo("n", pmix.Int64(int64(i)))}
		if e := cache.Get(l); !e.Of(l) {
			t.Fatalf("entry %d: wrong encoding", i)
		}
	}
	if len(cache.byPtr) > cacheEntries {
		t.Errorf("%d lists kept, bound %d", len(cache.byPtr), cacheEntries)
	}
}

// BenchmarkAppendInvoke appends the invocations of a fan-out burst to a
// client's queue, encoding each one's info, or taking the encoding made
// once (per entry: the time; allocations per burst of 256).
func BenchmarkAppendInvoke(b *testing.B) {
	for _, rich := range []bool{false, true} {
		invs, _ := fanoutEntries(rich)
		for _, once := range []bool{false, true} {
			name := map[bool]string{false: "bare", true: "rich"}[rich] + map[bool]string{false: "/each", true: "/once"}[once]
			b.Run(name, func(b *testing.B) {
				if once {
					enc, err := EncodeInfoList(invs[0].Info)
					if err != nil {
						b.Fatal(err)
					}
					for i := range invs {
						invs[i].Encoded = enc
					}
				}
				buf := make([]byte, 0, 64<<10)
				b.ReportAllocs()
				for range b.N {
					var bt Batch
					var err error
					buf = buf[:0]
					for i := range invs {
						if buf, err = bt.AppendInvoke(buf, &invs[i]); err != nil {
							b.Fatal(err)
						}
					}
					bt.Close(buf)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(invs)), "ns/entry")
			})
		}
	}
}
