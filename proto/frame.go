package proto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/pmixbus/pmixbus/pmix"
)

// Version is the protocol version this package speaks: a client states
// the highest it speaks in its hello, and the agent's reply states the one
// the connection uses, the lower of the two (docs/protocol.md,
// *Versions*). Version 2 adds the batch frames (invoke-batch,
// invoke-done-batch).
const Version = 2

// MinVersion is the oldest protocol version an agent still speaks.
const MinVersion = 1

// DefaultMaxFrame is the largest frame body accepted unless configured
// otherwise: 4 MiB.
const DefaultMaxFrame = 4 << 20

// MaxHelloFrame is the largest frame body an agent reads before hello,
// when the peer is still nobody: 4 KiB, ten times what a hello with the
// longest nspace (pmix.MaxNspaceLen) needs.
const MaxHelloFrame = 4 << 10

// Bounds of an abort frame; beyond them the agent refuses it with
// PMIX_ERR_BAD_PARAM.
const (
	MaxAbortMessage = 4 << 10 // bytes of its message
	MaxAbortProcs   = 1 << 16 // procs it names
)

// MaxLogText is the most bytes one message of a log frame may carry; the
// agent refuses a longer one with PMIX_ERR_BAD_PARAM. A help message is a
// few KiB.
const MaxLogText = 64 << 10

// Type is a frame's type.
type Type uint8

