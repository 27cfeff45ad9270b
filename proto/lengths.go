package proto

import (
	"encoding/binary"

	"github.com/pmixbus/pmixbus/pmix"
)

// CheckLengths reports whether b starts with one complete msgpack value
// whose every length fits in the bytes that follow it: a str, bin or ext
// no longer than what remains, and an array or map with no more elements
// than bytes remain (each element takes at least one). Bytes after the
// value are not looked at.
//
// Run it before decoding bytes from anyone untrusted with
// github.com/vmihailenco/msgpack/v5: the library allocates what a header
// claims before it reads, 1 MiB at a time for a str, the whole claim for
// an array it decodes by reflection, and a pooled decoder keeps a buffer
// grown that way even when the read then fails. Once CheckLengths passes,
// decoding b allocates in proportion to len(b).
//
// One msgpack call reads past the value CheckLengths measured: DecodeMapLen
// takes an ext for a header and goes on with the map in its payload and
// beyond. Refuse ext codes before calling it.
//
// It walks b once without recursion, so nesting costs it nothing. It
// returns an *pmix.Error with ErrUnpackFailure.
func CheckLengths(b []byte) error {
	_, err := valueLen(b)
	return err
}

// valueLen is the length of the msgpack value b starts with, if CheckLengths
// would pass it.
func valueLen(b []byte) (int, error) {
	pending := 1 // values still to walk
	i := 0
	for pending > 0 {
		if i >= len(b) {
			return 0, pmix.Errorf(pmix.ErrUnpackFailure, "msgpack: %d bytes end inside a value", len(b))
		}
		at, h := i, headers[b[i]]
		i++
		pending--
		n := uint64(h.n)
		if h.width > 0 {
			if len(b)-i < int(h.width) {
				return 0, pmix.Errorf(pmix.ErrUnpackFailure, "msgpack: byte %d: header of 0x%02x cut short", at, b[at])
			}
			switch h.width {
			case 1:
				n += uint64(b[i])
			case 2:
				n += uint64(binary.BigEndian.Uint16(b[i:]))
			default:
				n += uint64(binary.BigEndian.Uint32(b[i:]))
			}
			i += int(h.width)
		}
		rest := uint64(len(b) - i)
		switch h.kind {
		case payload:
			if n > rest {
				return 0, pmix.Errorf(pmix.ErrUnpackFailure, "msgpack: byte %d claims %d bytes, %d remain", at, n, rest)
			}
			i += int(n)
		case dict:
			n *= 2
			fallthrough
		case array:
			if uint64(pending)+n > rest {
				return 0, pmix.Errorf(pmix.ErrUnpackFailure, "msgpack: byte %d claims %d elements, %d bytes remain", at, n, rest)
			}
			pending += int(n)
		default:
			return 0, pmix.Errorf(pmix.ErrUnpackFailure, "msgpack: byte %d: code 0xc1 is never used", at)
		}
	}
	return i, nil
}

type headerKind uint8

const (
	invalid headerKind = iota // 0xc1
	payload                   // n bytes follow the header
	array                     // n values follow
	dict                      // n key-value pairs follow
)

// header is how a msgpack code goes on: a big-endian length of width
// bytes, if any, added to n, then what kind says.
type header struct {
	kind  headerKind
	width uint8
	n     uint8 // the fixed size or count; an ext's type byte
}

// headers is the header of every code.
var headers = func() (t [256]header) {
	for c := range t {
		switch {
		case c <= 0x7f || c >= 0xe0: // positive and negative fixint
			t[c] = header{kind: payload}
		case c <= 0x8f:
			t[c] = header{kind: dict, n: uint8(c & 0x0f)}
		case c <= 0x9f:
			t[c] = header{kind: array, n: uint8(c & 0x0f)}
		case c <= 0xbf:
			t[c] = header{kind: payload, n: uint8(c & 0x1f)}
		}
	}
	for c, h := range wideHeaders {
		t[c] = h
	}
	return t
}()

// wideHeaders are the codes from 0xc0 on but 0xc1 (never used) and the
// negative fixints.
var wideHeaders = map[byte]header{
	0xc0: {kind: payload}, 0xc2: {kind: payload}, 0xc3: {kind: payload}, // nil, false, true
	0xc4: {kind: payload, width: 1}, 0xc5: {kind: payload, width: 2}, 0xc6: {kind: payload, width: 4}, // bin
	0xc7: {kind: payload, width: 1, n: 1}, 0xc8: {kind: payload, width: 2, n: 1}, 0xc9: {kind: payload, width: 4, n: 1}, // ext
	0xca: {kind: payload, n: 4}, 0xcb: {kind: payload, n: 8}, // float32, float64
	0xcc: {kind: payload, n: 1}, 0xcd: {kind: payload, n: 2}, 0xce: {kind: payload, n: 4}, 0xcf: {kind: payload, n: 8}, // uint
	0xd0: {kind: payload, n: 1}, 0xd1: {kind: payload, n: 2}, 0xd2: {kind: payload, n: 4}, 0xd3: {kind: payload, n: 8}, // int
	0xd4: {kind: payload, n: 2}, 0xd5: {kind: payload, n: 3}, 0xd6: {kind: payload, n: 5}, // fixext: type and data
	0xd7: {kind: payload, n: 9}, 0xd8: {kind: payload, n: 17},
	0xd9: {kind: payload, width: 1}, 0xda: {kind: payload, width: 2}, 0xdb: {kind: payload, width: 4}, // str
	0xdc: {kind: array, width: 2}, 0xdd: {kind: array, width: 4},
	0xde: {kind: dict, width: 2}, 0xdf: {kind: dict, width: 4},
}
