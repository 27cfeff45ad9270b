package pmix

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// The wire form, in msgpack, for clients in any language:
//
//	Proc  = [nspace: str, rank: uint]
//	Info  = [key: str, flags: uint, value: Value]
//	Value = [type: uint, payload]
//
// where the payload by type (numbers as in [Type]) is:
//
//	undef (0)                    nil
//	bool (1)                     bool
//	string (3)                   str
//	int8..int64 (7-10), status (20)   int, range-checked for the type
//	uint8..uint64 (12-15), persistence (30), range (33), rank (40)   uint, range-checked
//	float64 (17)                 float64
//	time (19)                    [seconds since 1970: int, nanoseconds: uint < 1e9]
//	proc (22)                    Proc
//	infos (24)                   array of Info
//	bytes (27)                   bin
//	procs (39)                   array of Proc
//
// Integers may use any msgpack integer encoding; decoders check the value
// fits the declared type. An error is [Status] and message: [status: int,
// message: str].

// MaxNesting bounds how deeply Info and data arrays may nest inside Values on the
// wire, so that hostile input cannot exhaust the stack.
const MaxNesting = 32

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p Proc) EncodeMsgpack(enc *msgpack.Encoder) error { return encodeProc(enc, p) }

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *Proc) DecodeMsgpack(dec *msgpack.Decoder) error { return decodeProc(dec, p) }

// EncodeMsgpack implements msgpack.CustomEncoder.
func (i Info) EncodeMsgpack(enc *msgpack.Encoder) error { return encodeInfo(enc, i) }

// DecodeMsgpack implements msgpack.CustomDecoder.
func (i *Info) DecodeMsgpack(dec *msgpack.Decoder) error {
	kb := keyBufs.Get().(*keyBuf)
	defer keyBufs.Put(kb)
	return decodeInfo(dec, i, kb, 0)
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (v Value) EncodeMsgpack(enc *msgpack.Encoder) error { return encodeValue(enc, v) }

// DecodeMsgpack implements msgpack.CustomDecoder.
func (v *Value) DecodeMsgpack(dec *msgpack.Decoder) error { return decodeValue(dec, v, 0) }

// EncodeMsgpack implements msgpack.CustomEncoder: [status, message], and
// the code third when there is one.
func (e *Error) EncodeMsgpack(enc *msgpack.Encoder) error {
	n := 2
	if e.Code != "" {
		n = 3
	}
	if err := enc.EncodeArrayLen(n); err != nil {
		return err
	}
	if err := enc.EncodeInt(int64(e.Status)); err != nil {
		return err
	}
	if err := enc.EncodeString(e.Message); err != nil {
		return err
	}
	if n == 3 {
		return enc.EncodeString(e.Code)
	}
	return nil
}

// DecodeMsgpack implements msgpack.CustomDecoder. It takes the two-element
// form of peers that send no code.
func (e *Error) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return wireErr("error", err)
	}
	if n != 2 && n != 3 {
		return Errorf(ErrUnpackFailure, "error: want an array of 2 or 3, got %d elements", n)
	}
	st, err := dec.DecodeInt64()
	if err != nil {
		return wireErr("error status", err)
	}
	if st < math.MinInt32 || st > math.MaxInt32 {
		return Errorf(ErrUnpackFailure, "error status %d does not fit a status", st)
	}
	msg, err := dec.DecodeString()
	if err != nil {
		return wireErr("error message", err)
	}
	code := ""
	if n == 3 {
		if code, err = dec.DecodeString(); err != nil {
			return wireErr("error code", err)
		}
	}
	*e = Error{Status: Status(st), Code: code, Message: msg}
	return nil
}