// Frame types. The direction is client→agent (c→a) or agent→client (a→c).
const (
	TypeHello      Type = 1 // c→a: first frame; Version, Nspace, Rank, Credential
	TypeReply      Type = 2 // a→c: answers the request with the same Seq; Status, ErrorCode, Message, ID, Info
	TypeRegister   Type = 3 // c→a: Codes, Info
	TypeDeregister Type = 4 // c→a: ID
	TypeNotify     Type = 5 // c→a: Code, Range, Info
	TypeFinalize   Type = 6 // c→a: the agent replies, then closes
	TypeInvoke     Type = 7 // a→c: run handler ID; Name, Code, Source, Info, Results
	TypeInvokeDone Type = 8 // c→a: the handler completed; Status, Results, Prior
	TypeError      Type = 9 // a→c: unsolicited; Status, ErrorCode, Message; the agent closes after it

	// Publish/lookup (docs/protocol.md). Replies carry Status and Message;
	// a lookup's reply carries Data, also with PMIX_ERR_PARTIAL_SUCCESS
	// and PMIX_ERR_TIMEOUT.
	TypePublish   Type = 10 // c→a: Info, data and directives mixed as PMIx_Publish takes them
	TypeLookup    Type = 11 // c→a: Keys, Info (directives); reply: Data
	TypeUnpublish Type = 12 // c→a: Keys (none: all of the caller's), Info (directives)

	// Fence and the key-value exchange (docs/protocol.md). Replies carry
	// Status and Message; a get's reply carries Data.
	TypeFence  Type = 13 // c→a: Procs (the participants), Info (directives)
	TypeCommit Type = 14 // c→a: Puts, the values put since the last commit
	TypeGet    Type = 15 // c→a: Source (whose value), Keys (one key), Info (directives); reply: Data

	// Connect (RFC0003; docs/protocol.md).
	TypeConnect    Type = 16 // c→a: Procs (the participants), Info (directives); reply: Nspace, Rank
	TypeDisconnect Type = 17 // c→a: Nspace (a connect's new nspace), Info (directives)

	// Abort (PMIx_Abort; docs/protocol.md): the agent replies once it has
	// recorded the request and handed it to its host.
	TypeAbort Type = 18 // c→a: Status, Message, Procs (none: the caller's whole job)

	// Log (PMIx_Log; docs/protocol.md): the agent replies once the
	// messages are stored in the cluster's output stream.
	TypeLog Type = 19 // c→a: Info (the data), Results (the directives)

	// I/O forwarding (PMIx_IOF_push, PMIx_IOF_pull; docs/protocol.md).
	// The agent replies to a push once every target's agent queued the
	// data, which paces the pusher.
	TypeIOFPush       Type = 20 // c→a: Procs (the targets), Payload, Info (PMIX_IOF_COMPLETE: close their stdin after it)
	TypeIOFPull       Type = 21 // c→a: Procs, Channels, Info; reply: ID
	TypeIOFDeregister Type = 22 // c→a: ID (a pull's)
	TypeIOFData       Type = 23 // a→c: ID (the pull), Source, Channels (one), Seq (the record's), Payload, Info (PMIX_IOF_COMPLETE, the time)

	// Batches (version 2; docs/protocol.md): several invocations in one
	// frame, run in order, and several completions in one frame.
	TypeInvokeBatch     Type = 24 // a→c: Invokes
	TypeInvokeDoneBatch Type = 25 // c→a: Dones

	// The direct output path (docs/protocol.md, *Output to a launcher on
	// the node*): a launcher, not a client, attaches with it instead of a
	// hello; once answered, the agent sends it iof-data frames (ID 0) of
	// the job's local ranks.
	TypeOutputAttach Type = 26 // launcher→a: Nspace, Credential (the job's output token); reply

	// Spawn (PMIx_Spawn; docs/protocol.md): the agent replies once every
	// rank of the new job has started, with its nspace, or why not.
	TypeSpawn Type = 30 // c→a: Info (job-level directives), Apps; reply: Nspace
	// PMIx groups (PMIx_Group_*; docs/protocol.md). Nspace carries the
	// group's name; replies carry Status and Message, and construct's,
	// invite's and join's Results: PMIX_GROUP_CONTEXT_ID when one was
	// assigned, and PMIX_GROUP_MEMBERSHIP.
	TypeGroupConstruct Type = 40 // c→a: Nspace, Procs (the members), Info (directives, PMIX_GROUP_INFO)
	TypeGroupDestruct  Type = 41 // c→a: Nspace, Info (directives)
	TypeGroupInvite    Type = 42 // c→a: Nspace, Procs (the invitees), Info (directives)
	TypeGroupJoin      Type = 43 // c→a: Nspace, Source (the leader), Status (1: accept, 0: decline), Info (directives)
	TypeGroupLeave     Type = 44 // c→a: Nspace, Info (directives)
	// Queries, job control (issue 29's api frames, 50-59;
	// docs/protocol.md). Their replies carry Status, Message and Info.
	TypeJobControl Type = 50 // c→a: Procs (the targets; none: the caller's job), Info (the directives); reply: Info
	TypeQuery      Type = 51 // c→a: Info (each key asked, its value the qualifiers, an info array); reply: Info (the answers)
)

// MaxIOFPush bounds the payload of one push frame; beyond it the agent
// refuses it with PMIX_ERR_BAD_PARAM. It is what the agent sends a
// target's agent in one piece (launch.MaxStdinData), and fits the
// smallest frame limit an agent is likely to be given.
const MaxIOFPush = 64 << 10

var typeNames = map[Type]string{
	TypeHello: "hello", TypeReply: "reply", TypeRegister: "register", TypeDeregister: "deregister",
	TypeNotify: "notify", TypeFinalize: "finalize", TypeInvoke: "invoke", TypeInvokeDone: "invoke-done",
	TypeError: "error", TypePublish: "publish", TypeLookup: "lookup", TypeUnpublish: "unpublish",
	TypeFence: "fence", TypeCommit: "commit", TypeGet: "get", TypeConnect: "connect",
	TypeDisconnect: "disconnect", TypeAbort: "abort", TypeLog: "log", TypeIOFPush: "iof-push", TypeIOFPull: "iof-pull",
	TypeIOFDeregister: "iof-deregister", TypeIOFData: "iof-data", TypeInvokeBatch: "invoke-batch",
	TypeInvokeDoneBatch: "invoke-done-batch", TypeOutputAttach: "output-attach",

	TypeSpawn:          "spawn",
	TypeGroupConstruct: "group-construct", TypeGroupDestruct: "group-destruct", TypeGroupInvite: "group-invite", TypeGroupJoin: "group-join", TypeGroupLeave: "group-leave",
	TypeJobControl: "job-control",
	TypeQuery:      "query",
}

