package publishlookup

import (
	"bytes"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// Identity is a process as its agent authenticated it: the agent stamps it
// on every request, whatever the client claims.
type Identity struct {
	Cluster cluster.ID
	Node    string
	Session string
	Proc    pmix.Proc // Proc.Nspace is the nspace within Cluster, unqualified
	UID     int       // -1: unknown (a client attached over TCP)
	GID     int       // -1: unknown
}

// Datum is one value a lookup found (pmix_pdata_t), with what its
// publisher stored it with.
type Datum struct {
	Key   string
	Value pmix.Value
	// Proc is the publisher, its nspace "cluster:nspace" when it runs in
	// another cluster than the requester (RFC0003).
	Proc        pmix.Proc
	Range       pmix.Range
	Persistence pmix.Persistence
}

// recordVersion is the first element of every stored record.
const recordVersion = 1

// record is one published value as stored in a bucket: a msgpack array
//
//	[1, key: str, value: Value, cluster: str, node: str, session: str,
//	 nspace: str, rank: uint, range: uint, persistence: uint,
//	 uid: int, gid: int, access uids: [uint], access gids: [uint],
//	 custom procs: [Proc], time: int (Unix nanoseconds)]
//
// Everything but key and value is stamped by the publisher's agent.
type record struct {
	Key         string
	Value       pmix.Value
	Publisher   Identity
	Range       pmix.Range
	Persistence pmix.Persistence
	AccessUIDs  []uint32
	AccessGIDs  []uint32
	Custom      []pmix.Proc // PMIX_RANGE_CUSTOM: who may see it, relative to the publisher's cluster
	Time        time.Time
}

const recordFields = 16

func (r *record) marshal() ([]byte, error) {
	e := encoders.Get().(*encoder)
	defer encoders.Put(e)
	e.buf.Reset()
	enc := e.enc
	p := r.Publisher
	steps := []func() error{
		func() error { return enc.EncodeArrayLen(recordFields) },
		func() error { return enc.EncodeUint(recordVersion) },
		func() error { return enc.EncodeString(r.Key) },
		func() error { return r.Value.EncodeMsgpack(enc) },
		func() error { return enc.EncodeString(string(p.Cluster)) },
		func() error { return enc.EncodeString(p.Node) },
		func() error { return enc.EncodeString(p.Session) },
		func() error { return enc.EncodeString(p.Proc.Nspace) },
		func() error { return enc.EncodeUint(uint64(p.Proc.Rank)) },
		func() error { return enc.EncodeUint(uint64(r.Range)) },
		func() error { return enc.EncodeUint(uint64(r.Persistence)) },
		func() error { return enc.EncodeInt(int64(p.UID)) },
		func() error { return enc.EncodeInt(int64(p.GID)) },
		func() error { return encodeIDs(enc, r.AccessUIDs) },
		func() error { return encodeIDs(enc, r.AccessGIDs) },
		func() error { return pmix.EncodeProcs(enc, r.Custom) },
		func() error { return enc.EncodeInt(r.Time.UnixNano()) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return bytes.Clone(e.buf.Bytes()), nil
}

// encoders pools msgpack encoders: every publish encodes a record per key.
var encoders = sync.Pool{New: func() any {
	e := &encoder{}
	e.enc = msgpack.NewEncoder(&e.buf)
	return e
}}

type encoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

func encodeIDs(enc *msgpack.Encoder, ids []uint32) error {
	if err := enc.EncodeArrayLen(len(ids)); err != nil {
		return err
	}
	for _, id := range ids {
		if err := enc.EncodeUint(uint64(id)); err != nil {
			return err
		}
	}
	return nil
}

// unmarshalRecord decodes a stored record. It returns an *pmix.Error with
// ErrUnpackFailure for anything else, whatever the bytes; it never panics,
// and allocates in proportion to len(b) whatever lengths b claims (anyone
// on NATS can write the bucket).
func unmarshalRecord(b []byte) (*record, error) {
	var r record
	if err := proto.DecodeChecked(b, r.decode); err != nil {
		return nil, wireErr(err)
	}
	return &r, nil
}

func (r *record) decode(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return pmix.Errorf(pmix.ErrUnpackFailure, "record: %v", err)
	}
	if n != recordFields {
		return pmix.Errorf(pmix.ErrUnpackFailure, "record: %d fields, want %d", n, recordFields)
	}
	var p Identity
	var cid string
	var rank, rng, persist uint64
	var uid, gid, nanos int64
	str := func(s *string) func() error {
		return func() (err error) { *s, err = dec.DecodeString(); return }
	}
	uintMax := func(u *uint64, max uint64, what string) func() error {
		return func() (err error) { *u, err = pmix.DecodeUint(dec, max, what); return }
	}
	i64 := func(i *int64) func() error {
		return func() (err error) { *i, err = dec.DecodeInt64(); return }
	}
	var version uint64
	steps := []func() error{
		uintMax(&version, math.MaxUint8, "record version"),
		func() error {
			if version != recordVersion {
				return pmix.Errorf(pmix.ErrUnpackFailure, "record version %d, want %d", version, recordVersion)
			}
			return nil
		},
		str(&r.Key),
		func() error { return r.Value.DecodeMsgpack(dec) },
		str(&cid),
		str(&p.Node),
		str(&p.Session),
		str(&p.Proc.Nspace),
		uintMax(&rank, math.MaxUint32, "record rank"),
		uintMax(&rng, math.MaxUint8, "record range"),
		uintMax(&persist, math.MaxUint8, "record persistence"),
		i64(&uid),
		i64(&gid),
		func() (err error) { r.AccessUIDs, err = decodeIDs(dec); return },
		func() (err error) { r.AccessGIDs, err = decodeIDs(dec); return },
		func() (err error) { r.Custom, err = pmix.DecodeProcs(dec); return },
		i64(&nanos),
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	if _, err := dec.PeekCode(); err == nil {
		return pmix.Errorf(pmix.ErrUnpackFailure, "record: trailing bytes")
	}
	if uid < -1 || uid > math.MaxUint32 || gid < -1 || gid > math.MaxUint32 {
		return pmix.Errorf(pmix.ErrUnpackFailure, "record: uid %d or gid %d out of range", uid, gid)
	}
	p.Cluster, p.Proc.Rank, p.UID, p.GID = cluster.ID(cid), pmix.Rank(rank), int(uid), int(gid)
	r.Publisher, r.Range, r.Persistence = p, pmix.Range(rng), pmix.Persistence(persist)
	r.Time = time.Unix(0, nanos).UTC()
	return nil
}

func decodeIDs(dec *msgpack.Decoder) ([]uint32, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	ids := make([]uint32, 0, min(max(n, 0), 64))
	for range n {
		id, err := pmix.DecodeUint(dec, math.MaxUint32, "access id")
		if err != nil {
			return nil, err
		}
		ids = append(ids, uint32(id))
	}
	return ids, nil
}

func wireErr(err error) error {
	if pmix.StatusOf(err) == pmix.ErrUnpackFailure {
		return err
	}
	return pmix.Errorf(pmix.ErrUnpackFailure, "record: %v", err)
}

// datum is what a lookup by q returns for r.
func (r *record) datum(q Identity) Datum {
	proc := r.Publisher.Proc
	if r.Publisher.Cluster != q.Cluster {
		proc.Nspace = cluster.Qualify(r.Publisher.Cluster, proc.Nspace)
	}
	return Datum{Key: r.Key, Value: r.Value, Proc: proc, Range: r.Range, Persistence: r.Persistence}
}

// publishedBy reports whether p published r.
func (r *record) publishedBy(p Identity) bool {
	return r.Publisher.Cluster == p.Cluster && r.Publisher.Proc == p.Proc
}

// permits reports whether r's access permissions admit q. With no access
// lists, only the publisher's own user and group do (as OpenPMIx's
// reference server decides); with lists, a uid in the uid list or a gid in
// the gid list does.
func (r *record) permits(q Identity) bool {
	if len(r.AccessUIDs) == 0 && len(r.AccessGIDs) == 0 {
		return q.UID == r.Publisher.UID && q.GID == r.Publisher.GID
	}
	return q.UID >= 0 && slices.Contains(r.AccessUIDs, uint32(q.UID)) ||
		q.GID >= 0 && slices.Contains(r.AccessGIDs, uint32(q.GID))
}