// MarshalInfos encodes infos as a msgpack array of Info.
func MarshalInfos(infos []Info) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := encodeInfos(enc, infos); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// UnmarshalInfos decodes what MarshalInfos encoded. Bytes after the array
// are an error. It returns an *Error with ErrUnpackFailure for malformed
// input; it never panics, whatever the input.
func UnmarshalInfos(b []byte) ([]Info, error) {
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	infos, err := decodeInfos(dec, 0)
	if err != nil {
		return nil, err
	}
	return infos, expectEOF(dec)
}

// MarshalProcs encodes procs as a msgpack array of Proc.
func MarshalProcs(procs []Proc) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := encodeProcs(enc, procs); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// UnmarshalProcs decodes what MarshalProcs encoded, as UnmarshalInfos does.
func UnmarshalProcs(b []byte) ([]Proc, error) {
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	procs, err := decodeProcs(dec)
	if err != nil {
		return nil, err
	}
	return procs, expectEOF(dec)
}

func encodeProc(enc *msgpack.Encoder, p Proc) error {
	if err := enc.EncodeArrayLen(2); err != nil {
		return err
	}
	if err := enc.EncodeString(p.Nspace); err != nil {
		return err
	}
	return enc.EncodeUint(uint64(p.Rank))
}

func decodeProc(dec *msgpack.Decoder, p *Proc) error {
	if err := expectArray(dec, 2, "proc"); err != nil {
		return err
	}
	ns, err := dec.DecodeString()
	if err != nil {
		return wireErr("proc nspace", err)
	}
	r, err := decodeUint(dec, math.MaxUint32, "proc rank")
	if err != nil {
		return err
	}
	*p = Proc{Nspace: ns, Rank: Rank(r)}
	return nil
}

func encodeProcs(enc *msgpack.Encoder, procs []Proc) error {
	if err := enc.EncodeArrayLen(len(procs)); err != nil {
		return err
	}
	for _, p := range procs {
		if err := encodeProc(enc, p); err != nil {
			return err
		}
	}
	return nil
}