func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Frame is one protocol message. Which fields a type uses is listed with
// the Type constants; unused fields are zero and are not sent.
type Frame struct {
	Type    Type
	Seq     uint64 // the request id a reply answers; in invoke, the id the invoke-done answers
	Status  pmix.Status
	Message string
	// ErrorCode is the pmix.Error code of a failed reply or an error
	// ("agent.closed"): what lets errors.Is tell apart errors of one
	// status. Optional: peers that send none give status-only errors.
	ErrorCode string

	Version    uint32
	Nspace     string
	Rank       pmix.Rank
	Credential string

	ID      uint64 // a registration id
	Name    string // a handler's name, in invoke
	Codes   []pmix.Status
	Code    pmix.Status
	Range   pmix.Range
	Source  pmix.Proc // zero Nspace: the RM
	Info    []pmix.Info
	Results []pmix.Info
	Prior   []pmix.Info // in invoke-done: the prior results as the handler left them; nil: unchanged
	// HasPrior distinguishes "no edits" (false) from "every prior result
	// removed" (true, Prior empty).
	HasPrior bool

	Keys []string // in lookup and unpublish: the keys
	Data []PData  // in a lookup's reply: the values found

	Procs []pmix.Proc // in fence and connect: the participants; in abort: the procs to abort
	Puts  []Put       // in commit: the values put

	Payload  []byte // in iof-push and iof-data: the bytes
	Channels uint16 // in iof-pull and iof-data: PMIx's pmix_iof_channel_t mask

	Invokes []Invoke // in invoke-batch: the invocations, in the order to run them
	Dones   []Done   // in invoke-done-batch: the completions

	Apps []App // in spawn: the app contexts
}

// Put is one value PMIx_Put stored, as a commit carries it. On the wire:
// [scope: uint, key: str, value: Value].
type Put struct {
	Scope pmix.Scope
	Key   string
	Value pmix.Value
}

// PData is one value a lookup found (pmix_pdata_t): the publisher, its
// nspace "cluster:nspace" when it runs in another cluster, the key and the
// value. On the wire: [proc: Proc, key: str, value: Value].
type PData struct {
	Proc  pmix.Proc
	Key   string
	Value pmix.Value
}

// Keys of the frame map. They are short because every event crosses the
// socket at least twice.
const (
	kType, kSeq, kStatus, kMessage, kErrorCode = "t", "s", "st", "m", "ec"
	kVersion, kNspace, kRank, kCredential      = "v", "ns", "rk", "cr"
	kID, kName, kCodes, kCode, kRange, kSource = "id", "nm", "cs", "c", "r", "src"
	kInfo, kResults, kPrior                    = "in", "res", "pr"
	kKeys, kData                               = "ks", "pd"
	kProcs, kPuts                              = "pc", "pt"
	kPayload, kChannels                        = "b", "ch"
	kInvokes, kDones                           = "iv", "dn"
	kApps                                      = "ap"
)

// Err returns the frame's status, error code and message as an error: nil
// for success.
func (f *Frame) Err() error {
	if f.Status == pmix.Success {
		return nil
	}
	return &pmix.Error{Status: f.Status, Code: f.ErrorCode, Message: f.Message}
}

// SetErr fills Status, ErrorCode and Message from err, which Err gives
// back: the status once (pmix.MessageOf leaves its name out of Message)
// and the code of the sentinel err derives from. A nil err leaves them
// zero.
func (f *Frame) SetErr(err error) {
	f.Status, f.ErrorCode, f.Message = pmix.StatusOf(err), pmix.CodeOf(err), pmix.MessageOf(err)
}

// Marshal encodes the frame body (without the length prefix).
func (f *Frame) Marshal() ([]byte, error) { return f.appendTo(nil) }

