package proto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pmixbus/pmixbus/pmix"
)

func sampleFrames() map[string]*Frame {
	infos := []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("h")), pmix.Required(pmix.NewInfo("x", pmix.Int8(-3)))}
	return map[string]*Frame{
		"hello":                   {Type: TypeHello, Version: Version, Nspace: "job", Rank: 0, Credential: "c0ffee"},
		"reply ok":                {Type: TypeReply, Seq: 9, ID: 4, Info: infos},
		"reply error":             {Type: TypeReply, Seq: 10, Status: pmix.ErrEventRegistration, Message: "duplicate name h"},
		"register":                {Type: TypeRegister, Seq: 11, Codes: []pmix.Status{-201, -231}, Info: infos},
		"register default":        {Type: TypeRegister, Seq: 12, Codes: []pmix.Status{}},
		"deregister":              {Type: TypeDeregister, Seq: 13, ID: 7},
		"notify":                  {Type: TypeNotify, Seq: 14, Code: pmix.EventNodeDown, Range: pmix.RangeGlobal, Info: infos},
		"notify zero code":        {Type: TypeNotify, Seq: 15, Code: 0, Range: pmix.RangeLocal},
		"finalize":                {Type: TypeFinalize, Seq: 16},
		"invoke":                  {Type: TypeInvoke, Seq: 17, ID: 3, Name: "h", Code: -201, Source: pmix.Proc{Nspace: "B:job", Rank: 2}, Info: infos, Results: infos},
		"invoke-done":             {Type: TypeInvokeDone, Seq: 17, Status: pmix.EventActionComplete, Results: infos, Prior: infos, HasPrior: true},
		"invoke-done all removed": {Type: TypeInvokeDone, Seq: 18, Status: pmix.EventNoActionTaken, Prior: []pmix.Info{}, HasPrior: true},
		"error":                   {Type: TypeError, Status: pmix.ErrUnpackFailure, Message: "bad frame"},
		"error with a code":       {Type: TypeError, Status: pmix.ErrInvalidOperation, ErrorCode: "proto.already_attached", Message: "client already attached: job.0"},
		"publish":                 {Type: TypePublish, Seq: 19, Info: append(infos, pmix.NewInfo(pmix.KeyRange, pmix.RangeValue(pmix.RangeGlobal)))},
		"lookup":                  {Type: TypeLookup, Seq: 20, Keys: []string{"a", "pmix.b", ""}, Info: infos},
		"lookup reply":            {Type: TypeReply, Seq: 20, Status: pmix.ErrPartialSuccess, Message: "1 of 2", Data: []PData{{Proc: pmix.Proc{Nspace: "B:job", Rank: 3}, Key: "a", Value: pmix.String("A:job1")}, {Key: "b", Value: pmix.Infos(infos)}}},
		"unpublish":               {Type: TypeUnpublish, Seq: 21, Keys: []string{"a"}},
		"unpublish all":           {Type: TypeUnpublish, Seq: 22, Info: infos},
		"fence":                   {Type: TypeFence, Seq: 23, Procs: []pmix.Proc{{Nspace: "job", Rank: pmix.RankWildcard}, {Nspace: "B:viz", Rank: 0}}, Info: infos},
		"commit":                  {Type: TypeCommit, Seq: 24, Puts: []Put{{Scope: pmix.ScopeGlobal, Key: "a", Value: pmix.Uint32(7)}, {Scope: pmix.ScopeLocal, Key: "b", Value: pmix.Bytes([]byte{1, 2})}}},
		"connect":                 {Type: TypeConnect, Seq: 26, Procs: []pmix.Proc{{Nspace: "B:viz", Rank: pmix.RankWildcard}}, Info: infos},
		"connect reply":           {Type: TypeReply, Seq: 26, Nspace: "A:cnct.x.1", Rank: 3},
		"disconnect":              {Type: TypeDisconnect, Seq: 27, Nspace: "A:cnct.x.1", Info: infos},
		"abort":                   {Type: TypeAbort, Seq: 28, Status: 3, Message: "giving up", Procs: []pmix.Proc{{Nspace: "job", Rank: 2}}},
		"abort whole job":         {Type: TypeAbort, Seq: 29},
		"log":                     {Type: TypeLog, Seq: 30, Info: []pmix.Info{pmix.NewInfo(pmix.KeyLogStderr, pmix.String("help!\n"))}, Results: []pmix.Info{pmix.NewInfo(pmix.KeyLogKey, pmix.String("help-x.txt")), pmix.NewInfo(pmix.KeyLogVal, pmix.String("topic"))}},
		"get":                     {Type: TypeGet, Seq: 25, Source: pmix.Proc{Nspace: "B:viz", Rank: 0}, Keys: []string{"a"}, Info: infos},
		"iof-push":                {Type: TypeIOFPush, Seq: 30, Procs: []pmix.Proc{{Nspace: "job", Rank: pmix.RankWildcard}}, Payload: []byte("line\n\x00\xff")},
		"iof-push eof":            {Type: TypeIOFPush, Seq: 31, Procs: []pmix.Proc{{Nspace: "job", Rank: 0}}, Info: []pmix.Info{pmix.NewInfo(pmix.KeyIOFComplete, pmix.Bool(true))}},
		"iof-pull":                {Type: TypeIOFPull, Seq: 32, Procs: []pmix.Proc{{Nspace: "B:viz", Rank: 1}}, Channels: 0x6},
		"iof-deregister":          {Type: TypeIOFDeregister, Seq: 33, ID: 4},
		"invoke-batch": {Type: TypeInvokeBatch, Invokes: []Invoke{
			{Seq: 17, ID: 3, Name: "h", Code: -201, Source: pmix.Proc{Nspace: "B:job", Rank: 2}, Info: infos, Results: infos},
			{Seq: 18, ID: 4, Code: -201, Info: infos},
		}},
		"invoke-batch empty": {Type: TypeInvokeBatch, Invokes: []Invoke{}},
		"invoke-done-batch": {Type: TypeInvokeDoneBatch, Dones: []Done{
			{Seq: 17, Status: pmix.EventActionComplete, Results: infos, Prior: infos, HasPrior: true},
			{Seq: 18, Status: pmix.EventNoActionTaken, Prior: []pmix.Info{}, HasPrior: true},
			{Seq: 19, Status: pmix.EventNoActionTaken},
		}},
		"iof-data": {Type: TypeIOFData, Seq: 7, ID: 4, Source: pmix.Proc{Nspace: "B:viz", Rank: 1}, Channels: 0x2, Payload: []byte("out\n"), Info: []pmix.Info{pmix.NewInfo(pmix.KeyIOFComplete, pmix.Bool(true))}},
	}
}