func decodeProcs(dec *msgpack.Decoder) ([]Proc, error) {
	n, err := decodeArrayLen(dec, "proc array")
	if err != nil {
		return nil, err
	}
	procs := make([]Proc, 0, min(n, 1024))
	for range n {
		var p Proc
		if err := decodeProc(dec, &p); err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	return procs, nil
}

func encodeInfo(enc *msgpack.Encoder, i Info) error {
	if err := enc.EncodeArrayLen(3); err != nil {
		return err
	}
	if err := enc.EncodeString(i.Key); err != nil {
		return err
	}
	if err := enc.EncodeUint(uint64(i.Flags)); err != nil {
		return err
	}
	return encodeValue(enc, i.Value)
}

func decodeInfo(dec *msgpack.Decoder, i *Info, kb *keyBuf, depth int) error {
	if err := expectArray(dec, 3, "info"); err != nil {
		return err
	}
	key, err := decodeKey(dec, kb)
	if err != nil {
		return wireErr("info key", err)
	}
	flags, err := decodeUint(dec, math.MaxUint32, "info flags")
	if err != nil {
		return err
	}
	var v Value
	if err := decodeValue(dec, &v, depth); err != nil {
		return fmt.Errorf("info %q: %w", key, err)
	}
	*i = Info{Key: key, Flags: Directive(flags), Value: v}
	return nil
}

func encodeInfos(enc *msgpack.Encoder, infos []Info) error {
	if err := enc.EncodeArrayLen(len(infos)); err != nil {
		return err
	}
	for _, i := range infos {
		if err := encodeInfo(enc, i); err != nil {
			return err
		}
	}
	return nil
}

func decodeInfos(dec *msgpack.Decoder, depth int) ([]Info, error) {
	if depth > MaxNesting {
		return nil, Errorf(ErrUnpackFailure, "info arrays nested deeper than %d", MaxNesting)
	}
	n, err := decodeArrayLen(dec, "info array")
	if err != nil {
		return nil, err
	}
	infos := make([]Info, 0, min(n, 256))
	if n == 0 {
		return infos, nil
	}
	kb := keyBufs.Get().(*keyBuf)
	defer keyBufs.Put(kb)
	for range n {
		infos = append(infos, Info{})
		if err := decodeInfo(dec, &infos[len(infos)-1], kb, depth); err != nil {
			return nil, err
		}
	}
	return infos, nil
}

func encodeValue(enc *msgpack.Encoder, v Value) error {
	if !v.typ.Known() {
		return Errorf(ErrUnknownDataType, "cannot encode value of %s", v.typ)
	}
	if err := enc.EncodeArrayLen(2); err != nil {
		return err
	}
	if err := enc.EncodeUint(uint64(v.typ)); err != nil {
		return err
	}
	switch v.typ {
	case TypeUndef:
		return enc.EncodeNil()
	case TypeBool:
		return enc.EncodeBool(v.num != 0)
	case TypeString:
		return enc.EncodeString(v.str)
	case TypeInt8, TypeInt16, TypeInt32, TypeInt64, TypeStatus:
		return enc.EncodeInt(int64(v.num))
	case TypeUint8, TypeUint16, TypeUint32, TypeUint64, TypePersistence, TypeRange, TypeRank:
		return enc.EncodeUint(v.num)
	case TypeFloat64:
		return enc.EncodeFloat64(math.Float64frombits(v.num))
	case TypeTime:
		if err := enc.EncodeArrayLen(2); err != nil {
			return err
		}
		if err := enc.EncodeInt(int64(v.num)); err != nil {
			return err
		}
		return enc.EncodeUint(uint64(v.nsec))
	case TypeProc:
		return encodeProc(enc, Proc{Nspace: v.str, Rank: Rank(v.num)})
	case TypeInfoArray:
		return encodeInfos(enc, v.infos())
	case TypeBytes:
		return enc.EncodeBytes(v.bytes())
	case TypeProcArray:
		return encodeProcs(enc, v.procs())
	case TypeArray:
		// [elem: uint, [Value]]
		if err := enc.EncodeArrayLen(2); err != nil {
			return err
		}
		if err := enc.EncodeUint(v.num); err != nil {
			return err
		}
		if err := enc.EncodeArrayLen(len(v.values())); err != nil {
			return err
		}
		for _, e := range v.values() {
			if err := encodeValue(enc, e); err != nil {
				return err
			}
		}
		return nil
	}
	return Errorf(ErrUnknownDataType, "cannot encode value of %s", v.typ)
}

// intBounds is the range of a signed integer type; ok is false for the
// other types.
func intBounds(t Type) (lo, hi int64, ok bool) {
	switch t {
	case TypeInt8:
		return math.MinInt8, math.MaxInt8, true
	case TypeInt16:
		return math.MinInt16, math.MaxInt16, true
	case TypeInt32, TypeStatus:
		return math.MinInt32, math.MaxInt32, true
	case TypeInt64:
		return math.MinInt64, math.MaxInt64, true
	}
	return 0, 0, false
}

// uintBound is the largest value of an unsigned integer type; ok is false
// for the other types.
func uintBound(t Type) (max uint64, ok bool) {
	switch t {
	case TypeUint8, TypePersistence, TypeRange:
		return math.MaxUint8, true
	case TypeUint16:
		return math.MaxUint16, true
	case TypeUint32, TypeRank:
		return math.MaxUint32, true
	case TypeUint64:
		return math.MaxUint64, true
	}
	return 0, false
}

func decodeValue(dec *msgpack.Decoder, v *Value, depth int) error {
	if err := expectArray(dec, 2, "value"); err != nil {
		return err
	}
	t, err := decodeUint(dec, math.MaxUint16, "value type")
	if err != nil {
		return err
	}
	typ := Type(t)
	out := Value{typ: typ}
	if lo, hi, ok := intBounds(typ); ok {
		n, err := dec.DecodeInt64()
		if err != nil {
			return wireErr(typ.String()+" value", err)
		}
		if n < lo || n > hi {
			return Errorf(ErrUnpackFailure, "%d does not fit %s", n, typ)
		}
		out.num = uint64(n)
		*v = out
		return nil
	}
	if max, ok := uintBound(typ); ok {
		n, err := decodeUint(dec, max, "value")
		if err != nil {
			return Errorf(ErrUnpackFailure, "%s %s", typ, MessageOf(err))
		}
		out.num = n
		*v = out
		return nil
	}
	switch typ {
	case TypeUndef:
		if err := dec.DecodeNil(); err != nil {
			return wireErr("undef value", err)
		}
	case TypeBool:
		b, err := dec.DecodeBool()
		if err != nil {
			return wireErr("bool value", err)
		}
		out = Bool(b)
	case TypeString:
		if out.str, err = dec.DecodeString(); err != nil {
			return wireErr("string value", err)
		}
	case TypeFloat64:
		f, err := dec.DecodeFloat64()
		if err != nil {
			return wireErr("float64 value", err)
		}
		out.num = math.Float64bits(f)
	case TypeTime:
		if err := expectArray(dec, 2, "time"); err != nil {
			return err
		}
		sec, err := dec.DecodeInt64()
		if err != nil {
			return wireErr("time seconds", err)
		}
		nsec, err := decodeUint(dec, 999_999_999, "time nanoseconds")
		if err != nil {
			return err
		}
		out.num, out.nsec = uint64(sec), uint32(nsec)
	case TypeProc:
		var p Proc
		if err := decodeProc(dec, &p); err != nil {
			return err
		}
		out = ProcValue(p)
	case TypeInfoArray:
		infos, err := decodeInfos(dec, depth+1)
		if err != nil {
			return err
		}
		out.list = infos
	case TypeBytes:
		b, err := decodeBytes(dec)
		if err != nil {
			return err
		}
		out.list = b
	case TypeProcArray:
		procs, err := decodeProcs(dec)
		if err != nil {
			return err
		}
		out.list = procs
	case TypeArray:
		if depth > MaxNesting {
			return Errorf(ErrUnpackFailure, "data arrays nested deeper than %d", MaxNesting)
		}
		if err := expectArray(dec, 2, "data array"); err != nil {
			return err
		}
		elem, err := decodeUint(dec, math.MaxUint16, "data array element type")
		if err != nil {
			return err
		}
		n, err := decodeArrayLen(dec, "data array")
		if err != nil {
			return err
		}
		vals := make([]Value, min(n, 256))[:0]
		for range n {
			vals = append(vals, Value{})
			if err := decodeValue(dec, &vals[len(vals)-1], depth+1); err != nil {
				return err
			}
		}
		out.num, out.list = elem, vals
	default:
		return Errorf(ErrUnknownDataType, "unknown value type %d", t)
	}
	*v = out
	return nil
}

// decodeBytes reads a bin (or str) payload growing its buffer as bytes
// arrive, so that a length prefix claiming gigabytes costs nothing unless the
// bytes are really there. (msgpack's DecodeBytes allocates the claimed
// length at once.)
func decodeBytes(dec *msgpack.Decoder) ([]byte, error) {
	n, err := dec.DecodeBytesLen()
	if err != nil {
		return nil, wireErr("bytes value", err)
	}
	b, err := readBytes(dec, n)
	if err != nil {
		return nil, wireErr("bytes value", err)
	}
	return b, nil
}

// readBytes reads n bytes into a buffer it grows as they arrive.
func readBytes(dec *msgpack.Decoder, n int) ([]byte, error) {
	const chunk = 64 << 10
	b := make([]byte, 0, min(max(n, 0), chunk))
	for len(b) < n {
		k := min(n-len(b), chunk)
		b = append(b, make([]byte, k)...)
		if err := dec.ReadFull(b[len(b)-k:]); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// keyBuf is where decodeKey reads a key to look it up in knownKeys. A
// buffer on the stack would escape (msgpack reads through an interface),
// costing the allocation it saves; one is taken from keyBufs for each list.
type keyBuf [32]byte

var keyBufs = sync.Pool{New: func() any { return new(keyBuf) }}

// decodeKey reads an info key, a str (or bin, or nil for "", as
// DecodeString takes). One of the keys this package names costs no
// allocation.
func decodeKey(dec *msgpack.Decoder, kb *keyBuf) (string, error) {
	n, err := dec.DecodeBytesLen()
	if err != nil || n <= 0 {
		return "", err
	}
	if n > len(kb) {
		b, err := readBytes(dec, n)
		return string(b), err
	}
	b := kb[:n]
	if err := dec.ReadFull(b); err != nil {
		return "", err
	}
	if k, ok := knownKeys[string(b)]; ok {
		return k, nil
	}
	return string(b), nil
}

func expectArray(dec *msgpack.Decoder, want int, what string) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return wireErr(what, err)
	}
	if n != want {
		return Errorf(ErrUnpackFailure, "%s: want an array of %d, got %d elements", what, want, n)
	}
	return nil
}

func decodeArrayLen(dec *msgpack.Decoder, what string) (int, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return 0, wireErr(what, err)
	}
	if n < 0 { // msgpack nil: an empty array
		return 0, nil
	}
	return n, nil
}

