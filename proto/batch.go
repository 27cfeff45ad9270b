package proto

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/pmixbus/pmixbus/pmix"
)

// Invoke is one handler invocation of an invoke-batch frame: the fields of
// an invoke frame. On the wire: [seq: uint, id: uint, name: str, code: int,
// source: Proc or nil (the RM), info: [Info], results: [Info]].
type Invoke struct {
	Seq     uint64
	ID      uint64
	Name    string
	Code    pmix.Status
	Source  pmix.Proc
	Info    []pmix.Info
	Results []pmix.Info
	// Encoded, if set, is Info's encoding made once for all the clients
	// an event goes to (EncodeInfoList, InfoCache): encoding the
	// invocation copies its bytes if it is still Info's (EncodedInfos.Of),
	// and encodes Info otherwise. Never set by decoding.
	Encoded *EncodedInfos
}

// Done is one completion of an invoke-done-batch frame: the fields of an
// invoke-done frame. On the wire: [seq: uint, status: int, results: [Info],
// prior: [Info] or nil (unchanged)].
type Done struct {
	Seq      uint64
	Status   pmix.Status
	Results  []pmix.Info
	Prior    []pmix.Info
	HasPrior bool // see Frame.HasPrior
}

// InvokeOf is the invocation an invoke frame carries.
func InvokeOf(f *Frame) Invoke {
	return Invoke{Seq: f.Seq, ID: f.ID, Name: f.Name, Code: f.Code, Source: f.Source, Info: f.Info, Results: f.Results}
}

// Frame is inv as an invoke frame (protocol version 1).
func (inv *Invoke) Frame() *Frame {
	return &Frame{Type: TypeInvoke, Seq: inv.Seq, ID: inv.ID, Name: inv.Name, Code: inv.Code, Source: inv.Source, Info: inv.Info, Results: inv.Results}
}

// DoneOf is the completion an invoke-done frame carries.
func DoneOf(f *Frame) Done {
	return Done{Seq: f.Seq, Status: f.Status, Results: f.Results, Prior: f.Prior, HasPrior: f.HasPrior}
}

// Frame is d as an invoke-done frame (protocol version 1).
func (d *Done) Frame() *Frame {
	return &Frame{Type: TypeInvokeDone, Seq: d.Seq, Status: d.Status, Results: d.Results, Prior: d.Prior, HasPrior: d.HasPrior}
}

// maxPresized bounds the entries a batch's slice is made for before they
// are decoded: as many as the agent's dispatch handles in one pass.
const maxPresized = 256

// Elements of the wire arrays.
const (
	invokeFields = 7
	doneFields   = 4
)

// MaxBatchBytes is where a Batch closes its frame and opens another: a
// batch frame stays within every receiver's frame limit unless one entry
// alone exceeds it, and a burst still costs a frame per 64 KiB.
const MaxBatchBytes = 64 << 10

// batchHeader is the frame of a batch up to its first entry: the length
// prefix, a map of two keys, the type, and the entries' array header, an
// array32 so that its count can be patched as entries join.
const batchHeader = 4 + 1 + 2 + 1 + 3 + 5

// Batch appends a batch frame (invoke-batch or invoke-done-batch) to the
// end of a buffer an entry at a time, so that invocations queued for one
// reader together cost one frame. The frame is open, its length and count
// not yet right, until Close; nothing may be appended to the buffer
// meanwhile but entries of the same type. The zero Batch has none open.
type Batch struct {
	at  int    // where the open frame starts
	n   uint32 // its entries
	typ Type   // 0: none open
}

// Open reports whether a batch frame is open.
func (bt *Batch) Open() bool { return bt.typ != 0 }

// Close finishes the open batch frame, if any, in b (the buffer it was
// appended to).
func (bt *Batch) Close(b []byte) {
	if bt.typ == 0 {
		return
	}
	binary.BigEndian.PutUint32(b[bt.at:], uint32(len(b)-bt.at-4))
	binary.BigEndian.PutUint32(b[bt.at+batchHeader-4:], bt.n)
	bt.typ = 0
}

// Reset forgets the open batch without finishing it: the buffer it was in
// was dropped.
func (bt *Batch) Reset() { bt.typ = 0 }

// AppendInvoke appends inv to b in the open invoke-batch frame, opening
// one if none is open or the open one is full.
func (bt *Batch) AppendInvoke(b []byte, inv *Invoke) ([]byte, error) {
	return bt.appendEntry(b, TypeInvokeBatch, func(enc *msgpack.Encoder) error { return inv.encode(enc) })
}

