package proto

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/pmixbus/pmixbus/pmix"
)

func sampleInvokes(n int) []Invoke {
	infos := []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("h")), pmix.Required(pmix.NewInfo("x", pmix.Int8(-3)))}
	out := make([]Invoke, n)
	for i := range out {
		out[i] = Invoke{Seq: uint64(i + 1), ID: uint64(i%3 + 1), Name: "h", Code: -201, Info: infos}
		if i%2 == 1 {
			out[i].Source = pmix.Proc{Nspace: "B:job", Rank: pmix.Rank(i)}
			out[i].Results = infos
		}
	}
	return out
}

// TestBatchFrames: entries appended one at a time read back as one frame
// holding them all, in order, with the frames around it intact.
func TestBatchFrames(t *testing.T) {
	invs := sampleInvokes(5)
	dones := []Done{
		{Seq: 1, Status: pmix.EventNoActionTaken},
		{Seq: 2, Status: pmix.EventActionComplete, Results: invs[0].Info, Prior: invs[0].Info, HasPrior: true},
		{Seq: 3, Status: pmix.EventNoActionTaken, Prior: []pmix.Info{}, HasPrior: true},
	}
	var bt Batch
	b, err := AppendFrame(nil, &Frame{Type: TypeReply, Seq: 9})
	if err != nil {
		t.Fatal(err)
	}
	for i := range invs {
		if b, err = bt.AppendInvoke(b, &invs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range dones { // another type closes the open frame
		if b, err = bt.AppendDone(b, &dones[i]); err != nil {
			t.Fatal(err)
		}
	}
	bt.Close(b)
	if b, err = AppendFrame(b, &Frame{Type: TypeReply, Seq: 10}); err != nil {
		t.Fatal(err)
	}
	r := NewReader(bytes.NewReader(b), DefaultMaxFrame)
	var got []*Frame
	for range 4 {
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f)
	}
	if got[0].Seq != 9 || got[3].Seq != 10 {
		t.Fatalf("frames around the batches: %+v %+v", got[0], got[3])
	}
	if got[1].Type != TypeInvokeBatch || !reflect.DeepEqual(got[1].Invokes, normInvokes(invs)) {
		t.Fatalf("invoke batch:\n got %+v\nwant %+v", got[1].Invokes, invs)
	}
	if got[2].Type != TypeInvokeDoneBatch || !reflect.DeepEqual(got[2].Dones, normDones(dones)) {
		t.Fatalf("done batch:\n got %+v\nwant %+v", got[2].Dones, dones)
	}
	// Marshal gives the same frames.
	for _, f := range got[1:3] {
		body, err := f.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		g, err := Unmarshal(body)
		if err != nil || !reflect.DeepEqual(g, f) {
			t.Fatalf("Marshal round trip of %v: %+v %v", f.Type, g, err)
		}
	}
}

// normInvokes is what decoding gives: empty info lists, not nil.
func normInvokes(in []Invoke) []Invoke {
	out := append([]Invoke(nil), in...)
	for i := range out {
		if out[i].Info == nil {
			out[i].Info = []pmix.Info{}
		}
		if out[i].Results == nil {
			out[i].Results = []pmix.Info{}
		}
	}
	return out
}

func normDones(in []Done) []Done {
	out := append([]Done(nil), in...)
	for i := range out {
		if out[i].Results == nil {
			out[i].Results = []pmix.Info{}
		}
	}
	return out
}

// TestBatchSplitsLargeBursts: a batch frame closes past MaxBatchBytes and
// the next entry opens another, so no frame outgrows a reader's limit
// because of batching; every entry arrives, in order.
func TestBatchSplitsLargeBursts(t *testing.T) {
	var bt Batch
	var b []byte
	var err error
	const n = 300
	name := strings.Repeat("n", 1000)
	for i := range n {
		if b, err = bt.AppendInvoke(b, &Invoke{Seq: uint64(i + 1), Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	bt.Close(b)
	r := NewReader(bytes.NewReader(b), MaxBatchBytes+2048)
	var seq uint64
	frames := 0
	for seq < n {
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("after %d entries: %v", seq, err)
		}
		frames++
		for _, inv := range f.Invokes {
			if seq++; inv.Seq != seq {
				t.Fatalf("entry %d has seq %d", seq, inv.Seq)
			}
		}
	}
	if frames < 4 {
		t.Fatalf("%d entries of 1 KB in %d frames", n, frames)
	}
}

// TestBatchRejects: malformed batches are refused with
// PMIX_ERR_UNPACK_FAILURE, among them one claiming more invocations than
// it has bytes.
func TestBatchRejects(t *testing.T) {
	for name, body := range map[string][]byte{
		"count beyond the bytes":   {0x82, 0xa1, 't', 24, 0xa2, 'i', 'v', 0xdd, 0xff, 0xff, 0xff, 0xff, 0x97},
		"entry of 3 fields":        {0x82, 0xa1, 't', 24, 0xa2, 'i', 'v', 0x91, 0x93, 1, 2, 0xa0},
		"done of 5 fields":         {0x82, 0xa1, 't', 25, 0xa2, 'd', 'n', 0x91, 0x95, 1, 2, 0x90, 0xc0, 0xc0},
		"negative seq":             {0x82, 0xa1, 't', 25, 0xa2, 'd', 'n', 0x91, 0x94, 0xff, 2, 0x90, 0xc0},
		"status beyond int32":      {0x82, 0xa1, 't', 25, 0xa2, 'd', 'n', 0x91, 0x94, 1, 0xcf, 1, 0, 0, 0, 0, 0, 0, 0, 0x90, 0xc0},
		"not an array":             {0x82, 0xa1, 't', 24, 0xa2, 'i', 'v', 0x01},
		"source of the wrong kind": {0x82, 0xa1, 't', 24, 0xa2, 'i', 'v', 0x91, 0x97, 1, 1, 0xa0, 0, 0x05, 0x90, 0x90},
	} {
		if _, err := Unmarshal(body); pmix.StatusOf(err) != pmix.ErrUnpackFailure {
			t.Errorf("%s: %v, want PMIX_ERR_UNPACK_FAILURE", name, err)
		}
	}
}

// fanoutEntries are a burst as the agent sends one client in the fan-out
// benchmark: 256 invocations of one handler for events from the host RM,
// and the client's completions of them. Bare, their info is the
// benchmark's: the resolved flag only, the same bytes for every event.
// Rich, each event also has a text, an affected proc and a time of its
// own, so no two infos are alike.
func fanoutEntries(rich bool) ([]Invoke, []Done) {
	bare := []pmix.Info{pmix.NewInfo(pmix.KeyEventResolved, pmix.Bool(false))}
	invs := make([]Invoke, 256)
	dones := make([]Done, 256)
	for i := range invs {
		info := bare
		if rich {
			info = []pmix.Info{
				pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String("node n12 is down")),
				pmix.NewInfo(pmix.KeyEventAffectedProc, pmix.ProcValue(pmix.Proc{Nspace: "A:job1", Rank: 7})),
				pmix.NewInfo(pmix.KeyEventTimestamp, pmix.Time(time.Unix(1790000000, int64(i)))),
				bare[0],
			}
		}
		invs[i] = Invoke{Seq: uint64(1000 + i), ID: 3, Code: -201, Info: info}
		dones[i] = Done{Seq: uint64(1000 + i), Status: pmix.EventNoActionTaken, Prior: []pmix.Info{}, HasPrior: true}
	}
	return invs, dones
}

// BenchmarkDecodeBatch decodes an invoke-batch frame of 256 invocations
// (what a client reads) and an invoke-done-batch of 256 completions (what
// the agent reads), releasing the entries as the client and the agent do:
// per entry, the time and allocations. Named: the bare invocations of a
// named handler for events from a client.
func BenchmarkDecodeBatch(b *testing.B) {
	bare, dones := fanoutEntries(false)
	rich, _ := fanoutEntries(true)
	named := slices.Clone(bare)
	for i := range named {
		named[i].Name, named[i].Source = "on-node-down", pmix.Proc{Nspace: "A:job1", Rank: 3}
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"invokes/bare", appendBatch(b, bare, nil)},
		{"invokes/named", appendBatch(b, named, nil)},
		{"invokes/rich", appendBatch(b, rich, nil)},
		{"dones/bare", appendBatch(b, nil, dones)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				f, err := Unmarshal(tc.body[4:])
				if err != nil {
					b.Fatal(err)
				}
				f.Release()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(bare)), "ns/entry")
		})
	}
}