// Field bits, in the order the fields are written.
const (
	bType = 1 << iota
	bSeq
	bStatus
	bMessage
	bErrorCode
	bVersion
	bNspace
	bRank
	bCredential
	bID
	bName
	bCodes
	bCode
	bRange
	bSource
	bInfo
	bResults
	bPrior
	bKeys
	bData
	bProcs
	bPuts
	bPayload
	bChannels
	bInvokes
	bDones
	bApps
	bEnd
)

// present returns the bits of the fields f sends.
func (f *Frame) present() uint32 {
	m := uint32(bType)
	set := func(ok bool, bit uint32) {
		if ok {
			m |= bit
		}
	}
	set(f.Seq != 0, bSeq)
	set(f.Status != 0, bStatus)
	set(f.Message != "", bMessage)
	set(f.ErrorCode != "", bErrorCode)
	set(f.Version != 0, bVersion)
	set(f.Nspace != "", bNspace)
	set(f.Rank != 0 || f.Type == TypeHello, bRank)
	set(f.Credential != "", bCredential)
	set(f.ID != 0, bID)
	set(f.Name != "", bName)
	set(f.Codes != nil, bCodes)
	set(f.Code != 0 || f.Type == TypeNotify || f.Type == TypeInvoke, bCode)
	set(f.Range != 0, bRange)
	set(f.Source != (pmix.Proc{}), bSource)
	set(len(f.Info) > 0, bInfo)
	set(len(f.Results) > 0, bResults)
	set(f.HasPrior || f.Prior != nil, bPrior)
	set(len(f.Keys) > 0, bKeys)
	set(len(f.Data) > 0, bData)
	set(len(f.Procs) > 0, bProcs)
	set(len(f.Puts) > 0, bPuts)
	set(len(f.Payload) > 0, bPayload)
	set(f.Channels != 0, bChannels)
	set(len(f.Invokes) > 0, bInvokes)
	set(len(f.Dones) > 0, bDones)
	set(len(f.Apps) > 0, bApps)
	return m
}

// appendTo appends the encoded body to b.
func (f *Frame) appendTo(b []byte) ([]byte, error) {
	e := getEncoder(b)
	defer putEncoder(e)
	if err := f.encode(e.enc); err != nil {
		return b, err
	}
	return e.w.b, nil
}

func (f *Frame) encode(enc *msgpack.Encoder) error {
	mask := f.present()
	if err := enc.EncodeMapLen(bits.OnesCount32(mask)); err != nil {
		return err
	}
	for bit := uint32(1); bit < bEnd; bit <<= 1 {
		if mask&bit == 0 {
			continue
		}
		if err := f.encodeField(enc, bit); err != nil {
			return err
		}
	}
	return nil
}

