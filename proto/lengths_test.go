package proto

import (
	"bytes"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pmixbus/pmixbus/pmix"
)

func TestCheckLengths(t *testing.T) {
	valid := map[string]any{
		"nil": nil, "fixint": 7, "negative": -5, "uint64": uint64(1) << 63, "float": 1.5,
		"str8": string(make([]byte, 40)), "str16": string(make([]byte, 300)), "bin": []byte{1, 2, 3},
		"array16": make([]int, 20), "map": map[string]any{"a": []any{1, "b", map[string]int{"c": 3}}},
		"time ext": time.Unix(1, 2), "empty array": []int{},
	}
	for name, v := range valid {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := valueLen(b); err != nil || n != len(b) {
			t.Errorf("%s % x: length %d, %v; want %d", name, b, n, err, len(b))
		}
		for cut := range len(b) {
			if err := CheckLengths(b[:cut]); pmix.StatusOf(err) != pmix.ErrUnpackFailure {
				t.Errorf("%s cut to %d bytes: %v", name, cut, err)
			}
		}
		if n, err := valueLen(append(b, 0xc1)); err != nil || n != len(b) {
			t.Errorf("%s with a trailing byte: length %d, %v", name, n, err)
		}
	}
	invalid := map[string][]byte{
		"empty":             {},
		"never used":        {0xc1},
		"str32 claim":       {0xdb, 0xff, 0xff, 0xff, 0xff, 'a'},
		"bin32 claim":       {0xc6, 0x00, 0x00, 0x00, 0x02, 'a'},
		"ext32 claim":       {0xc9, 0x00, 0x00, 0x00, 0x01, 0x05},
		"fixext short":      {0xd8, 0x05, 1, 2, 3},
		"array32 claim":     {0xdd, 0x00, 0x00, 0x00, 0x03, 1, 2},
		"map16 claim":       {0xde, 0x00, 0x02, 1, 2, 3},
		"nested claim":      {0x91, 0x91, 0xdc, 0xff, 0xff},
		"length cut":        {0xda, 0x01},
		"fixstr claim":      {0xa3, 'a', 'b'},
		"uint64 cut":        {0xcf, 1, 2, 3},
		"never used nested": {0x92, 0x01, 0xc1},
	}
	for name, b := range invalid {
		if err := CheckLengths(b); pmix.StatusOf(err) != pmix.ErrUnpackFailure {
			t.Errorf("%s % x: %v, want an unpack failure", name, b, err)
		}
	}
}

// FuzzCheckLengths: CheckLengths passes exactly what msgpack can skip, and
// measures the value as msgpack reads it.
func FuzzCheckLengths(f *testing.F) {
	for _, fr := range sampleFrames() {
		b, err := fr.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, b := range lyingBodies() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := valueLen(b)
		if err == nil && CheckLengths(b[:n]) != nil {
			t.Fatalf("the value alone fails: %v", CheckLengths(b[:n]))
		}
		r := bytes.NewReader(b)
		serr := msgpack.NewDecoder(r).Skip()
		switch {
		case (err == nil) != (serr == nil):
			t.Fatalf("CheckLengths says %v, msgpack says %v", err, serr)
		case err == nil && n != len(b)-r.Len():
			t.Fatalf("CheckLengths measures %d bytes, msgpack read %d", n, len(b)-r.Len())
		}
	})
}
