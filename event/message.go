package event

import (
	"bytes"
	"errors"
	"io"
	"math"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// messageVersion is the first element of every event message.
const messageVersion = 1

// Message is an event as it travels on NATS between agents (and from
// `pmixbus notify`). Its msgpack form is an array:
//
//	[version=1, id: str, code: int, range: uint, environment: bool,
//	 source cluster: str, source node: str, source session: str,
//	 source proc: Proc | nil (the RM), targets: [Proc], info: [Info],
//	 time: int (Unix nanoseconds)]
//
// The source fields are stamped by the publishing agent from the identity it
// authenticated, never taken from a client.
type Message struct {
	ID          string // unique per event: a random per-agent-run prefix and a counter
	Code        pmix.Status
	Range       pmix.Range
	Environment bool
	Source      bus.Origin
	Targets     []pmix.Proc // PMIX_RANGE_CUSTOM: the procs the event is for
	Info        []pmix.Info
	Time        time.Time
	// Size is the length of the encoding UnmarshalMessage read it from
	// (not encoded; 0 for a message made otherwise): an agent estimates
	// with it what the event's invocations weigh while they wait.
	Size int
}

// Marshal encodes m.
func (m *Message) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	steps := []func() error{
		func() error { return enc.EncodeArrayLen(12) },
		func() error { return enc.EncodeUint(messageVersion) },
		func() error { return enc.EncodeString(m.ID) },
		func() error { return enc.EncodeInt(int64(m.Code)) },
		func() error { return enc.EncodeUint(uint64(m.Range)) },
		func() error { return enc.EncodeBool(m.Environment) },
		func() error { return enc.EncodeString(m.Source.Cluster) },
		func() error { return enc.EncodeString(m.Source.Node) },
		func() error { return enc.EncodeString(m.Source.Session) },
		func() error {
			if m.Source.Proc.IsZero() {
				return enc.EncodeNil()
			}
			return m.Source.Proc.EncodeMsgpack(enc)
		},
		func() error { return pmix.EncodeProcs(enc, m.Targets) },
		func() error { return pmix.EncodeInfos(enc, m.Info) },
		func() error { return enc.EncodeInt(m.Time.UnixNano()) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// UnmarshalMessage decodes an event message. Malformed input gives an
// *pmix.Error with ErrUnpackFailure; it never panics.
func UnmarshalMessage(b []byte) (*Message, error) {
	if err := proto.CheckLengths(b); err != nil { // before msgpack allocates what b claims
		return nil, err
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	fail := func(what string, err error) (*Message, error) {
		var pe *pmix.Error
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, pmix.Errorf(pmix.ErrUnpackFailure, "event message %s: %v", what, err)
	}
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return fail("header", err)
	}
	if n != 12 {
		return nil, pmix.Errorf(pmix.ErrUnpackFailure, "event message: want 12 elements, got %d", n)
	}
	v, err := pmix.DecodeUint(dec, math.MaxUint32, "version")
	if err != nil {
		return nil, err
	}
	if v != messageVersion {
		return nil, pmix.Errorf(pmix.ErrNotSupported, "event message version %d, this agent speaks %d", v, messageVersion)
	}
	m := &Message{Size: len(b)}
	if m.ID, err = dec.DecodeString(); err != nil {
		return fail("id", err)
	}
	code, err := dec.DecodeInt64()
	if err != nil || code < math.MinInt32 || code > math.MaxInt32 {
		return fail("code", orRange(err))
	}
	m.Code = pmix.Status(code)
	r, err := pmix.DecodeUint(dec, math.MaxUint8, "range")
	if err != nil {
		return nil, err
	}
	m.Range = pmix.Range(r)
	if m.Environment, err = dec.DecodeBool(); err != nil {
		return fail("environment flag", err)
	}
	for _, s := range []*string{&m.Source.Cluster, &m.Source.Node, &m.Source.Session} {
		if *s, err = dec.DecodeString(); err != nil {
			return fail("source", err)
		}
	}
	c, err := dec.PeekCode()
	if err != nil {
		return fail("source proc", err)
	}
	if c == 0xc0 {
		_ = dec.DecodeNil()
	} else if err := m.Source.Proc.DecodeMsgpack(dec); err != nil {
		return nil, err
	}
	if m.Targets, err = pmix.DecodeProcs(dec); err != nil {
		return nil, err
	}
	if m.Info, err = pmix.DecodeInfos(dec); err != nil {
		return nil, err
	}
	ns, err := dec.DecodeInt64()
	if err != nil {
		return fail("time", err)
	}
	m.Time = time.Unix(0, ns)
	if _, err := dec.PeekCode(); !errors.Is(err, io.EOF) {
		return nil, pmix.Errorf(pmix.ErrUnpackFailure, "event message: trailing bytes")
	}
	return m, nil
}

func orRange(err error) error {
	if err != nil {
		return err
	}
	return errors.New("out of range")
}