func TestFrameRoundTrip(t *testing.T) {
	for name, f := range sampleFrames() {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteFrame(&buf, f); err != nil {
				t.Fatal(err)
			}
			got, err := ReadFrame(&buf, DefaultMaxFrame)
			if err != nil {
				t.Fatal(err)
			}
			if !framesEqual(f, got) {
				t.Fatalf("round trip:\n in %+v\nout %+v", f, got)
			}
		})
	}
}

func framesEqual(a, b *Frame) bool {
	ca, cb := *a, *b
	if !pmix.InfosEqual(ca.Info, cb.Info) || !pmix.InfosEqual(ca.Results, cb.Results) || !pmix.InfosEqual(ca.Prior, cb.Prior) {
		return false
	}
	if len(ca.Codes) != len(cb.Codes) {
		return false
	}
	for i := range ca.Codes {
		if ca.Codes[i] != cb.Codes[i] {
			return false
		}
	}
	if !slices.Equal(ca.Keys, cb.Keys) || len(ca.Data) != len(cb.Data) {
		return false
	}
	for i := range ca.Data {
		da, db := ca.Data[i], cb.Data[i]
		if da.Proc != db.Proc || da.Key != db.Key || !da.Value.Equal(db.Value) {
			return false
		}
	}
	ca.Info, cb.Info, ca.Results, cb.Results, ca.Prior, cb.Prior, ca.Codes, cb.Codes = nil, nil, nil, nil, nil, nil, nil, nil
	ca.Keys, cb.Keys, ca.Data, cb.Data = nil, nil, nil, nil
	if !slices.Equal(ca.Procs, cb.Procs) || len(ca.Puts) != len(cb.Puts) {
		return false
	}
	for i := range ca.Puts {
		pa, pb := ca.Puts[i], cb.Puts[i]
		if pa.Scope != pb.Scope || pa.Key != pb.Key || !pa.Value.Equal(pb.Value) {
			return false
		}
	}
	ca.Procs, cb.Procs, ca.Puts, cb.Puts = nil, nil, nil, nil
	if len(ca.Invokes) != len(cb.Invokes) || len(ca.Dones) != len(cb.Dones) {
		return false
	}
	for i := range ca.Invokes {
		ia, ib := ca.Invokes[i], cb.Invokes[i]
		if !pmix.InfosEqual(ia.Info, ib.Info) || !pmix.InfosEqual(ia.Results, ib.Results) {
			return false
		}
		if ia.Seq != ib.Seq || ia.ID != ib.ID || ia.Name != ib.Name || ia.Code != ib.Code || ia.Source != ib.Source {
			return false
		}
	}
	for i := range ca.Dones {
		da, db := ca.Dones[i], cb.Dones[i]
		if !pmix.InfosEqual(da.Results, db.Results) || !pmix.InfosEqual(da.Prior, db.Prior) || da.HasPrior != db.HasPrior ||
			da.Seq != db.Seq || da.Status != db.Status {
			return false
		}
	}
	ca.Invokes, cb.Invokes, ca.Dones, cb.Dones = nil, nil, nil, nil
	return reflect.DeepEqual(ca, cb)
}

