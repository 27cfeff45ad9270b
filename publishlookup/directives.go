package publishlookup

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
)

// MaxKeyLen is PMIX_MAX_KEYLEN: a published key holds at most this many
// bytes.
const MaxKeyLen = 511

// KeyCustomRange carries the procs of a PMIX_RANGE_CUSTOM publication (who
// may see it) or lookup (whose publications to accept). PMIx names no
// attribute for it outside events, so pmixbus uses the event one,
// PMIX_EVENT_CUSTOM_RANGE ([]Proc; "cluster:nspace" for other clusters).
const KeyCustomRange = pmix.KeyEventCustomRange

// publishRequest is a publish's data and directives.
type publishRequest struct {
	data        []pmix.Info
	rng         pmix.Range
	persistence pmix.Persistence
	accessUIDs  []uint32
	accessGIDs  []uint32
	custom      []pmix.Proc
	timeout     time.Duration
}

// isDirective reports whether an info of PMIx_Publish's array directs the
// publish rather than being data to publish.
func isDirective(key string) bool {
	switch key {
	case pmix.KeyRange, pmix.KeyPersistence, pmix.KeyAccessPermissions, pmix.KeyAccessUserIDs,
		pmix.KeyAccessGroupIDs, pmix.KeyTimeout, KeyCustomRange:
		return true
	}
	return false
}

// parsePublish splits infos into data and directives. Defaults, per the
// PMIx Standard: PMIX_RANGE_SESSION, PMIX_PERSIST_APP, and the publisher's
// own user and group as the only ones allowed to read.
func parsePublish(infos []pmix.Info) (*publishRequest, error) {
	req := &publishRequest{rng: pmix.RangeSession, persistence: pmix.PersistApp}
	for _, in := range infos {
		var err error
		switch in.Key {
		case pmix.KeyRange:
			req.rng, err = rangeOf(in.Value)
		case pmix.KeyPersistence:
			req.persistence, err = persistenceOf(in.Value)
		case pmix.KeyAccessPermissions:
			perms, ok := in.Value.Infos()
			if !ok {
				return nil, pmix.Errorf(pmix.ErrBadParam, "%s: want an info array, got %s", in.Key, in.Value.Type())
			}
			for _, p := range perms {
				switch p.Key {
				case pmix.KeyAccessUserIDs, pmix.KeyAccessGroupIDs:
					err = req.addIDs(p)
				default:
					err = pmix.Errorf(pmix.ErrBadParam, "%s: unknown permission %s; a restriction that cannot be enforced is refused", in.Key, pmix.Quote(p.Key))
				}
				if err != nil {
					return nil, err
				}
			}
		case pmix.KeyAccessUserIDs, pmix.KeyAccessGroupIDs:
			err = req.addIDs(in)
		case pmix.KeyTimeout:
			req.timeout, err = timeoutOf(in.Value)
		case KeyCustomRange:
			procs, ok := in.Value.Procs()
			if !ok {
				return nil, pmix.Errorf(pmix.ErrBadParam, "%s: want procs, got %s", in.Key, in.Value.Type())
			}
			req.custom = append(req.custom, procs...)
		default:
			if err := checkKey(in.Key); err != nil {
				return nil, err
			}
			if slices.ContainsFunc(req.data, func(d pmix.Info) bool { return d.Key == in.Key }) {
				return nil, pmix.Errorf(pmix.ErrDuplicateKey, "key %s given twice in one publish", pmix.Quote(in.Key))
			}
			req.data = append(req.data, in)
		}
		if err != nil {
			return nil, err
		}
	}
	switch {
	case len(req.data) == 0:
		return nil, pmix.Errorf(pmix.ErrBadParam, "publish of no data: every info given is a directive")
	case req.rng == pmix.RangeCustom && len(req.custom) == 0:
		return nil, pmix.Errorf(pmix.ErrBadParam, "PMIX_RANGE_CUSTOM needs %s with the procs that may see the data", KeyCustomRange)
	case req.rng != pmix.RangeCustom && len(req.custom) > 0:
		return nil, pmix.Errorf(pmix.ErrBadParam, "%s given with %v: only PMIX_RANGE_CUSTOM takes a proc list", KeyCustomRange, req.rng)
	}
	return req, nil
}

func (req *publishRequest) addIDs(in pmix.Info) error {
	ids, err := idsOf(in)
	if err != nil {
		return err
	}
	if in.Key == pmix.KeyAccessUserIDs {
		req.accessUIDs = append(req.accessUIDs, ids...)
	} else {
		req.accessGIDs = append(req.accessGIDs, ids...)
	}
	return nil
}

// idsOf reads a uid or gid list: a string of comma-separated numbers, or
// one unsigned number.
func idsOf(in pmix.Info) ([]uint32, error) {
	if s, ok := in.Value.Str(); ok {
		var ids []uint32
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
			if err != nil {
				return nil, pmix.Errorf(pmix.ErrBadParam, "%s %s: want comma-separated ids", in.Key, pmix.Quote(s))
			}
			ids = append(ids, uint32(n))
		}
		return ids, nil
	}
	if n, ok := in.Value.Int(); ok && n >= 0 && n <= math.MaxUint32 {
		return []uint32{uint32(n)}, nil
	}
	return nil, pmix.Errorf(pmix.ErrBadParam, "%s: want comma-separated ids or one id, got %s", in.Key, in.Value)
}