// appendBatch is invs, then dones, appended as a Batch appends them: one
// frame of each (unless too large), with their length prefixes.
func appendBatch(tb testing.TB, invs []Invoke, dones []Done) []byte {
	var bt Batch
	var b []byte
	var err error
	for i := range invs {
		if b, err = bt.AppendInvoke(b, &invs[i]); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range dones {
		if b, err = bt.AppendDone(b, &dones[i]); err != nil {
			tb.Fatal(err)
		}
	}
	bt.Close(b)
	return b
}

// TestReleaseKeepsWhatEntriesHeld: entries released to the pool are
// decoded into again, while the info lists the first frame's entries held
// stay as they were; decoding a released burst allocates one list per
// distinct info and nothing per completion.
func TestReleaseKeepsWhatEntriesHeld(t *testing.T) {
	encode := func(invs []Invoke, dones []Done) []byte { return appendBatch(t, invs, dones)[4:] }
	first, _ := fanoutEntries(true)
	second := sampleInvokes(300)
	f, err := Unmarshal(encode(first, nil))
	if err != nil {
		t.Fatal(err)
	}
	kept := f.Invokes[0].Info
	f.Release()
	if f.Invokes != nil {
		t.Fatal("Release left the entries in the frame")
	}
	g, err := Unmarshal(encode(second, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.Invokes, normInvokes(second)) {
		t.Fatalf("the second frame decoded into released entries: %+v", g.Invokes[:2])
	}
	if !pmix.InfosEqual(kept, first[0].Info) {
		t.Fatalf("info kept from a released frame changed: %v", kept)
	}
	g.Release()

	if raceEnabled {
		return
	}
	invs, dones := fanoutEntries(false)
	for name, tc := range map[string]struct {
		body []byte
		max  float64
	}{
		"invokes": {encode(invs, nil), 8}, // one info for all
		"dones":   {encode(nil, dones), 8},
	} {
		allocs := testing.AllocsPerRun(20, func() {
			f, err := Unmarshal(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			f.Release()
		})
		if allocs > tc.max {
			t.Errorf("%s: decoding a released burst of %d allocates %.0f times, want at most %.0f", name, len(invs), allocs, tc.max)
		}
	}
}

// TestRepeats: consecutive invocations whose info has the same bytes get
// one decoded list, clipped so that appending to it copies; others, and
// every invocation's results, get their own. A name or a source nspace
// that repeats the last is the same string.
func TestRepeats(t *testing.T) {
	invs := sampleInvokes(6)
	other := []pmix.Info{pmix.NewInfo(pmix.KeyEventResolved, pmix.Bool(true))}
	invs[2].Info = other
	invs[4].Info = []pmix.Info{}
	for i := range invs {
		invs[i].Name = []string{"hdl", "hdl", "", "hdl2", "hdl2", "hdl"}[i]
		invs[i].Source = pmix.Proc{Nspace: []string{"A:j", "A:j", "", "A:j", "B:k", "B:k"}[i], Rank: pmix.Rank(i)}
	}
	invs[2].Source = pmix.Proc{}
	f, err := Unmarshal(appendBatch(t, invs, nil)[4:])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	if !reflect.DeepEqual(f.Invokes, normInvokes(invs)) {
		t.Fatalf("decoded %+v", f.Invokes)
	}
	data := func(i int) *pmix.Info { return unsafe.SliceData(f.Invokes[i].Info) }
	if data(0) != data(1) || data(1) == data(2) || data(2) == data(3) || data(3) == data(5) {
		t.Error("lists shared where the bytes differ, or not shared where they are the same")
	}
	if cap(f.Invokes[0].Info) != len(f.Invokes[0].Info) {
		t.Error("a shared list has room to append into")
	}
	if unsafe.SliceData(f.Invokes[1].Results) == unsafe.SliceData(f.Invokes[3].Results) {
		t.Error("results shared")
	}
	str := func(s string) *byte { return unsafe.StringData(s) }
	inv := f.Invokes
	if str(inv[0].Name) != str(inv[1].Name) || str(inv[3].Name) != str(inv[4].Name) || str(inv[0].Name) == str(inv[5].Name) {
		t.Error("names: a repeated one decoded again, or one after another shared")
	}
	if str(inv[0].Source.Nspace) != str(inv[1].Source.Nspace) || str(inv[4].Source.Nspace) != str(inv[5].Source.Nspace) {
		t.Error("a repeated source nspace decoded again")
	}
}

// TestRecycleGivesAFreshFrame: a frame decoded into a recycled Frame
// holds nothing of the frame before it, and what the recycled frame's
// fields held stays as it was.
func TestRecycleGivesAFreshFrame(t *testing.T) {
	full := &Frame{Type: TypeReply, Seq: 7, Status: pmix.ErrNotFound, Message: "m", ErrorCode: "x.y", Version: 2,
		Nspace: "job", Rank: 3, ID: 9, Info: []pmix.Info{pmix.NewInfo("k", pmix.String("v"))}, Keys: []string{"a"}, Payload: []byte("b")}
	fullBody, err := AppendFrame(nil, full)
	if err != nil {
		t.Fatal(err)
	}
	_, dones := fanoutEntries(false)
	batchBody := appendBatch(t, nil, dones)[4:]
	bare, err := AppendFrame(nil, &Frame{Type: TypeInvokeDone, Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 50 { // the pool may hand any recycled frame to any Unmarshal
		for i, body := range [][]byte{fullBody[4:], batchBody} {
			f, err := Unmarshal(body)
			if err != nil {
				t.Fatal(err)
			}
			info, keys := f.Info, f.Keys
			f.Recycle()
			if i == 0 && (!pmix.InfosEqual(info, full.Info) || !slices.Equal(keys, full.Keys)) {
				t.Fatalf("what a recycled frame held changed: %v %v", info, keys)
			}
		}
		g, err := Unmarshal(bare[4:])
		if err != nil {
			t.Fatal(err)
		}
		if want := (Frame{Type: TypeInvokeDone, Seq: 1}); !reflect.DeepEqual(*g, want) {
			t.Fatalf("decoded into a recycled frame: %+v, want %+v", *g, want)
		}
		g.Recycle()
	}
	if raceEnabled {
		return
	}
	one := appendBatch(t, nil, dones[:1])[4:]
	kept := testing.AllocsPerRun(50, func() {
		f, err := Unmarshal(one)
		if err != nil {
			t.Fatal(err)
		}
		f.Release()
	})
	recycled := testing.AllocsPerRun(50, func() {
		f, err := Unmarshal(one)
		if err != nil {
			t.Fatal(err)
		}
		f.Recycle()
	})
	if recycled >= kept {
		t.Errorf("a completion frame recycled allocates %.0f times, released only %.0f", recycled, kept)
	}
}
