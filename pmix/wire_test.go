package pmix

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

func sampleValues() map[string]Value {
	nested := []Info{
		NewInfo("inner", Int16(-7)),
		Required(NewInfo("deeper", Infos([]Info{NewInfo("leaf", Bool(true))}))),
	}
	return map[string]Value{
		"undef":        {},
		"bool true":    Bool(true),
		"bool false":   Bool(false),
		"string":       String("héllo\x00world"),
		"empty string": String(""),
		"int8 min":     Int8(math.MinInt8),
		"int16 max":    Int16(math.MaxInt16),
		"int32 neg":    Int32(-123456),
		"int64 min":    Int64(math.MinInt64),
		"uint8 max":    Uint8(math.MaxUint8),
		"uint16":       Uint16(4242),
		"uint32 max":   Uint32(math.MaxUint32),
		"uint64 max":   Uint64(math.MaxUint64),
		"float64":      Float64(-1.5e300),
		"float64 nan":  Float64(math.NaN()),
		"float64 -0":   Float64(math.Copysign(0, -1)),
		"bytes":        Bytes([]byte{0, 1, 2, 255}),
		"empty bytes":  Bytes(nil),
		"status":       StatusValue(ErrEventRegistration),
		"range":        RangeValue(RangeProcLocal),
		"persistence":  PersistValue(PersistFirstRead),
		"rank":         RankValue(RankWildcard),
		"proc":         ProcValue(Proc{Nspace: "A:job.1", Rank: 3}),
		"procs":        Procs([]Proc{{"a", 0}, {"b", RankUndef}}),
		"array":        Array(4, []Value{Uint64(1), Uint64(math.MaxUint64)}), // PMIX_SIZE
		"values array": Array(ElemValue, []Value{String("x"), Int16(-2), Array(3, []Value{String("in")})}),
		"empty array":  Array(3, nil),
		"empty procs":  Procs(nil),
		"infos":        Infos(nested),
		"time":         Time(time.Date(2026, 11, 21, 7, 43, 1, 123456789, time.UTC)),
		"time pre1970": Time(time.Date(1601, 1, 1, 0, 0, 0, 1, time.UTC)),
	}
}

func TestValueRoundTrip(t *testing.T) {
	for name, v := range sampleValues() {
		t.Run(name, func(t *testing.T) {
			in := []Info{NewInfo("k", v), Required(NewInfo("r", v))}
			b, err := MarshalInfos(in)
			if err != nil {
				t.Fatal(err)
			}
			out, err := UnmarshalInfos(b)
			if err != nil {
				t.Fatal(err)
			}
			if !InfosEqual(in, out) {
				t.Fatalf("round trip changed the value:\n in %v\nout %v", in, out)
			}
			if out[0].Value.Type() != v.Type() {
				t.Fatalf("type %v became %v", v.Type(), out[0].Value.Type())
			}
			if !out[1].IsRequired() {
				t.Fatal("required flag lost")
			}
		})
	}
}

