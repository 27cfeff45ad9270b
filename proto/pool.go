package proto

import (
	"bytes"
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
	rd  bytes.Reader
	dec *msgpack.Decoder
}

var decoders = sync.Pool{New: func() any {
	d := &decoder{}
	d.dec = msgpack.NewDecoder(&d.rd)
	return d
}}

func getDecoder(b []byte) *decoder {
	d := decoders.Get().(*decoder)
	d.rd.Reset(b)
	d.dec.Reset(&d.rd)
	return d
}

func putDecoder(d *decoder) {
	d.rd.Reset(nil)
	decoders.Put(d)
}
