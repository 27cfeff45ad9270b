package event

import (
	"bytes"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
	"github.com/pmixbus/pmixbus/subjects"
)

// OutcomeReport is what an agent reports when a local client's handler
// chain ends: for the host RM at once, and on NATS at
// OutcomeSubject(cluster, node) while someone subscribes there (docs/subjects.md),
// where reports go in batches: each message is a msgpack array of reports
// (maps with the field names below). An empty batch is an agent's probe
// for subscribers.
type OutcomeReport struct {
	EventID string      `msgpack:"event_id"`
	Cluster string      `msgpack:"cluster"`
	Node    string      `msgpack:"node"`
	Client  pmix.Proc   `msgpack:"client"` // whose chain ran
	Source  pmix.Proc   `msgpack:"source"` // the event's source; zero for the RM
	Outcome bus.Outcome `msgpack:"outcome"`
}

// OutcomeSubject is where an agent publishes its chain outcomes:
// pmix.outcome.<cluster>.<node>. Subscribe to pmix.outcome.<cluster>.* for
// a whole cluster, or pmix.outcome.> for everything.
func OutcomeSubject(cluster, node string) string {
	return "pmix.outcome." + subjects.ClusterToken(cluster) + "." + subjects.EscapeToken(node)
}

// MarshalOutcomes encodes a batch of reports as a msgpack array. It writes
// by hand what msgpack's reflection would write for the structs
// (UnmarshalOutcomes reads them back with reflection), because an agent
// encodes one report per chain and reflection cost a sixth of the event
// path's CPU.
func MarshalOutcomes(rs []OutcomeReport) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(&buf)
	if err := enc.EncodeArrayLen(len(rs)); err != nil {
		return nil, err
	}
	for i := range rs {
		if err := rs[i].encode(enc); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

func (r *OutcomeReport) encode(enc *msgpack.Encoder) error {
	w := &mapWriter{enc: enc}
	w.header(6)
	w.str("event_id", r.EventID)
	w.str("cluster", r.Cluster)
	w.str("node", r.Node)
	w.proc("client", r.Client)
	w.proc("source", r.Source)
	w.key("outcome")
	w.outcome(&r.Outcome)
	return w.err
}

// mapWriter writes msgpack maps field by field, keeping the first error.
type mapWriter struct {
	enc *msgpack.Encoder
	err error
}

func (w *mapWriter) do(f func() error) {
	if w.err == nil {
		w.err = f()
	}
}
func (w *mapWriter) header(n int) { w.do(func() error { return w.enc.EncodeMapLen(n) }) }
func (w *mapWriter) key(k string) { w.do(func() error { return w.enc.EncodeString(k) }) }
func (w *mapWriter) str(k, v string) {
	w.key(k)
	w.do(func() error { return w.enc.EncodeString(v) })
}
func (w *mapWriter) int(k string, v int64) {
	w.key(k)
	w.do(func() error { return w.enc.EncodeInt(v) })
}
func (w *mapWriter) bool(k string, v bool) {
	w.key(k)
	w.do(func() error { return w.enc.EncodeBool(v) })
}
func (w *mapWriter) proc(k string, p pmix.Proc) {
	w.key(k)
	w.do(func() error { return p.EncodeMsgpack(w.enc) })
}

func (w *mapWriter) outcome(o *bus.Outcome) {
	w.header(8)
	w.int("Code", int64(o.Code))
	w.int("Status", int64(o.Status))
	w.key("Results")
	if o.Results == nil { // as reflection writes a nil slice
		w.do(w.enc.EncodeNil)
	} else {
		w.do(func() error { return pmix.EncodeInfos(w.enc, o.Results) })
	}
	w.bool("Completed", o.Completed)
	w.bool("Resolved", o.Resolved)
	w.key("Termination")
	w.header(4)
	w.int("Decision", int64(o.Termination.Decision))
	w.bool("Required", o.Termination.Required)
	w.int("By", int64(o.Termination.By))
	w.str("ByName", o.Termination.ByName)
	w.key("Ran")
	if o.Ran == nil {
		w.do(w.enc.EncodeNil)
	} else {
		w.do(func() error { return w.enc.EncodeArrayLen(len(o.Ran)) })
	}
	for _, ran := range o.Ran {
		w.header(4)
		w.int("ID", int64(ran.ID))
		w.str("Name", ran.Name)
		w.int("Status", int64(ran.Status))
		w.bool("TimedOut", ran.TimedOut)
	}
	w.key("Abort")
	if o.Abort == nil {
		w.do(w.enc.EncodeNil)
		return
	}
	w.outcome(o.Abort)
}

// UnmarshalOutcomes decodes a batch of reports. Not with msgpack.Unmarshal:
// its pooled decoders keep buffers grown by lying lengths, and it allocates
// the whole slice an array header claims.
func UnmarshalOutcomes(b []byte) ([]OutcomeReport, error) {
	var rs []OutcomeReport
	if err := proto.DecodeChecked(b, func(dec *msgpack.Decoder) error { return dec.Decode(&rs) }); err != nil {
		return nil, pmix.Errorf(pmix.ErrUnpackFailure, "outcome reports: %v", err)
	}
	return rs, nil
}