func TestProcsRoundTrip(t *testing.T) {
	in := []Proc{{"x", 0}, {"cluster:ns", RankWildcard}, {"", RankUndef}}
	b, err := MarshalProcs(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := UnmarshalProcs(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("got %v", out)
	}
	for i := range in {
		if in[i] != out[i] {
			t.Fatalf("got %v want %v", out, in)
		}
	}
}

// Values embedded in other msgpack structures use the custom coders.
func TestValueInsideStruct(t *testing.T) {
	type frame struct {
		Infos  []Info
		Source Proc
		Err    *Error
	}
	in := frame{Infos: []Info{NewInfo("a", Uint8(1))}, Source: Proc{"n", 2}, Err: NewError(ErrNotFound, "no key x")}
	b, err := msgpack.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out frame
	if err := msgpack.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !InfosEqual(in.Infos, out.Infos) || in.Source != out.Source {
		t.Fatalf("got %+v", out)
	}
	if !errors.Is(out.Err, ErrNotFound) || out.Err.Message != "no key x" {
		t.Fatalf("error lost its status or message: %v", out.Err)
	}
}

func TestDecodeRejects(t *testing.T) {
	enc := func(f func(e *msgpack.Encoder)) []byte {
		var buf bytes.Buffer
		e := msgpack.NewEncoder(&buf)
		f(e)
		return buf.Bytes()
	}
	info := func(typ uint64, payload func(e *msgpack.Encoder)) []byte {
		return enc(func(e *msgpack.Encoder) {
			_ = e.EncodeArrayLen(1)
			_ = e.EncodeArrayLen(3)
			_ = e.EncodeString("k")
			_ = e.EncodeUint(0)
			_ = e.EncodeArrayLen(2)
			_ = e.EncodeUint(typ)
			payload(e)
		})
	}
	deep := enc(func(e *msgpack.Encoder) {
		_ = e.EncodeArrayLen(1)
		for range MaxNesting + 2 {
			_ = e.EncodeArrayLen(3)
			_ = e.EncodeString("k")
			_ = e.EncodeUint(0)
			_ = e.EncodeArrayLen(2)
			_ = e.EncodeUint(uint64(TypeInfoArray))
			_ = e.EncodeArrayLen(1)
		}
	})
	cases := map[string][]byte{
		"empty input":         {},
		"not an array":        enc(func(e *msgpack.Encoder) { _ = e.EncodeString("x") }),
		"int8 overflow":       info(uint64(TypeInt8), func(e *msgpack.Encoder) { _ = e.EncodeInt(200) }),
		"uint16 negative":     info(uint64(TypeUint16), func(e *msgpack.Encoder) { _ = e.EncodeInt(-1) }),
		"uint64 negative i64": info(uint64(TypeUint64), func(e *msgpack.Encoder) { _ = e.EncodeInt64(-5) }),
		"unknown type":        info(999, func(e *msgpack.Encoder) { _ = e.EncodeNil() }),
		"bad nanoseconds": info(uint64(TypeTime), func(e *msgpack.Encoder) {
			_ = e.EncodeArrayLen(2)
			_ = e.EncodeInt(0)
			_ = e.EncodeUint(1_000_000_000)
		}),
		"wrong payload":      info(uint64(TypeString), func(e *msgpack.Encoder) { _ = e.EncodeInt(1) }),
		"truncated":          info(uint64(TypeString), func(e *msgpack.Encoder) {})[:6],
		"nested too deeply":  deep,
		"huge claimed count": {0xdd, 0xff, 0xff, 0xff, 0xff},
		"trailing bytes":     append(info(uint64(TypeBool), func(e *msgpack.Encoder) { _ = e.EncodeBool(true) }), 0xc0),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := UnmarshalInfos(b)
			if err == nil {
				t.Fatal("decoded without error")
			}
			if s := StatusOf(err); s != ErrUnpackFailure && s != ErrUnknownDataType {
				t.Fatalf("status %v, want an unpack status: %v", s, err)
			}
		})
	}
}

func FuzzUnmarshalInfos(f *testing.F) {
	for _, v := range sampleValues() {
		b, err := MarshalInfos([]Info{NewInfo("seed", v)})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x91, 0x93, 0xa1, 'k', 0x00, 0x92, 0x18, 0x91})
	f.Fuzz(func(t *testing.T, b []byte) {
		infos, err := UnmarshalInfos(b)
		if err != nil {
			return
		}
		again, err := MarshalInfos(infos)
		if err != nil {
			t.Fatalf("decoded infos do not encode: %v", err)
		}
		back, err := UnmarshalInfos(again)
		if err != nil {
			t.Fatalf("re-encoded infos do not decode: %v", err)
		}
		if !InfosEqual(infos, back) {
			t.Fatalf("encode then decode is not the identity:\n%v\n%v", infos, back)
		}
	})
}