func (f *Frame) encodeField(enc *msgpack.Encoder, bit uint32) error {
	key := func(k string) error { return enc.EncodeString(k) }
	var err error
	switch bit {
	case bType:
		if err = key(kType); err == nil {
			err = enc.EncodeUint(uint64(f.Type))
		}
	case bSeq:
		if err = key(kSeq); err == nil {
			err = enc.EncodeUint(f.Seq)
		}
	case bStatus:
		if err = key(kStatus); err == nil {
			err = enc.EncodeInt(int64(f.Status))
		}
	case bMessage:
		if err = key(kMessage); err == nil {
			err = enc.EncodeString(f.Message)
		}
	case bErrorCode:
		if err = key(kErrorCode); err == nil {
			err = enc.EncodeString(f.ErrorCode)
		}
	case bVersion:
		if err = key(kVersion); err == nil {
			err = enc.EncodeUint(uint64(f.Version))
		}
	case bNspace:
		if err = key(kNspace); err == nil {
			err = enc.EncodeString(f.Nspace)
		}
	case bRank:
		if err = key(kRank); err == nil {
			err = enc.EncodeUint(uint64(f.Rank))
		}
	case bCredential:
		if err = key(kCredential); err == nil {
			err = enc.EncodeString(f.Credential)
		}
	case bID:
		if err = key(kID); err == nil {
			err = enc.EncodeUint(f.ID)
		}
	case bName:
		if err = key(kName); err == nil {
			err = enc.EncodeString(f.Name)
		}
	case bCodes:
		if err = key(kCodes); err == nil {
			err = enc.EncodeArrayLen(len(f.Codes))
		}
		for _, c := range f.Codes {
			if err != nil {
				break
			}
			err = enc.EncodeInt(int64(c))
		}
	case bCode:
		if err = key(kCode); err == nil {
			err = enc.EncodeInt(int64(f.Code))
		}
	case bRange:
		if err = key(kRange); err == nil {
			err = enc.EncodeUint(uint64(f.Range))
		}
	case bSource:
		if err = key(kSource); err == nil {
			err = f.Source.EncodeMsgpack(enc)
		}
	case bInfo:
		if err = key(kInfo); err == nil {
			err = pmix.EncodeInfos(enc, f.Info)
		}
	case bResults:
		if err = key(kResults); err == nil {
			err = pmix.EncodeInfos(enc, f.Results)
		}
	case bPrior:
		if err = key(kPrior); err == nil {
			err = pmix.EncodeInfos(enc, f.Prior)
		}
	case bKeys:
		if err = key(kKeys); err == nil {
			err = enc.EncodeArrayLen(len(f.Keys))
		}
		for _, k := range f.Keys {
			if err != nil {
				break
			}
			err = enc.EncodeString(k)
		}
	case bData:
		if err = key(kData); err == nil {
			err = encodePData(enc, f.Data)
		}
	case bProcs:
		if err = key(kProcs); err == nil {
			err = pmix.EncodeProcs(enc, f.Procs)
		}
	case bPuts:
		if err = key(kPuts); err == nil {
			err = EncodePuts(enc, f.Puts)
		}
	case bPayload:
		if err = key(kPayload); err == nil {
			err = enc.EncodeBytes(f.Payload)
		}
	case bChannels:
		if err = key(kChannels); err == nil {
			err = enc.EncodeUint(uint64(f.Channels))
		}
	case bInvokes:
		if err = key(kInvokes); err == nil {
			err = encodeEntries(enc, f.Invokes, (*Invoke).encode)
		}
	case bDones:
		if err = key(kDones); err == nil {
			err = encodeEntries(enc, f.Dones, (*Done).encode)
		}
	case bApps:
		if err = key(kApps); err == nil {
			err = encodeApps(enc, f.Apps)
		}
	}
	return err
}

// Unmarshal decodes a frame body. It returns an *pmix.Error with
// ErrUnpackFailure for malformed input: a body that is not a map, a length
// that claims more than the body holds, a value of the wrong kind, bytes
// after the map, or an unknown key whose value is not a scalar (unknown
// scalar keys are skipped, for forward compatibility).
func Unmarshal(b []byte) (*Frame, error) {
	f := frames.Get().(*Frame)
	err := decodeChecked(b, func(d *decoder) error {
		if err := f.decode(d); err != nil {
			return err
		}
		if _, err := d.dec.PeekCode(); !errors.Is(err, io.EOF) {
			return pmix.Errorf(pmix.ErrUnpackFailure, "frame: trailing bytes after the map")
		}
		return nil
	})
	if err != nil {
		f.Recycle()
		return nil, err
	}
	if f.Type == 0 {
		f.Recycle()
		return nil, pmix.Errorf(pmix.ErrUnpackFailure, "frame: no type")
	}
	return f, nil
}

