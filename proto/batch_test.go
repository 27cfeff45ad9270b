package proto

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

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
