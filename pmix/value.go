package pmix

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Type is the type of a [Value]. The numbers are OpenPMIx's
// pmix_data_type_t, so they mean the same on the wire as in PMIx logs.
type Type uint16

// Value types. A Value remembers its type exactly: an Int8 stays an Int8
// across the wire.
const (
	TypeUndef       Type = 0
	TypeBool        Type = 1
	TypeString      Type = 3
	TypeInt8        Type = 7
	TypeInt16       Type = 8
	TypeInt32       Type = 9
	TypeInt64       Type = 10
	TypeUint8       Type = 12
	TypeUint16      Type = 13
	TypeUint32      Type = 14
	TypeUint64      Type = 15
	TypeFloat64     Type = 17 // PMIX_DOUBLE
	TypeTime        Type = 19
	TypeStatus      Type = 20
	TypeProc        Type = 22
	TypeInfoArray   Type = 24 // PMIX_INFO, used here for a []Info
	TypeBytes       Type = 27 // PMIX_BYTE_OBJECT
	TypePersistence Type = 30
	TypeRange       Type = 33 // PMIX_DATA_RANGE
	TypeProcArray   Type = 39 // PMIX_DATA_ARRAY of PMIX_PROC
	TypeRank        Type = 40 // PMIX_PROC_RANK
	// TypeArray is a PMIX_DATA_ARRAY of any other element type (Array):
	// pmixbus's own wire number, beyond OpenPMIx's types.
	TypeArray Type = 1039
)

// ElemValue is the element type of an [Array] whose elements are values
// of any type each (OpenPMIx's PMIX_VALUE).
const ElemValue Type = 21

var typeNames = map[Type]string{
	TypeUndef: "undef", TypeBool: "bool", TypeString: "string",
	TypeInt8: "int8", TypeInt16: "int16", TypeInt32: "int32", TypeInt64: "int64",
	TypeUint8: "uint8", TypeUint16: "uint16", TypeUint32: "uint32", TypeUint64: "uint64",
	TypeFloat64: "float64", TypeTime: "time", TypeStatus: "status", TypeProc: "proc",
	TypeInfoArray: "infos", TypeBytes: "bytes", TypePersistence: "persistence",
	TypeRange: "range", TypeProcArray: "procs", TypeRank: "rank", TypeArray: "array",
}

// String returns a short lower-case name ("int32", "procs").
func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// Known reports whether t is a type this package can carry.
func (t Type) Known() bool { _, ok := typeNames[t]; return ok }

// Value is one typed PMIx value (pmix_value_t). The zero Value is TypeUndef.
// Build one with the constructors (String, Int32, Procs, …) and read it with
// the accessors, which report whether the type matched.
//
// It is small (48 bytes) because an event's info is copied per handler
// and per client it reaches: the rarer lists share one field.
type Value struct {
	_    [0]func() // not comparable: list may hold a slice
	typ  Type
	nsec uint32 // time nanoseconds
	num  uint64 // bool, ints (two's complement), float bits, status, range, persistence, rank, time seconds
	str  string // string, proc nspace
	list any    // []byte, []Proc or []Info, by typ
}

// The lists of the types that have one; nil for the others.
func (v *Value) bytes() []byte   { b, _ := v.list.([]byte); return b }
func (v *Value) values() []Value { e, _ := v.list.([]Value); return e }
func (v *Value) procs() []Proc   { p, _ := v.list.([]Proc); return p }
func (v *Value) infos() []Info   { i, _ := v.list.([]Info); return i }

// Constructors.

func Bool(b bool) Value {
	v := Value{typ: TypeBool}
	if b {
		v.num = 1
	}
	return v
}
func String(s string) Value            { return Value{typ: TypeString, str: s} }
func Int8(n int8) Value                { return Value{typ: TypeInt8, num: uint64(n)} }
func Int16(n int16) Value              { return Value{typ: TypeInt16, num: uint64(n)} }
func Int32(n int32) Value              { return Value{typ: TypeInt32, num: uint64(n)} }
func Int64(n int64) Value              { return Value{typ: TypeInt64, num: uint64(n)} }
func Uint8(n uint8) Value              { return Value{typ: TypeUint8, num: uint64(n)} }
func Uint16(n uint16) Value            { return Value{typ: TypeUint16, num: uint64(n)} }
func Uint32(n uint32) Value            { return Value{typ: TypeUint32, num: uint64(n)} }
func Uint64(n uint64) Value            { return Value{typ: TypeUint64, num: n} }
func Float64(f float64) Value          { return Value{typ: TypeFloat64, num: math.Float64bits(f)} }
func StatusValue(s Status) Value       { return Value{typ: TypeStatus, num: uint64(int64(s))} }
func RangeValue(r Range) Value         { return Value{typ: TypeRange, num: uint64(r)} }
func PersistValue(p Persistence) Value { return Value{typ: TypePersistence, num: uint64(p)} }
func RankValue(r Rank) Value           { return Value{typ: TypeRank, num: uint64(r)} }
func ProcValue(p Proc) Value           { return Value{typ: TypeProc, str: p.Nspace, num: uint64(p.Rank)} }

