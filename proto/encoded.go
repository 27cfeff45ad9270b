package proto

import (
	"slices"
	"sync"
	"unsafe"

	"github.com/pmixbus/pmixbus/pmix"
)

// EncodedInfos is an info list encoded once, for an agent that sends the
// same event info to many clients: an invocation whose Encoded is set
// takes its bytes instead of encoding Info again, if Info still holds the
// same infos. Immutable once made; safe for concurrent use.
type EncodedInfos struct {
	infos []pmix.Info // what it is the encoding of
	raw   []byte      // the array, header and entries, as EncodeInfos writes it
}

// EncodeInfoList encodes infos once. It keeps a copy of the list (the
// values in it are immutable).
func EncodeInfoList(infos []pmix.Info) (*EncodedInfos, error) {
	e := getEncoder(nil)
	defer putEncoder(e)
	if err := pmix.EncodeInfos(e.enc, infos); err != nil {
		return nil, err
	}
	return &EncodedInfos{infos: slices.Clone(infos), raw: e.w.b}, nil
}

// Of reports whether e is the encoding of infos: whether they are equal to
// the infos it was made of. Equality, not the slice's identity: chains
// share an event's list (bus.Prepare) only until a handler sets the
// resolved flag, and a caller may reuse a slice it passed.
func (e *EncodedInfos) Of(infos []pmix.Info) bool {
	return e != nil && pmix.InfosEqual(infos, e.infos)
}

// InfoCache holds the encodings of the info lists recently asked for: an
// agent delivering an event to its clients asks for the same info once per
// client and encodes it once. Clients' chains do not all start together (a
// client's chains beyond its window start as earlier ones end), so the
// invocations of many events interleave: the cache keeps the lists it
// encoded by the address of their first entry (the event's list, which
// every client's chain shares), up to cacheEntries lists and cacheBytes of
// encodings, and starts afresh when either is reached. An address only
// finds a candidate; equality decides (EncodedInfos.Of), so a list reused
// for other infos is encoded again. Safe for concurrent use. The zero
// InfoCache is empty.
type InfoCache struct {
	mu    sync.Mutex
	last  *EncodedInfos
	byPtr map[uintptr]*EncodedInfos // not a pointer: the cache keeps no list alive
	bytes int                       // of the encodings in byPtr
}

const (
	cacheEntries = 1024
	cacheBytes   = 4 << 20
)

// Get returns the encoding of infos, one it holds if that is still right,
// else a new one it keeps; nil if infos cannot be encoded (the invocation
// then encodes them itself, and fails).
func (c *InfoCache) Get(infos []pmix.Info) *EncodedInfos {
	c.mu.Lock()
	defer c.mu.Unlock()
	// By address first: with invocations of many events interleaved, the
	// last list is seldom this one, and comparing it would cost a failed
	// equality per invocation. The last list serves equal infos in a list
	// of their own.
	key := uintptr(unsafe.Pointer(unsafe.SliceData(infos)))
	if e := c.byPtr[key]; e.Of(infos) {
		c.last = e
		return e
	}
	if c.last.Of(infos) {
		return c.last
	}
	e, err := EncodeInfoList(infos)
	if err != nil {
		return nil
	}
	c.last = e
	if key == 0 {
		return e
	}
	if c.byPtr == nil || len(c.byPtr) >= cacheEntries || c.bytes+len(e.raw) > cacheBytes {
		c.byPtr, c.bytes = make(map[uintptr]*EncodedInfos), 0
	}
	if old := c.byPtr[key]; old != nil {
		c.bytes -= len(old.raw)
	}
	c.byPtr[key] = e
	c.bytes += len(e.raw)
	return e
}