func (f *Frame) decode(d *decoder) error {
	dec := d.dec
	// DecodeMapLen takes an ext for a header and reads the map from its
	// payload on, past what CheckLengths measured.
	if c, err := dec.PeekCode(); err == nil && msgpcode.IsExt(c) {
		return pmix.Errorf(pmix.ErrUnpackFailure, "frame is an ext, not a map")
	}
	n, err := dec.DecodeMapLen()
	if err != nil || n < 0 {
		return bad("frame is not a map", err)
	}
	// Keys are read into a buffer and compared without allocating: a frame
	// is decoded for every handler invocation.
	var kbuf [32]byte
	var seenKnown uint32
	var seenOther map[string]bool
	for range n {
		kn, err := dec.DecodeBytesLen()
		if err != nil || kn < 0 {
			return bad("frame key", err)
		}
		var kb []byte
		if kn <= len(kbuf) {
			kb = kbuf[:kn]
		} else {
			kb = make([]byte, 0, min(kn, 1<<10))
			for len(kb) < kn { // grow as bytes arrive, like pmix's decoder
				c := min(kn-len(kb), 1<<10)
				kb = append(kb, make([]byte, c)...)
				if err := dec.ReadFull(kb[len(kb)-c:]); err != nil {
					return bad("frame key", err)
				}
			}
		}
		if kn <= len(kbuf) {
			if err := dec.ReadFull(kb); err != nil {
				return bad("frame key", err)
			}
		}
		if bit := keyBit(kb); bit != 0 {
			if seenKnown&bit != 0 {
				return pmix.Errorf(pmix.ErrUnpackFailure, "frame: key %q given twice", kb)
			}
			seenKnown |= bit
		} else {
			if seenOther == nil {
				seenOther = map[string]bool{}
			}
			if seenOther[string(kb)] {
				return pmix.Errorf(pmix.ErrUnpackFailure, "frame: key %q given twice", kb)
			}
			seenOther[string(kb)] = true
		}
		if err := f.decodeField(d, kb); err != nil {
			return err
		}
	}
	return nil
}

// keyBit is the field bit of a known key, 0 for others.
func keyBit(kb []byte) uint32 {
	switch string(kb) {
	case kType:
		return bType
	case kSeq:
		return bSeq
	case kStatus:
		return bStatus
	case kMessage:
		return bMessage
	case kErrorCode:
		return bErrorCode
	case kVersion:
		return bVersion
	case kNspace:
		return bNspace
	case kRank:
		return bRank
	case kCredential:
		return bCredential
	case kID:
		return bID
	case kName:
		return bName
	case kCodes:
		return bCodes
	case kCode:
		return bCode
	case kRange:
		return bRange
	case kSource:
		return bSource
	case kInfo:
		return bInfo
	case kResults:
		return bResults
	case kPrior:
		return bPrior
	case kKeys:
		return bKeys
	case kData:
		return bData
	case kProcs:
		return bProcs
	case kPuts:
		return bPuts
	case kPayload:
		return bPayload
	case kChannels:
		return bChannels
	case kInvokes:
		return bInvokes
	case kDones:
		return bDones
	case kApps:
		return bApps
	}
	return 0
}

