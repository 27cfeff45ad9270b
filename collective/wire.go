package collective

import (
	"bytes"
	"errors"
	"math"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// wireVersion begins every collective message.
const wireVersion = 1

// contribution is one agent's part of an operation, sent to the
// coordinator. On the wire (docs/subjects.md):
//
//	[1, kind: str, id: str, procs: [Proc], gen: uint, cluster: str, node: str,
//	 covers: [Proc], sizes: [[nspace: str, size: uint]], timeout: uint (ms),
//	 collect: bool, data: [ProcData], status: int, message: str,
//	 jobs: [JobInfo], flags: uint, gone: [Proc]]
type contribution struct {
	op
	gen           uint64
	cluster, node string
	covers        []pmix.Proc // the participants this agent hosts, qualified
	sizes         []nsSize    // ranks of the WILDCARD nspaces of this cluster
	timeout       time.Duration
	collect       bool
	data          []procData
	status        pmix.Status // not success: the agent gives up (a timeout)
	message       string
	jobs          []jobInfo // a connect's: the job-level info of its participants' nspaces here
	flags         Flags
	gone          []pmix.Proc // participants here that terminated, left out (FlagOptional)
}

// jobInfo is a job's job-level info, as a connect carries it to the members
// of other nspaces: [nspace: str (qualified), info: [Info]].
type jobInfo struct {
	nspace string
	info   []pmix.Info
}

// nsSize is how many ranks a WILDCARD participant stands for.
type nsSize struct {
	nspace string // qualified
	size   uint32
}

// procData is what a participant committed, as a contribution and a release
// carry it: [proc: Proc, cluster: str, node: str, puts: [[scope, key, Value]]].
type procData struct {
	proc          pmix.Proc // qualified
	cluster, node string    // where it runs, for scope checks
	puts          []proto.Put
}

// release ends an operation at every participating agent:
//
//	[1, gen: uint, status: int, code: str, message: str, data: [ProcData],
//	 nspace: str, members: [Proc], jobs: [JobInfo], flags: uint,
//	 ctxid: uint (a group construct's context id; only when assigned)]
//
// The code is the pmix.Error code of a failure ("collective.timeout").
type release struct {
	gen uint64
	outcome
	data    []procData
	nspace  string      // a connect's new nspace
	members []pmix.Proc // a connect's members, in new rank order
	jobs    []jobInfo   // a connect's: every participating nspace's job-level info
	flags   Flags       // the union of the contributions'
	ctxid   uint64      // a group construct's context id (FlagAssignContextID)
}

// ack answers a contribution: [status: int, code: str, message: str].
type ack struct{ outcome }

// outcome is a status with the code and message of its error.
type outcome struct {
	status        pmix.Status
	code, message string
}

func outcomeOf(err error) outcome {
	return outcome{status: pmix.StatusOf(err), code: pmix.CodeOf(err), message: pmix.MessageOf(err)}
}

func (o outcome) err() error {
	if o.status == pmix.Success {
		return nil
	}
	return pmix.NewCodedError(o.status, o.code, o.message)
}

// enc collects the first error of a sequence of writes.
type enc struct {
	buf bytes.Buffer
	e   *msgpack.Encoder
	err error
}

func newEnc() *enc {
	w := &enc{}
	w.e = msgpack.NewEncoder(&w.buf)
	return w
}

func (w *enc) do(f func() error) {
	if w.err == nil {
		w.err = f()
	}
}
func (w *enc) arr(n int)    { w.do(func() error { return w.e.EncodeArrayLen(n) }) }
func (w *enc) str(s string) { w.do(func() error { return w.e.EncodeString(s) }) }
func (w *enc) uint(n uint64) {
	w.do(func() error { return w.e.EncodeUint(n) })
}
func (w *enc) int(n int64) { w.do(func() error { return w.e.EncodeInt(n) }) }
func (w *enc) bool(b bool) { w.do(func() error { return w.e.EncodeBool(b) }) }
func (w *enc) procs(ps []pmix.Proc) {
	w.do(func() error { return pmix.EncodeProcs(w.e, ps) })
}
func (w *enc) proc(p pmix.Proc) { w.do(func() error { return p.EncodeMsgpack(w.e) }) }
func (w *enc) data(ds []procData) {
	w.arr(len(ds))
	for _, d := range ds {
		w.arr(4)
		w.proc(d.proc)
		w.str(d.cluster)
		w.str(d.node)
		w.do(func() error { return proto.EncodePuts(w.e, d.puts) })
	}
}
func (w *enc) jobs(js []jobInfo) {
	w.arr(len(js))
	for _, j := range js {
		w.arr(2)
		w.str(j.nspace)
		w.do(func() error { return pmix.EncodeInfos(w.e, j.info) })
	}
}
func (w *enc) bytes() ([]byte, error) { return w.buf.Bytes(), w.err }

// dec reads with the first error kept; what it returns after an error is
// zero.
type dec struct {
	d   *msgpack.Decoder
	err error
}

func (r *dec) fail(what string, err error) {
	if r.err != nil || err == nil {
		return
	}
	var pe *pmix.Error
	if errors.As(err, &pe) {
		r.err = err
		return
	}
	r.err = pmix.Errorf(pmix.ErrUnpackFailure, "collective message %s: %v", what, err)
}

func (r *dec) arr(want int, what string) {
	if r.err != nil {
		return
	}
	n, err := r.d.DecodeArrayLen()
	r.fail(what, err)
	if err == nil && n != want {
		r.err = pmix.Errorf(pmix.ErrUnpackFailure, "collective message %s: want %d elements, got %d", what, want, n)
	}
}

// version reads the version that begins a message.
func (r *dec) version() {
	if v := r.uint(math.MaxUint32, "version"); r.err == nil && v != wireVersion {
		r.err = pmix.Errorf(pmix.ErrNotSupported, "collective message version %d, this agent speaks %d", v, wireVersion)
	}
}

func (r *dec) len(what string) int {
	if r.err != nil {
		return 0
	}
	n, err := r.d.DecodeArrayLen()
	r.fail(what, err)
	return max(n, 0)
}

func (r *dec) str(what string) string {
	if r.err != nil {
		return ""
	}
	s, err := r.d.DecodeString()
	r.fail(what, err)
	return s
}

func (r *dec) uint(limit uint64, what string) uint64 {
	if r.err != nil {
		return 0
	}
	n, err := pmix.DecodeUint(r.d, limit, what)
	r.fail(what, err)
	return n
}

func (r *dec) status(what string) pmix.Status {
	if r.err != nil {
		return 0
	}
	n, err := r.d.DecodeInt64()
	r.fail(what, err)
	if err == nil && (n < math.MinInt32 || n > math.MaxInt32) {
		r.err = pmix.Errorf(pmix.ErrUnpackFailure, "collective message %s: %d is no status", what, n)
	}
	return pmix.Status(n)
}

func (r *dec) bool(what string) bool {
	if r.err != nil {
		return false
	}
	b, err := r.d.DecodeBool()
	r.fail(what, err)
	return b
}

func (r *dec) procs(what string) []pmix.Proc {
	if r.err != nil {
		return nil
	}
	ps, err := pmix.DecodeProcs(r.d)
	r.fail(what, err)
	return ps
}

func (r *dec) data() []procData {
	var out []procData
	for range r.len("data") {
		r.arr(4, "data entry")
		var d procData
		if r.err == nil {
			r.fail("data proc", d.proc.DecodeMsgpack(r.d))
		}
		d.cluster = r.str("data cluster")
		d.node = r.str("data node")
		if r.err == nil {
			var err error
			d.puts, err = proto.DecodePuts(r.d)
			r.fail("data puts", err)
		}
		if r.err != nil {
			return nil
		}
		out = append(out, d)
	}
	return out
}

func (r *dec) jobs() []jobInfo {
	var out []jobInfo
	for range r.len("jobs") {
		r.arr(2, "job info")
		j := jobInfo{nspace: r.str("job nspace")}
		if r.err == nil {
			var err error
			j.info, err = pmix.DecodeInfos(r.d)
			r.fail("job info", err)
		}
		if r.err != nil {
			return nil
		}
		out = append(out, j)
	}
	return out
}

func decode(b []byte, what string, f func(*dec)) error {
	return proto.DecodeChecked(b, func(d *msgpack.Decoder) error {
		r := &dec{d: d}
		f(r)
		if r.err == nil {
			if _, err := d.PeekCode(); err == nil {
				r.err = pmix.Errorf(pmix.ErrUnpackFailure, "collective %s: trailing bytes", what)
			}
		}
		return r.err
	})
}

func (c *contribution) marshal() ([]byte, error) {
	w := newEnc()
	w.arr(17)
	w.uint(wireVersion)
	w.str(string(c.kind))
	w.str(c.id)
	w.procs(c.procs)
	w.uint(c.gen)
	w.str(c.cluster)
	w.str(c.node)
	w.procs(c.covers)
	w.arr(len(c.sizes))
	for _, s := range c.sizes {
		w.arr(2)
		w.str(s.nspace)
		w.uint(uint64(s.size))
	}
	w.uint(uint64(c.timeout / time.Millisecond))
	w.bool(c.collect)
	w.data(c.data)
	w.int(int64(c.status))
	w.str(c.message)
	w.jobs(c.jobs)
	w.uint(uint64(c.flags))
	w.procs(c.gone)
	return w.bytes()
}

func unmarshalContribution(b []byte) (*contribution, error) {
	c := &contribution{}
	err := decode(b, "contribution", func(r *dec) {
		r.arr(17, "contribution")
		r.version()
		c.kind = Kind(r.str("kind"))
		c.id = r.str("id")
		c.procs = r.procs("procs")
		c.gen = r.uint(math.MaxUint64, "gen")
		c.cluster = r.str("cluster")
		c.node = r.str("node")
		c.covers = r.procs("covers")
		for range r.len("sizes") {
			r.arr(2, "size")
			s := nsSize{nspace: r.str("size nspace"), size: uint32(r.uint(math.MaxUint32, "size"))}
			c.sizes = append(c.sizes, s)
		}
		c.timeout = time.Duration(r.uint(math.MaxInt64/uint64(time.Millisecond), "timeout")) * time.Millisecond
		c.collect = r.bool("collect")
		c.data = r.data()
		c.status = r.status("status")
		c.message = r.str("message")
		c.jobs = r.jobs()
		c.flags = Flags(r.uint(math.MaxUint8, "flags"))
		c.gone = r.procs("gone")
	})
	if err != nil {
		return nil, err
	}
	if len(c.procs) == 0 {
		return nil, pmix.Errorf(pmix.ErrUnpackFailure, "collective contribution without participants")
	}
	return c, nil
}

func (m *release) marshal() ([]byte, error) {
	w := newEnc()
	if m.ctxid != 0 {
		w.arr(11)
	} else {
		w.arr(10) // as agents before groups read it
	}
	w.uint(wireVersion)
	w.uint(m.gen)
	w.int(int64(m.status))
	w.str(m.code)
	w.str(m.message)
	w.data(m.data)
	w.str(m.nspace)
	w.procs(m.members)
	w.jobs(m.jobs)
	w.uint(uint64(m.flags))
	if m.ctxid != 0 {
		w.uint(m.ctxid)
	}
	return w.bytes()
}

func unmarshalRelease(b []byte) (*release, error) {
	m := &release{}
	err := decode(b, "release", func(r *dec) {
		n := r.len("release")
		if r.err == nil && n != 10 && n != 11 {
			r.err = pmix.Errorf(pmix.ErrUnpackFailure, "collective message release: want 10 or 11 elements, got %d", n)
		}
		r.version()
		m.gen = r.uint(math.MaxUint64, "gen")
		m.status = r.status("status")
		m.code = r.str("code")
		m.message = r.str("message")
		m.data = r.data()
		m.nspace = r.str("nspace")
		m.members = r.procs("members")
		m.jobs = r.jobs()
		m.flags = Flags(r.uint(math.MaxUint8, "flags"))
		if n == 11 {
			m.ctxid = r.uint(math.MaxUint64, "context id")
		}
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (a ack) marshal() ([]byte, error) {
	w := newEnc()
	w.arr(3)
	w.int(int64(a.status))
	w.str(a.code)
	w.str(a.message)
	return w.bytes()
}

func unmarshalAck(b []byte) (ack, error) {
	var a ack
	err := decode(b, "ack", func(r *dec) {
		r.arr(3, "ack")
		a.status = r.status("status")
		a.code = r.str("code")
		a.message = r.str("message")
	})
	return a, err
}