// rangeOf reads PMIX_RANGE for data: LOCAL, NAMESPACE, SESSION, GLOBAL or
// CUSTOM. RM and PROC_LOCAL name no set of processes data could be shared
// with here.
func rangeOf(v pmix.Value) (pmix.Range, error) {
	r, ok := v.Range()
	if !ok {
		n, isInt := v.Int()
		if !isInt || n < 0 || n > math.MaxUint8 {
			return 0, pmix.Errorf(pmix.ErrBadParam, "%s: want a range, got %s", pmix.KeyRange, v)
		}
		r = pmix.Range(n)
	}
	switch r {
	case pmix.RangeLocal, pmix.RangeNamespace, pmix.RangeSession, pmix.RangeGlobal, pmix.RangeCustom:
		return r, nil
	case pmix.RangeRM, pmix.RangeProcLocal:
		return 0, pmix.Errorf(pmix.ErrNotSupported, "%v is not a range for published data", r)
	}
	return 0, pmix.Errorf(pmix.ErrBadParam, "invalid range %v", r)
}

func persistenceOf(v pmix.Value) (pmix.Persistence, error) {
	p, ok := v.Persistence()
	if !ok {
		n, isInt := v.Int()
		if !isInt || n < 0 || n > math.MaxUint8 {
			return 0, pmix.Errorf(pmix.ErrBadParam, "%s: want a persistence, got %s", pmix.KeyPersistence, v)
		}
		p = pmix.Persistence(n)
	}
	if !p.Valid() {
		return 0, pmix.Errorf(pmix.ErrBadParam, "invalid persistence %v", p)
	}
	return p, nil
}

// timeoutOf reads PMIX_TIMEOUT: whole seconds, 0 for none.
func timeoutOf(v pmix.Value) (time.Duration, error) {
	n, ok := v.Int()
	if !ok || n < 0 || n > math.MaxInt32 {
		return 0, pmix.Errorf(pmix.ErrBadParam, "%s: want seconds as a non-negative integer, got %s", pmix.KeyTimeout, v)
	}
	return time.Duration(n) * time.Second, nil
}

// checkKey refuses an empty key, and one longer than MaxKeyLen: made into
// a KV key and then a subject, it would exceed what a NATS server accepts
// in a protocol line ("maximum control line exceeded", which drops the
// connection).
func checkKey(key string) error {
	switch {
	case key == "":
		return pmix.Errorf(pmix.ErrBadParam, "empty key")
	case len(key) > MaxKeyLen:
		return pmix.Errorf(pmix.ErrBadParam, "key too long: %d bytes, at most %d (%s)", len(key), MaxKeyLen, pmix.Quote(key))
	}
	return nil
}

// lookupRequest is a lookup's keys and directives.
type lookupRequest struct {
	keys    []string
	rng     pmix.Range // RangeUndef: no restriction from the requester's side
	custom  []pmix.Proc
	wait    bool
	need    int // values to wait for; len(keys) for all
	timeout time.Duration
}

// parseLookup reads PMIx_Lookup's keys and directives: PMIX_RANGE (whose
// publications to accept; none means any range), PMIX_WAIT (an integer: the
// number of values to wait for, 0 for all; or a flag: all), PMIX_TIMEOUT
// (seconds) and, for a CUSTOM range, the proc list.
func parseLookup(keys []string, directives []pmix.Info) (*lookupRequest, error) {
	req := &lookupRequest{}
	var err error
	if req.keys, err = uniqueKeys(keys); err != nil {
		return nil, err
	}
	if len(req.keys) == 0 {
		return nil, pmix.Errorf(pmix.ErrBadParam, "lookup of no keys")
	}
	for _, in := range directives {
		switch in.Key {
		case pmix.KeyRange:
			req.rng, err = rangeOf(in.Value)
		case pmix.KeyWait:
			req.wait = true
			if in.Value.IsUndef() {
				break
			}
			if b, ok := in.Value.Bool(); ok {
				req.wait = b
				break
			}
			n, ok := in.Value.Int()
			if !ok || n < 0 {
				return nil, pmix.Errorf(pmix.ErrBadParam, "%s: want a number of values (0: all), got %s", in.Key, in.Value)
			}
			req.need = int(min(n, int64(len(req.keys))))
		case pmix.KeyTimeout:
			req.timeout, err = timeoutOf(in.Value)
		case KeyCustomRange:
			procs, ok := in.Value.Procs()
			if !ok {
				return nil, pmix.Errorf(pmix.ErrBadParam, "%s: want procs, got %s", in.Key, in.Value.Type())
			}
			req.custom = append(req.custom, procs...)
		}
		if err != nil {
			return nil, err
		}
	}
	if req.need == 0 {
		req.need = len(req.keys)
	}
	if req.rng == pmix.RangeCustom && len(req.custom) == 0 {
		return nil, pmix.Errorf(pmix.ErrBadParam, "PMIX_RANGE_CUSTOM needs %s with the procs whose data to accept", KeyCustomRange)
	}
	return req, nil
}

// unpublishRequest is an unpublish's keys and directives.
type unpublishRequest struct {
	keys    []string // none: everything the caller published
	rng     pmix.Range
	timeout time.Duration
}

func parseUnpublish(keys []string, directives []pmix.Info) (*unpublishRequest, error) {
	req := &unpublishRequest{}
	var err error
	if req.keys, err = uniqueKeys(keys); err != nil {
		return nil, err
	}
	for _, in := range directives {
		switch in.Key {
		case pmix.KeyRange:
			req.rng, err = rangeOf(in.Value)
		case pmix.KeyTimeout:
			req.timeout, err = timeoutOf(in.Value)
		}
		if err != nil {
			return nil, err
		}
	}
	return req, nil
}

// uniqueKeys checks each key and drops repeats, keeping the first order.
func uniqueKeys(keys []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return nil, err
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out, nil
}