// AppendDone appends d to b in the open invoke-done-batch frame, opening
// one if none is open or the open one is full.
func (bt *Batch) AppendDone(b []byte, d *Done) ([]byte, error) {
	return bt.appendEntry(b, TypeInvokeDoneBatch, func(enc *msgpack.Encoder) error { return d.encode(enc) })
}

func (bt *Batch) appendEntry(b []byte, typ Type, encode func(*msgpack.Encoder) error) ([]byte, error) {
	if bt.typ != 0 && bt.typ != typ {
		bt.Close(b)
	}
	if bt.typ == 0 {
		b = bt.open(b, typ)
	}
	start := len(b)
	e := getEncoder(b)
	err := encode(e.enc)
	b = e.w.b
	putEncoder(e)
	if err != nil {
		return b[:start], err
	}
	if bt.n > 0 && len(b)-bt.at > MaxBatchBytes {
		// The entry goes into a frame of its own making: move it up to
		// make room for a header, closing the full frame before it.
		n := len(b) - start
		b = append(b, make([]byte, batchHeader)...)
		copy(b[start+batchHeader:], b[start:start+n])
		full := b[:start]
		bt.Close(full)
		bt.writeHeader(b[start:], typ)
		bt.at = start
	}
	if len(b)-bt.at-4 > math.MaxUint32 {
		return b[:start], pmix.Errorf(pmix.ErrBadParam, "batch frame entry of %d bytes is too large", len(b)-start)
	}
	bt.n++
	return b, nil
}

func (bt *Batch) open(b []byte, typ Type) []byte {
	bt.at = len(b)
	b = append(b, make([]byte, batchHeader)...)
	bt.writeHeader(b[bt.at:], typ)
	return b
}

// writeHeader writes a batch header with no entries into h and makes it
// the open frame's.
func (bt *Batch) writeHeader(h []byte, typ Type) {
	key := kInvokes
	if typ == TypeInvokeDoneBatch {
		key = kDones
	}
	h = h[4:] // the length, patched by Close
	h[0] = msgpcode.FixedMapLow | 2
	h[1], h[2] = msgpcode.FixedStrLow|1, kType[0]
	h[3] = byte(typ) // a positive fixint
	h[4], h[5], h[6] = msgpcode.FixedStrLow|2, key[0], key[1]
	h[7] = msgpcode.Array32
	binary.BigEndian.PutUint32(h[8:], 0)
	bt.typ, bt.n = typ, 0
}

func (inv *Invoke) encode(enc *msgpack.Encoder) error {
	if err := enc.EncodeArrayLen(invokeFields); err != nil {
		return err
	}
	if err := enc.EncodeUint(inv.Seq); err != nil {
		return err
	}
	if err := enc.EncodeUint(inv.ID); err != nil {
		return err
	}
	if err := enc.EncodeString(inv.Name); err != nil {
		return err
	}
	if err := enc.EncodeInt(int64(inv.Code)); err != nil {
		return err
	}
	var err error
	if inv.Source == (pmix.Proc{}) {
		err = enc.EncodeNil()
	} else {
		err = inv.Source.EncodeMsgpack(enc)
	}
	if err != nil {
		return err
	}
	if inv.Encoded.Of(inv.Info) {
		_, err = enc.Writer().Write(inv.Encoded.raw)
	} else {
		err = pmix.EncodeInfos(enc, inv.Info)
	}
	if err != nil {
		return err
	}
	return pmix.EncodeInfos(enc, inv.Results)
}

func (d *Done) encode(enc *msgpack.Encoder) error {
	if err := enc.EncodeArrayLen(doneFields); err != nil {
		return err
	}
	if err := enc.EncodeUint(d.Seq); err != nil {
		return err
	}
	if err := enc.EncodeInt(int64(d.Status)); err != nil {
		return err
	}
	if err := pmix.EncodeInfos(enc, d.Results); err != nil {
		return err
	}
	if !d.HasPrior && d.Prior == nil {
		return enc.EncodeNil()
	}
	return pmix.EncodeInfos(enc, d.Prior)
}

