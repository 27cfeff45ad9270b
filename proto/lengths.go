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
		at, c := i, b[i]
		i++
		pending--
		h := headers[c]
		if h.kind == invalid {
			return 0, pmix.Errorf(pmix.ErrUnpackFailure, "msgpack: byte %d: code 0x%02x is never used", at, c)
		}
		if len(b)-i < h.width {
			return 0, pmix.Errorf(pmix.ErrUnpackFailure, "msgpack: byte %d: header of 0x%02x cut short", at, c)
		}
		n := h.n
		switch h.width {
		case 1:
			n = uint64(b[i])
		case 2:
			n = uint64(binary.BigEndian.Uint16(b[i:]))
		case 4:
			n = uint64(binary.BigEndian.Uint32(b[i:]))
		}
		i += h.width
		rest := uint64(len(b) - i)
		switch h.kind {
		case payload:
			if n+uint64(h.skip) > rest {
				return 0, pmix.Errorf(pmix.ErrUnpackFailure, "msgpack: byte %d claims %d bytes, %d remain", at, n+uint64(h.skip), rest)
			}
			i += int(n) + h.skip
		case array, dict:
			if h.kind == dict {
				n *= 2
			}
			if uint64(pending)+n > rest {
				return 0, pmix.Errorf(pmix.ErrUnpackFailure, "msgpack: byte %d claims %d elements, %d bytes remain", at, n, rest)
			}
			pending += int(n)
		}
	}
	return i, nil
}

type headerKind uint8

const (
	invalid headerKind = iota
	payload            // n bytes follow the header (and skip more: an ext's type)
	array              // n values follow
	dict               // n key-value pairs follow
)

// header is how a msgpack code is followed: a length of width bytes (or,
// with width 0, the fixed n), then what kind says.
type header struct {
	kind  headerKind
	width int
	n     uint64
	skip  int
}

// headers is the header of every code.
var headers = func() (t [256]header) {
	for c := range t {
		t[c] = fixHeader(byte(c))
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
	0xc7: {kind: payload, width: 1, skip: 1}, 0xc8: {kind: payload, width: 2, skip: 1}, 0xc9: {kind: payload, width: 4, skip: 1}, // ext
	0xca: {kind: payload, n: 4}, 0xcb: {kind: payload, n: 8}, // float32, float64
	0xcc: {kind: payload, n: 1}, 0xcd: {kind: payload, n: 2}, 0xce: {kind: payload, n: 4}, 0xcf: {kind: payload, n: 8}, // uint
	0xd0: {kind: payload, n: 1}, 0xd1: {kind: payload, n: 2}, 0xd2: {kind: payload, n: 4}, 0xd3: {kind: payload, n: 8}, // int
	0xd4: {kind: payload, n: 1, skip: 1}, 0xd5: {kind: payload, n: 2, skip: 1}, 0xd6: {kind: payload, n: 4, skip: 1}, // fixext
	0xd7: {kind: payload, n: 8, skip: 1}, 0xd8: {kind: payload, n: 16, skip: 1},
	0xd9: {kind: payload, width: 1}, 0xda: {kind: payload, width: 2}, 0xdb: {kind: payload, width: 4}, // str
	0xdc: {kind: array, width: 2}, 0xdd: {kind: array, width: 4},
	0xde: {kind: dict, width: 2}, 0xdf: {kind: dict, width: 4},
}

// fixHeader is the header of a code that carries its own length; others
// are invalid until wideHeaders says otherwise.
func fixHeader(c byte) header {
	switch {
	case c <= 0x7f || c >= 0xe0: // positive and negative fixint
		return header{kind: payload}
	case c <= 0x8f:
		return header{kind: dict, n: uint64(c & 0x0f)}
	case c <= 0x9f:
		return header{kind: array, n: uint64(c & 0x0f)}
	case c <= 0xbf:
		return header{kind: payload, n: uint64(c & 0x1f)}
	}
	return header{}
}