// Bytes copies b.
func Bytes(b []byte) Value { return Value{typ: TypeBytes, list: bytes.Clone(b)} }

// Procs copies ps.
func Procs(ps []Proc) Value { return Value{typ: TypeProcArray, list: slices.Clone(ps)} }

// Infos copies the slice (not deeply: Values are immutable).
func Infos(is []Info) Value { return Value{typ: TypeInfoArray, list: slices.Clone(is)} }

// Array is a PMIX_DATA_ARRAY of another element type than info and proc
// (Infos, Procs): elem is the C library's pmix_data_type_t of the
// elements (PMIX_SIZE is 4, PMIX_INT 6, PMIX_FLOAT 16: types a Value
// carries as another of the same family), ElemValue for values of any
// type each; vals are the elements, each of the type elem travels as
// (Uint64 for PMIX_SIZE, Int32 for PMIX_INT, Float64 for PMIX_FLOAT…).
// It copies the slice.
func Array(elem Type, vals []Value) Value {
	return Value{typ: TypeArray, num: uint64(elem), list: slices.Clone(vals)}
}

// Time keeps the instant to the nanosecond; the location is not kept
// (decoded times are UTC) and neither is the monotonic reading.
func Time(t time.Time) Value {
	return Value{typ: TypeTime, num: uint64(t.Unix()), nsec: uint32(t.Nanosecond())}
}

// Type returns v's type.
func (v Value) Type() Type { return v.typ }

// IsUndef reports whether v holds no value.
func (v Value) IsUndef() bool { return v.typ == TypeUndef }

// Accessors: each returns the value and whether v has that type.

func (v Value) Bool() (bool, bool)       { return v.num != 0, v.typ == TypeBool }
func (v Value) Str() (string, bool)      { return v.str, v.typ == TypeString }
func (v Value) Float64() (float64, bool) { return math.Float64frombits(v.num), v.typ == TypeFloat64 }
func (v Value) Status() (Status, bool)   { return Status(int64(v.num)), v.typ == TypeStatus }
func (v Value) Range() (Range, bool)     { return Range(v.num), v.typ == TypeRange }
func (v Value) Persistence() (Persistence, bool) {
	return Persistence(v.num), v.typ == TypePersistence
}
func (v Value) Rank() (Rank, bool)    { return Rank(v.num), v.typ == TypeRank }
func (v Value) Proc() (Proc, bool)    { return Proc{Nspace: v.str, Rank: Rank(v.num)}, v.typ == TypeProc }
func (v Value) Bytes() ([]byte, bool) { return v.bytes(), v.typ == TypeBytes }

// Procs returns the procs of a TypeProcArray value, or the single proc of a
// TypeProc value as a one-element slice. Do not modify the result.
func (v Value) Procs() ([]Proc, bool) {
	switch v.typ {
	case TypeProcArray:
		return v.procs(), true
	case TypeProc:
		return []Proc{{Nspace: v.str, Rank: Rank(v.num)}}, true
	}
	return nil, false
}

// Infos returns the infos of a TypeInfoArray value. Do not modify the result.
func (v Value) Infos() ([]Info, bool) { return v.infos(), v.typ == TypeInfoArray }

// Array returns the element type and the elements of a TypeArray value.
// Do not modify the result.
func (v Value) Array() (elem Type, vals []Value, ok bool) {
	if v.typ != TypeArray {
		return 0, nil, false
	}
	return Type(v.num), v.values(), true
}

// Time returns the instant of a TypeTime value, in UTC.
func (v Value) Time() (time.Time, bool) {
	return time.Unix(int64(v.num), int64(v.nsec)).UTC(), v.typ == TypeTime
}