// decodeEntries reads a batch field: an array of entries of fields
// elements each, every one decoded by one straight into its place in the
// slice (an entry decoded elsewhere and copied in would be allocated on
// its own). CheckLengths has made sure the count is no more than the bytes
// left, each entry taking at least one. The slice comes from pool, where
// Frame.Release puts it back, or starts with room for up to maxPresized
// entries (a burst's batch, whatever a short frame claims) and grows by
// append past it as entries decode, so allocation follows the bytes
// present, not the count claimed.
func decodeEntries[T any](dec *msgpack.Decoder, key string, fields int, pool *entryPool[T], one func(*T, *msgpack.Decoder) error) ([]T, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil || n < 0 {
		return nil, bad("frame field "+key, err)
	}
	out := pool.get(min(n, maxPresized))
	for range n {
		m, err := dec.DecodeArrayLen()
		if err == nil && m != fields {
			err = pmix.Errorf(pmix.ErrUnpackFailure, "frame field %s: an entry of %d elements, want %d", key, m, fields)
		}
		if err == nil {
			var zero T
			out = append(out, zero)
			err = one(&out[len(out)-1], dec)
		}
		if err != nil {
			pool.put(out)
			return nil, bad("frame field "+key, err)
		}
	}
	return out, nil
}

// entryPool keeps the entry slices of batch frames released by their
// readers (Frame.Release), zeroed, for the next frames. A slice goes in
// the pool in a box (*[]T); boxes emptied by get wait in boxes for the
// next put, so that keeping a slice allocates nothing.
type entryPool[T any] struct{ p, boxes sync.Pool }

// maxPooledEntries bounds the slices kept: a fan-out's frames hold a few
// hundred entries; a slice grown for a frame of thousands of tiny ones is
// left to the collector.
const maxPooledEntries = 4096

var (
	invokePool entryPool[Invoke]
	donePool   entryPool[Done]
)

// get returns an empty slice, pooled or with room for n entries.
func (p *entryPool[T]) get(n int) []T {
	if box, ok := p.p.Get().(*[]T); ok {
		s := (*box)[:0]
		*box = nil
		p.boxes.Put(box)
		return s
	}
	return make([]T, 0, n)
}

// put zeroes s, dropping what its entries refer to, and keeps it.
func (p *entryPool[T]) put(s []T) {
	if cap(s) == 0 || cap(s) > maxPooledEntries {
		return
	}
	clear(s)
	box, ok := p.boxes.Get().(*[]T)
	if !ok {
		box = new([]T)
	}
	*box = s[:0]
	p.p.Put(box)
}

// Release gives the entries of a batch frame that Unmarshal or a reader
// decoded (Invokes, Dones) back for later frames to decode into, and sets
// them to nil: call it once nothing refers to the entries any more,
// typically right after running them. What they held (the info and
// results lists, names, procs) stays valid and is never reused: a handler
// may keep it. Not calling it costs only the allocation of the next
// frame's entries.
func (f *Frame) Release() {
	invokePool.put(f.Invokes)
	donePool.put(f.Dones)
	f.Invokes, f.Dones = nil, nil
}

// frames holds Frames that Recycle gave back, zeroed, for Unmarshal.
var frames = sync.Pool{New: func() any { return new(Frame) }}

// Recycle releases f's entries (Release) and gives f itself back for
// Unmarshal to decode a later frame into: call it once nothing refers to
// f any more — what its fields held stays valid, as after Release, but f
// does not. A Frame is some 480 bytes: an agent reads one completion frame
// per client per event, so under fan-out this is one allocation of that
// size less per delivery. Not calling it costs only that allocation.
func (f *Frame) Recycle() {
	f.Release()
	*f = Frame{}
	frames.Put(f)
}

// Errors of entry fields, built only when there is one.
var (
	invokeCode = func() string { return "frame field " + kInvokes + ": code" }
	doneStatus = func() string { return "frame field " + kDones + ": status" }
)

func decodeInvokes(d *decoder) ([]Invoke, error) {
	r := repeats{d: d}
	return decodeEntries(d.dec, kInvokes, invokeFields, &invokePool, func(inv *Invoke, dec *msgpack.Decoder) error {
		return inv.decode(dec, &r)
	})
}

// repeats decodes what consecutive invocations of a frame repeat once:
// their handler's name, their source's nspace and their info, the same
// bytes for all the handlers of a client an event goes to and for events
// alike. It compares the bytes with the last ones, where the decoder is in
// the body (decoder.at).
//
// An info list is shared: a handler only reads its call's Info (bus.Call:
// shared with the other handlers of the chain, never modified), so one
// list serves them all; it is clipped, so that appending to it copies.
// Results are the handler's to change: each is decoded.
type repeats struct {
	d      *decoder
	raw    []byte      // the last info list's bytes, in the body being decoded
	list   []pmix.Info // their decoding
	name   string
	nspace string
}