func decodeUint(dec *msgpack.Decoder, max uint64, what string) (uint64, error) {
	// DecodeUint64 also accepts negative ints by conversion; look first.
	c, err := dec.PeekCode()
	if err != nil {
		return 0, wireErr(what, err)
	}
	var n uint64
	switch {
	case c >= 0xe0: // negative fixint
		return 0, Errorf(ErrUnpackFailure, "%s: negative where unsigned expected", what)
	case c >= 0xd0 && c <= 0xd3: // int8..int64: either sign
		i, err := dec.DecodeInt64()
		if err != nil {
			return 0, wireErr(what, err)
		}
		if i < 0 {
			return 0, Errorf(ErrUnpackFailure, "%s: negative where unsigned expected", what)
		}
		n = uint64(i)
	default:
		n, err = dec.DecodeUint64()
	}
	if err != nil {
		return 0, wireErr(what, err)
	}
	if n > max {
		return 0, Errorf(ErrUnpackFailure, "%s: %d exceeds %d", what, n, max)
	}
	return n, nil
}

func expectEOF(dec *msgpack.Decoder) error {
	if _, err := dec.PeekCode(); !errors.Is(err, io.EOF) {
		return Errorf(ErrUnpackFailure, "trailing bytes after the message")
	}
	return nil
}