func FuzzValueRoundTrip(f *testing.F) {
	f.Add(uint8(0), int64(-1), uint64(1), "s", []byte("b"), 1.5)
	f.Fuzz(func(t *testing.T, kind uint8, i int64, u uint64, s string, b []byte, fl float64) {
		vals := []Value{
			Int8(int8(i)), Int16(int16(i)), Int32(int32(i)), Int64(i),
			Uint8(uint8(u)), Uint16(uint16(u)), Uint32(uint32(u)), Uint64(u),
			String(s), Bytes(b), Float64(fl), Bool(i%2 == 0), StatusValue(Status(int32(i))),
			RangeValue(Range(u)), PersistValue(Persistence(u)), RankValue(Rank(u)),
			ProcValue(Proc{s, Rank(u)}), Procs([]Proc{{s, Rank(u)}, {string(b), 0}}),
			Time(time.Unix(i%(1<<40), int64(u%1e9))),
			Array(ElemValue, []Value{String(s), Bytes(b), Int64(i)}),
		}
		v := vals[int(kind)%len(vals)]
		in := []Info{NewInfo(s, v), NewInfo("nested", Infos([]Info{NewInfo(string(b), v)}))}
		enc, err := MarshalInfos(in)
		if err != nil {
			t.Fatal(err)
		}
		out, err := UnmarshalInfos(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !InfosEqual(in, out) {
			t.Fatalf("not the identity:\n%v\n%v", in, out)
		}
	})
}

// TestKnownKeysComplete: every key constant of keys.go is in knownKeys, so
// that decoding it allocates nothing, and a decoded known key is the
// constant itself.
func TestKnownKeysComplete(t *testing.T) {
	file, err := parser.ParseFile(token.NewFileSet(), "keys.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range file.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			for i, name := range spec.(*ast.ValueSpec).Names {
				lit, ok := spec.(*ast.ValueSpec).Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING || !strings.HasPrefix(name.Name, "Key") {
					continue
				}
				key, _ := strconv.Unquote(lit.Value)
				if knownKeys[key] != key {
					t.Errorf("%s (%q) is not in knownKeys", name.Name, key)
				}
				n++
			}
		}
	}
	if n != len(knownKeys) || n < 80 {
		t.Errorf("keys.go names %d keys, knownKeys holds %d", n, len(knownKeys))
	}
	b, err := MarshalInfos([]Info{NewInfo(KeyEventResolved, Bool(true)), NewInfo("my.key", Bool(true))})
	if err != nil {
		t.Fatal(err)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	if n, err := dec.DecodeArrayLen(); err != nil || n != 2 {
		t.Fatal(n, err)
	}
	kb := new(keyBuf)
	var known, other Info
	if err := decodeInfo(dec, &known, kb, 0); err != nil {
		t.Fatal(err)
	}
	if err := decodeInfo(dec, &other, kb, 0); err != nil {
		t.Fatal(err)
	}
	if unsafe.StringData(known.Key) != unsafe.StringData(KeyEventResolved) || other.Key != "my.key" {
		t.Errorf("decoded keys %q %q: the known one is not the constant", known.Key, other.Key)
	}
	long := strings.Repeat("k", 100)
	if b, err = MarshalInfos([]Info{NewInfo(long, Bool(true))}); err != nil {
		t.Fatal(err)
	}
	if got, err := UnmarshalInfos(b); err != nil || got[0].Key != long {
		t.Errorf("a long key: %v %v", got, err)
	}
}

// TestValueSize: a Value stays 48 bytes and an Info 72, as event info is
// copied per handler it reaches.
func TestValueSize(t *testing.T) {
	if v, i := unsafe.Sizeof(Value{}), unsafe.Sizeof(Info{}); v > 48 || i > 72 {
		t.Errorf("Value is %d bytes, Info %d", v, i)
	}
}