func (f *Frame) decodeField(d *decoder, kb []byte) error {
	dec := d.dec
	// The field's name goes into messages only on error.
	field := func() string { return "frame field " + string(kb) }
	u := func(max uint64) (uint64, error) {
		n, err := pmix.DecodeUint(dec, max, "value")
		if err != nil {
			return 0, pmix.Errorf(pmix.ErrUnpackFailure, "%s: %v", field(), pmix.MessageOf(err))
		}
		return n, nil
	}
	i32 := func() (pmix.Status, error) { return decodeStatus(dec, field) }
	str := func() (string, error) {
		s, err := dec.DecodeString()
		if err != nil {
			return "", bad(field(), err)
		}
		return s, nil
	}
	var err error
	var n uint64
	switch string(kb) {
	case kType:
		n, err = u(math.MaxUint8)
		f.Type = Type(n)
	case kSeq:
		f.Seq, err = u(math.MaxUint64)
	case kStatus:
		f.Status, err = i32()
	case kMessage:
		f.Message, err = str()
	case kErrorCode:
		f.ErrorCode, err = str()
	case kVersion:
		n, err = u(math.MaxUint32)
		f.Version = uint32(n)
	case kNspace:
		f.Nspace, err = str()
	case kRank:
		n, err = u(math.MaxUint32)
		f.Rank = pmix.Rank(n)
	case kCredential:
		f.Credential, err = str()
	case kID:
		f.ID, err = u(math.MaxUint64)
	case kName:
		f.Name, err = str()
	case kCodes:
		var cnt int
		if cnt, err = dec.DecodeArrayLen(); err != nil {
			return bad(field(), err)
		}
		f.Codes = make([]pmix.Status, 0, min(max(cnt, 0), 64))
		for range cnt {
			c, err := i32()
			if err != nil {
				return err
			}
			f.Codes = append(f.Codes, c)
		}
	case kCode:
		f.Code, err = i32()
	case kRange:
		n, err = u(math.MaxUint8)
		f.Range = pmix.Range(n)
	case kSource:
		err = f.Source.DecodeMsgpack(dec)
	case kInfo:
		f.Info, err = pmix.DecodeInfos(dec)
	case kResults:
		f.Results, err = pmix.DecodeInfos(dec)
	case kPrior:
		f.Prior, err = pmix.DecodeInfos(dec)
		f.HasPrior = true
		if f.Prior == nil {
			f.Prior = []pmix.Info{}
		}
	case kKeys:
		var cnt int
		if cnt, err = dec.DecodeArrayLen(); err != nil {
			return bad(field(), err)
		}
		for range cnt {
			k, err := str()
			if err != nil {
				return err
			}
			f.Keys = append(f.Keys, k)
		}
	case kData:
		f.Data, err = decodePData(dec)
	case kProcs:
		f.Procs, err = pmix.DecodeProcs(dec)
	case kPuts:
		f.Puts, err = DecodePuts(dec)
	case kPayload:
		if f.Payload, err = dec.DecodeBytes(); err != nil {
			return bad(field(), err)
		}
	case kChannels:
		n, err = u(math.MaxUint16)
		f.Channels = uint16(n)
	case kInvokes:
		f.Invokes, err = decodeInvokes(d)
	case kDones:
		f.Dones, err = decodeDones(dec)
	case kApps:
		f.Apps, err = decodeApps(dec)
	default:
		return skipScalar(dec, string(kb))
	}
	return err
}

func encodePData(enc *msgpack.Encoder, data []PData) error {
	if err := enc.EncodeArrayLen(len(data)); err != nil {
		return err
	}
	for _, d := range data {
		if err := enc.EncodeArrayLen(3); err != nil {
			return err
		}
		if err := d.Proc.EncodeMsgpack(enc); err != nil {
			return err
		}
		if err := enc.EncodeString(d.Key); err != nil {
			return err
		}
		if err := d.Value.EncodeMsgpack(enc); err != nil {
			return err
		}
	}
	return nil
}