func wireErr(what string, err error) error {
	var pe *Error
	if errors.As(err, &pe) {
		return err
	}
	return Errorf(ErrUnpackFailure, "decoding %s: %v", what, err)
}

// EncodeInfos writes infos as a msgpack array of Info, for codecs of
// messages that embed them.
func EncodeInfos(enc *msgpack.Encoder, infos []Info) error { return encodeInfos(enc, infos) }

// DecodeInfos reads what EncodeInfos wrote, with the same guarantees as
// UnmarshalInfos (bounded nesting and allocation, never a panic). A msgpack
// nil decodes as an empty list.
func DecodeInfos(dec *msgpack.Decoder) ([]Info, error) { return decodeInfos(dec, 0) }

// EncodeProcs writes procs as a msgpack array of Proc.
func EncodeProcs(enc *msgpack.Encoder, procs []Proc) error { return encodeProcs(enc, procs) }

// DecodeProcs reads what EncodeProcs wrote.
func DecodeProcs(dec *msgpack.Decoder) ([]Proc, error) { return decodeProcs(dec) }

// DecodeUint reads an unsigned integer no larger than max, refusing negative
// values, with errors that name what was being read.
func DecodeUint(dec *msgpack.Decoder, max uint64, what string) (uint64, error) {
	return decodeUint(dec, max, what)
}