// TestFrameErr: an error set on a frame is the same error, by status and
// by sentinel, when the receiver reads it back; a frame of a peer that
// sends no code still gives an error of the right status.
func TestFrameErr(t *testing.T) {
	other := pmix.NewCodedError(pmix.ErrInvalidOperation, "proto.test_other", "other")
	sent := fmt.Errorf("%w: job.0", ErrAlreadyAttached)
	f := &Frame{Type: TypeError}
	f.SetErr(sent)
	if f.Status != pmix.ErrInvalidOperation || f.ErrorCode != ErrAlreadyAttached.Code || f.Message != "client already attached: job.0" {
		t.Fatalf("SetErr: %+v", f)
	}
	b, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	got := back.Err()
	if !errors.Is(got, ErrAlreadyAttached) || !errors.Is(got, pmix.ErrInvalidOperation) || errors.Is(got, other) {
		t.Fatalf("decoded %v lost its identity", got)
	}
	if got.Error() != "client already attached: job.0 (PMIX_ERR_INVALID_OPERATION)" {
		t.Errorf("decoded text %q", got.Error())
	}
	old, err := Unmarshal(mustMarshal(t, map[string]any{"t": 9, "st": int32(pmix.ErrInvalidOperation), "m": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Err(); !errors.Is(err, pmix.ErrInvalidOperation) || errors.Is(err, ErrAlreadyAttached) {
		t.Errorf("codeless error %v", err)
	}
	if (&Frame{Type: TypeReply}).Err() != nil {
		t.Error("a successful reply has an error")
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReadFrameLimits(t *testing.T) {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 1<<30)
	_, err := ReadFrame(bytes.NewReader(hdr[:]), DefaultMaxFrame)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	binary.BigEndian.PutUint32(hdr[:], 10)
	_, err = ReadFrame(bytes.NewReader(append(hdr[:], 1, 2)), DefaultMaxFrame)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(nil), DefaultMaxFrame); !errors.Is(err, io.EOF) {
		t.Fatalf("empty: %v", err)
	}
}

func TestUnmarshalRejects(t *testing.T) {
	enc := func(v any) []byte { b, _ := msgpack.Marshal(v); return b }
	cases := map[string][]byte{
		"not a map":      enc([]int{1}),
		"no type":        enc(map[string]any{"s": 1}),
		"type not uint":  enc(map[string]any{"t": "x"}),
		"negative seq":   enc(map[string]any{"t": 1, "s": -1}),
		"unknown nested": enc(map[string]any{"t": 1, "zz": []int{1}}),
		"bad infos":      enc(map[string]any{"t": 1, "in": "x"}),
		"status too big": enc(map[string]any{"t": 2, "st": int64(1) << 40}),
		"trailing":       append(enc(map[string]any{"t": 1}), 0xc0),
		"keys not strs":  enc(map[string]any{"t": 11, "ks": []int{1}}),
		"code not str":   enc(map[string]any{"t": 9, "ec": 5}),
		"data not array": enc(map[string]any{"t": 2, "pd": "x"}),
		"data short":     enc(map[string]any{"t": 2, "pd": []any{[]any{[]any{"ns", 1}, "k"}}}),
		"data bad proc":  enc(map[string]any{"t": 2, "pd": []any{[]any{"ns", "k", []any{3, "v"}}}}),
		"empty":          {},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Unmarshal(b); !errors.Is(err, pmix.ErrUnpackFailure) {
				t.Fatalf("got %v", err)
			}
		})
	}
	f, err := Unmarshal(enc(map[string]any{"t": 1, "future": 3}))
	if err != nil || f.Type != TypeHello {
		t.Fatalf("unknown scalar key not skipped: %v", err)
	}
}

func FuzzReadFrame(f *testing.F) {
	for _, fr := range sampleFrames() {
		var buf bytes.Buffer
		if err := WriteFrame(&buf, fr); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr *Frame
		var err error
		read := func() { fr, err = ReadFrame(bytes.NewReader(b), 1<<16) }
		if n := allocatedBy(allocBound(len(b)), read); n > allocBound(len(b)) {
			t.Fatalf("reading %d bytes allocated %d KiB", len(b), n>>10)
		}
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := WriteFrame(&buf, fr); err != nil {
			t.Fatalf("decoded frame does not encode: %v", err)
		}
		back, err := ReadFrame(&buf, 1<<20)
		if err != nil {
			t.Fatalf("re-encoded frame does not decode: %v", err)
		}
		if !framesEqual(fr, back) {
			t.Fatalf("not the identity:\n%+v\n%+v", fr, back)
		}
	})
}

// TestHelloFitsMaxHelloFrame: the largest hello a client sends (the
// longest nspace, the largest seq and rank, a 128-byte credential) stays well
// within the limit the agent applies before hello.
func TestHelloFitsMaxHelloFrame(t *testing.T) {
	f := &Frame{Type: TypeHello, Seq: math.MaxUint64, Version: Version, Nspace: strings.Repeat("n", pmix.MaxNspaceLen),
		Rank: pmix.RankUndef, Credential: strings.Repeat("c", 128)}
	b, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if len(b)*4 > MaxHelloFrame {
		t.Fatalf("a hello takes %d bytes, more than a quarter of MaxHelloFrame (%d)", len(b), MaxHelloFrame)
	}
}