// Int returns any signed or unsigned integer value, a status, range,
// persistence or rank, as an int64; ok is false for other types and for a
// uint64 above MaxInt64.
func (v Value) Int() (int64, bool) {
	switch v.typ {
	case TypeInt8, TypeInt16, TypeInt32, TypeInt64, TypeStatus:
		return int64(v.num), true
	case TypeUint8, TypeUint16, TypeUint32, TypeRange, TypePersistence, TypeRank:
		return int64(v.num), true
	case TypeUint64:
		return int64(v.num), v.num <= math.MaxInt64
	}
	return 0, false
}

// Equal reports whether v and o have the same type and the same value.
// Floats compare by bits, so NaN equals the same NaN; times by instant.
func (v Value) Equal(o Value) bool {
	if v.typ != o.typ || v.num != o.num || v.nsec != o.nsec || v.str != o.str {
		return false
	}
	switch v.typ {
	case TypeBytes:
		return bytes.Equal(v.bytes(), o.bytes())
	case TypeProcArray:
		return slices.Equal(v.procs(), o.procs())
	case TypeInfoArray:
		return InfosEqual(v.infos(), o.infos())
	case TypeArray:
		return slices.EqualFunc(v.values(), o.values(), Value.Equal)
	}
	return true
}

// String formats v for people: `"text"`, `42`, `PMIX_RANGE_SESSION`,
// `job1.3`, `[job1.0 job1.1]`, `{key=value …}`.
func (v Value) String() string {
	switch v.typ {
	case TypeUndef:
		return "<undef>"
	case TypeBool:
		return strconv.FormatBool(v.num != 0)
	case TypeString:
		return strconv.Quote(v.str)
	case TypeInt8, TypeInt16, TypeInt32, TypeInt64:
		return strconv.FormatInt(int64(v.num), 10)
	case TypeUint8, TypeUint16, TypeUint32, TypeUint64:
		return strconv.FormatUint(v.num, 10)
	case TypeFloat64:
		return strconv.FormatFloat(math.Float64frombits(v.num), 'g', -1, 64)
	case TypeStatus:
		return Status(int64(v.num)).String()
	case TypeRange:
		return Range(v.num).String()
	case TypePersistence:
		return Persistence(v.num).String()
	case TypeRank:
		return Rank(v.num).String()
	case TypeProc:
		return Proc{Nspace: v.str, Rank: Rank(v.num)}.String()
	case TypeBytes:
		return fmt.Sprintf("bytes[%d]", len(v.bytes()))
	case TypeTime:
		t, _ := v.Time()
		return t.Format(time.RFC3339Nano)
	case TypeProcArray:
		parts := make([]string, len(v.procs()))
		for i, p := range v.procs() {
			parts[i] = p.String()
		}
		return "[" + strings.Join(parts, " ") + "]"
	case TypeInfoArray:
		return "{" + FormatInfos(v.infos()) + "}"
	case TypeArray:
		parts := make([]string, len(v.values()))
		for i, e := range v.values() {
			parts[i] = e.String()
		}
		return "array(" + strconv.FormatUint(v.num, 10) + ")[" + strings.Join(parts, " ") + "]"
	}
	return "<" + v.typ.String() + ">"
}

// GoValue returns v as a plain Go value for JSON output and the like:
// bool, string, int64, uint64, float64, []byte, time.Time, Status, Range,
// Persistence, Rank, Proc, []Proc, []Info or []Value (Array); nil for
// undef.
func (v Value) GoValue() any {
	switch v.typ {
	case TypeBool:
		return v.num != 0
	case TypeString:
		return v.str
	case TypeInt8, TypeInt16, TypeInt32, TypeInt64:
		return int64(v.num)
	case TypeUint8, TypeUint16, TypeUint32, TypeUint64:
		return v.num
	case TypeFloat64:
		return math.Float64frombits(v.num)
	case TypeStatus:
		return Status(int64(v.num))
	case TypeRange:
		return Range(v.num)
	case TypePersistence:
		return Persistence(v.num)
	case TypeRank:
		return Rank(v.num)
	case TypeProc:
		return Proc{Nspace: v.str, Rank: Rank(v.num)}
	case TypeBytes:
		return v.bytes()
	case TypeTime:
		t, _ := v.Time()
		return t
	case TypeProcArray:
		return v.procs()
	case TypeInfoArray:
		return v.infos()
	case TypeArray:
		return v.values()
	}
	return nil
}
