package proto

import (
	"bytes"
	"io"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// appender is an io.Writer and io.ByteWriter that appends to a slice, so a
// pooled encoder writes straight into a frame buffer.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) { a.b = append(a.b, p...); return len(p), nil }
func (a *appender) WriteByte(c byte) error      { a.b = append(a.b, c); return nil }

type encoder struct {
	w   appender
	enc *msgpack.Encoder
}

var encoders = sync.Pool{New: func() any {
	e := &encoder{}
	e.enc = msgpack.NewEncoder(&e.w)
	return e
}}

func getEncoder(b []byte) *encoder {
	e := encoders.Get().(*encoder)
	e.w.b = b
	return e
}

func putEncoder(e *encoder) {
	e.w.b = nil
	encoders.Put(e)
}

type decoder struct {
	rd   bytes.Reader
	dec  *msgpack.Decoder
	body []byte // what rd reads, while decoding
}

// at is where in body dec is: msgpack reads a bytes.Reader (an
// io.ByteScanner) without a buffer of its own.
func (d *decoder) at() int { return len(d.body) - d.rd.Len() }

// skip moves dec n bytes on.
func (d *decoder) skip(n int) { _, _ = d.rd.Seek(int64(n), io.SeekCurrent) }

var decoders = sync.Pool{New: func() any {
	d := &decoder{}
	d.dec = msgpack.NewDecoder(&d.rd)
	return d
}}

// pooledInput bounds the input of a decoder that goes back to the pool. A
// decoder keeps a buffer up to twice as large as the longest str it has
// read, which only a failed read makes larger than its input: a decoder
// that failed or read more than pooledInput is left to the garbage
// collector, so the pool never pins more than that.
const pooledInput = 64 << 10

// DecodeChecked decodes untrusted msgpack: it checks b with CheckLengths,
// then calls decode with a pooled decoder reading b. The decoder is valid
// only during the call. Safe for concurrent use.
//
// It returns CheckLengths's error, or decode's.
func DecodeChecked(b []byte, decode func(*msgpack.Decoder) error) error {
	return decodeChecked(b, func(d *decoder) error { return decode(d.dec) })
}

// decodeChecked is DecodeChecked for decoders that need to know where
// they are in b (repeats).
func decodeChecked(b []byte, decode func(*decoder) error) error {
	if err := CheckLengths(b); err != nil {
		return err
	}
	d := decoders.Get().(*decoder)
	d.rd.Reset(b)
	d.dec.Reset(&d.rd)
	d.body = b
	err := decode(d)
	d.rd.Reset(nil)
	d.body = nil
	if err == nil && len(b) <= pooledInput {
		decoders.Put(d)
	}
	return err
}