// decodePData reads what encodePData wrote; an empty list decodes as nil,
// the same as an absent one.
func decodePData(dec *msgpack.Decoder) ([]PData, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, bad("frame field "+kData, err)
	}
	var out []PData
	for range n {
		m, err := dec.DecodeArrayLen()
		if err != nil {
			return nil, bad("frame field "+kData, err)
		}
		if m != 3 {
			return nil, pmix.Errorf(pmix.ErrUnpackFailure, "frame field %s: want [proc, key, value], got %d elements", kData, m)
		}
		var d PData
		if err := d.Proc.DecodeMsgpack(dec); err != nil {
			return nil, err
		}
		if d.Key, err = dec.DecodeString(); err != nil {
			return nil, bad("frame field "+kData, err)
		}
		if err := d.Value.DecodeMsgpack(dec); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// EncodePuts writes puts as an array of [scope, key, value].
func EncodePuts(enc *msgpack.Encoder, puts []Put) error {
	if err := enc.EncodeArrayLen(len(puts)); err != nil {
		return err
	}
	for _, p := range puts {
		if err := enc.EncodeArrayLen(3); err != nil {
			return err
		}
		if err := enc.EncodeUint(uint64(p.Scope)); err != nil {
			return err
		}
		if err := enc.EncodeString(p.Key); err != nil {
			return err
		}
		if err := p.Value.EncodeMsgpack(enc); err != nil {
			return err
		}
	}
	return nil
}

// DecodePuts reads what EncodePuts wrote; an empty list decodes as nil.
func DecodePuts(dec *msgpack.Decoder) ([]Put, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, bad("frame field "+kPuts, err)
	}
	var out []Put
	for range n {
		m, err := dec.DecodeArrayLen()
		if err != nil {
			return nil, bad("frame field "+kPuts, err)
		}
		if m != 3 {
			return nil, pmix.Errorf(pmix.ErrUnpackFailure, "frame field %s: want [scope, key, value], got %d elements", kPuts, m)
		}
		var p Put
		sc, err := pmix.DecodeUint(dec, math.MaxUint8, "put scope")
		if err != nil {
			return nil, err
		}
		p.Scope = pmix.Scope(sc)
		if p.Key, err = dec.DecodeString(); err != nil {
			return nil, bad("frame field "+kPuts, err)
		}
		if err := p.Value.DecodeMsgpack(dec); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// skipScalar skips an unknown key's value if it is a scalar. Nested values
// of unknown keys are refused: skipping them would recurse as deep as the
// input nests.
func skipScalar(dec *msgpack.Decoder, key string) error {
	c, err := dec.PeekCode()
	if err != nil {
		return bad("frame field "+key, err)
	}
	if msgpcode.IsFixedArray(c) || msgpcode.IsFixedMap(c) || c == msgpcode.Array16 || c == msgpcode.Array32 ||
		c == msgpcode.Map16 || c == msgpcode.Map32 {
		return pmix.Errorf(pmix.ErrUnpackFailure, "frame: unknown key %q with a nested value", key)
	}
	if err := dec.Skip(); err != nil {
		return bad("frame field "+key, err)
	}
	return nil
}

func bad(what string, err error) error {
	var pe *pmix.Error
	if errors.As(err, &pe) {
		return err
	}
	if err == nil {
		return pmix.Errorf(pmix.ErrUnpackFailure, "%s", what)
	}
	return pmix.Errorf(pmix.ErrUnpackFailure, "%s: %v", what, err)
}

// WriteFrame writes one frame: a 4-byte big-endian body length, then the
// body. It refuses to write a body over math.MaxUint32 bytes.
func WriteFrame(w io.Writer, f *Frame) error {
	buf, err := AppendFrame(nil, f)
	if err != nil {
		return err
	}
	_, err = w.Write(buf)
	return err
}

// AppendFrame appends f, length prefix and body, to b.
func AppendFrame(b []byte, f *Frame) ([]byte, error) {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b, err := f.appendTo(b)
	if err != nil {
		return b[:start], err
	}
	n := len(b) - start - 4
	if uint64(n) > math.MaxUint32 {
		return b[:start], pmix.Errorf(pmix.ErrBadParam, "frame of %d bytes is too large", n)
	}
	binary.BigEndian.PutUint32(b[start:], uint32(n))
	return b, nil
}

// ErrFrameTooLarge is the status of a frame whose length prefix exceeds the
// reader's limit.
const ErrFrameTooLarge = pmix.ErrInvalidLength

// ReadFrame reads one frame. A length over maxBody gives an error with
// ErrFrameTooLarge's status before any of the body is read; a malformed body
// gives ErrUnpackFailure; I/O errors (io.EOF at a frame boundary) are
// returned as they are.
func ReadFrame(r io.Reader, maxBody int) (*Frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if uint64(n) > uint64(maxBody) {
		return nil, pmix.Errorf(ErrFrameTooLarge, "frame of %d bytes exceeds the limit of %d", n, maxBody)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return Unmarshal(body)
}