func (r *repeats) info(dec *msgpack.Decoder) ([]pmix.Info, error) {
	start := r.d.at()
	n, err := valueLen(r.d.body[start:])
	if err != nil {
		return pmix.DecodeInfos(dec) // and fail as it does
	}
	raw := r.d.body[start : start+n]
	if r.raw != nil && bytes.Equal(raw, r.raw) {
		r.d.skip(n)
		return r.list, nil
	}
	list, err := pmix.DecodeInfos(dec)
	if err != nil {
		return nil, err
	}
	list = slices.Clip(list)
	if r.d.at() == start+n {
		r.raw, r.list = raw, list
	}
	return list, nil
}

// str reads a str (or bin, or nil for "", as DecodeString takes), and
// gives *last again, with no allocation, when it has its bytes.
func (r *repeats) str(dec *msgpack.Decoder, last *string, what string) (string, error) {
	n, err := dec.DecodeBytesLen()
	if err != nil {
		return "", bad("frame field "+kInvokes+": "+what, err)
	}
	at := r.d.at()
	if n <= 0 {
		return "", nil
	}
	if n > len(r.d.body)-at { // CheckLengths has seen to it; the decoder would say so too
		return "", pmix.Errorf(pmix.ErrUnpackFailure, "frame field %s: %s of %d bytes, %d left", kInvokes, what, n, len(r.d.body)-at)
	}
	b := r.d.body[at : at+n]
	r.d.skip(n)
	if string(b) != *last {
		*last = string(b)
	}
	return *last, nil
}

// source reads an invocation's source: a Proc, or nil for the RM (the
// zero Proc).
func (r *repeats) source(dec *msgpack.Decoder, p *pmix.Proc) error {
	n, err := dec.DecodeArrayLen()
	switch {
	case err != nil:
		return bad("frame field "+kInvokes+": source", err)
	case n < 0: // nil
		return nil
	case n != 2:
		return pmix.Errorf(pmix.ErrUnpackFailure, "frame field %s: source: want a proc [nspace, rank], got %d elements", kInvokes, n)
	}
	if p.Nspace, err = r.str(dec, &r.nspace, "source nspace"); err != nil {
		return err
	}
	rank, err := pmix.DecodeUint(dec, math.MaxUint32, "source rank")
	p.Rank = pmix.Rank(rank)
	return err
}

func (inv *Invoke) decode(dec *msgpack.Decoder, r *repeats) error {
	var err error
	if inv.Seq, err = pmix.DecodeUint(dec, math.MaxUint64, "invocation seq"); err != nil {
		return err
	}
	if inv.ID, err = pmix.DecodeUint(dec, math.MaxUint64, "invocation id"); err != nil {
		return err
	}
	if inv.Name, err = r.str(dec, &r.name, "name"); err != nil {
		return err
	}
	if inv.Code, err = decodeStatus(dec, invokeCode); err != nil {
		return err
	}
	if err := r.source(dec, &inv.Source); err != nil {
		return err
	}
	if inv.Info, err = r.info(dec); err != nil {
		return err
	}
	inv.Results, err = pmix.DecodeInfos(dec)
	return err
}

func decodeDones(dec *msgpack.Decoder) ([]Done, error) {
	return decodeEntries(dec, kDones, doneFields, &donePool, (*Done).decode)
}

func (d *Done) decode(dec *msgpack.Decoder) error {
	var err error
	if d.Seq, err = pmix.DecodeUint(dec, math.MaxUint64, "completion seq"); err != nil {
		return err
	}
	if d.Status, err = decodeStatus(dec, doneStatus); err != nil {
		return err
	}
	if d.Results, err = pmix.DecodeInfos(dec); err != nil {
		return err
	}
	c, err := dec.PeekCode()
	if err != nil {
		return bad("frame field "+kDones+": prior", err)
	}
	if c == msgpcode.Nil {
		return dec.Skip()
	}
	if d.Prior, err = pmix.DecodeInfos(dec); err != nil {
		return err
	}
	d.HasPrior = true
	if d.Prior == nil {
		d.Prior = []pmix.Info{}
	}
	return nil
}

// encodeEntries writes a batch field's entries (Frame.encode).
func encodeEntries[T any](enc *msgpack.Encoder, es []T, one func(*T, *msgpack.Encoder) error) error {
	if err := enc.EncodeArrayLen(len(es)); err != nil {
		return err
	}
	for i := range es {
		if err := one(&es[i], enc); err != nil {
			return err
		}
	}
	return nil
}

// decodeStatus reads a status; field names the field, for errors only.
func decodeStatus(dec *msgpack.Decoder, field func() string) (pmix.Status, error) {
	n, err := dec.DecodeInt64()
	if err != nil {
		return 0, bad(field(), err)
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, pmix.Errorf(pmix.ErrUnpackFailure, "%s: %d does not fit a status", field(), n)
	}
	return pmix.Status(n), nil
}
