package publishlookup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
)

// Lookup finds the values published under keys that q may see, as
// PMIx_Lookup does. Directives: PMIX_RANGE (whose publications to accept:
// only those of publishers within that range of q; none means any),
// PMIX_WAIT (wait until that many values are found, 0 for all),
// PMIX_TIMEOUT (seconds) and, for a CUSTOM range, the proc list under
// KeyCustomRange.
//
// A publication is visible to q when its publisher is within q's range and
// q within the publication's range (both ways), and readable when its
// access permissions admit q. Of several visible publications of one key,
// the narrowest scope wins (LOCAL, NAMESPACE, SESSION, CUSTOM, GLOBAL). A
// PMIX_PERSIST_FIRST_READ value is deleted by the lookup that returns it,
// atomically: of concurrent lookups exactly one gets it.
//
// With PMIX_WAIT, Lookup waits on the mirror's follows of the buckets and
// returns as soon as enough values have been published; it never polls. A
// bucket that cannot be reached is followed again every Config.Retry until
// the lookup ends.
//
// Keys whose scopes the mirror holds are answered from it (see mirror.go
// for what that means for a change made through another agent).
//
// The values come back in the order of keys, found ones only, each with
// its publisher, "cluster:nspace" when that is another cluster. The error
// is nil when every key was found, and otherwise, its message naming the
// keys not found:
//
//   - ErrPartial (PMIX_ERR_PARTIAL_SUCCESS): some were, returned with it;
//   - ErrNotFound (PMIX_ERR_NOT_FOUND): none was, and every bucket that
//     could hold one was read;
//   - ErrNoPermissions (PMIX_ERR_NO_PERMISSIONS): none was readable, and
//     some key exists in range with permissions that exclude q;
//   - ErrTimeout (PMIX_ERR_TIMEOUT): PMIX_TIMEOUT passed first; the values
//     found by then come back with it (a FIRST_READ value is consumed);
//   - PMIX_ERR_UNREACH: without PMIX_WAIT and PMIX_TIMEOUT, a bucket that
//     could hold a missing key could not be reached;
//   - PMIX_ERR_BAD_PARAM for malformed keys or directives; ErrClosed.
func (s *Service) Lookup(ctx context.Context, q Identity, keys []string, directives []pmix.Info) ([]Datum, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	req, err := parseLookup(keys, directives)
	if err != nil {
		return nil, err
	}
	if req.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.timeout)
		defer cancel()
	}
	l := &lookup{s: s, q: q, req: req, found: make(map[string]Datum, len(req.keys)), scopes: make(map[string][]scope, len(req.keys))}
	for _, k := range req.keys {
		l.scopes[k] = s.lookupScopes(q, k)
	}
	return l.run(ctx)
}

// lookup is one Lookup in progress.
type lookup struct {
	s   *Service
	q   Identity
	req *lookupRequest

	scopes map[string][]scope // of each key, narrowest first

	mu          sync.Mutex
	found       map[string]Datum
	denied      map[string]bool // exists in range, not readable by q
	unreachable error           // a bucket of a missing key could not be read
	stale       bool            // a FIRST_READ value read was gone when taken
}

type scopeRef struct {
	kv  jetstream.KV
	key string
}

type scopeOf struct {
	key   string // the PMIx key
	scope scope
}

func (l *lookup) run(ctx context.Context) ([]Datum, error) {
	for {
		l.read(ctx)
		if l.satisfied() {
			return l.result(nil)
		}
		if l.req.wait {
			return l.result(l.watch(ctx))
		}
		l.mu.Lock()
		unreachable := l.unreachable
		l.mu.Unlock()
		if unreachable == nil || l.req.timeout == 0 {
			return l.result(unreachable)
		}
		// PMIX_TIMEOUT without PMIX_WAIT: a bucket that could hold a key
		// is unreachable; keep trying until the timeout.
		if err := pause(ctx, l.s.cfg.Retry); err != nil {
			return l.result(ErrTimeout)
		}
	}
}

// missing returns the keys not found yet, in request order.
func (l *lookup) missing() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, k := range l.req.keys {
		if _, ok := l.found[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

func (l *lookup) satisfied() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.found) >= l.req.need
}

// bucketKeys groups the scopes of keys by bucket.
func (l *lookup) bucketKeys(keys []string) map[jetstream.KV][]string {
	out := make(map[jetstream.KV][]string, 2)
	for _, k := range keys {
		for _, sc := range l.scopes[k] {
			out[sc.kv] = append(out[sc.kv], sc.key)
		}
	}
	return out
}

// refs returns the scopes of keys.
func (l *lookup) refs(keys []string) []scopeRef {
	var out []scopeRef
	for _, k := range keys {
		for _, sc := range l.scopes[k] {
			out = append(out, scopeRef{sc.kv, sc.key})
		}
	}
	return out
}

// read reads every scope of the missing keys, and takes for each key the
// narrowest visible, readable value: from the mirror when it holds every
// one of those scopes current, else from the buckets (and from the
// buckets again if a FIRST_READ value the mirror showed was gone).
func (l *lookup) read(ctx context.Context) {
	missing := l.missing()
	refs := l.refs(missing)
	entries, t, ok := l.s.mirror.read(refs)
	if ok {
		l.mu.Lock()
		l.stale = false
		l.mu.Unlock()
		l.takeAll(ctx, missing, entries, nil)
		l.mu.Lock()
		stale := l.stale
		l.mu.Unlock()
		if !stale {
			return
		}
		missing = l.missing()
		refs = l.refs(missing)
		_, t, _ = l.s.mirror.read(refs) // a ticket; the mirror cannot answer
	}
	entries, failed := l.readBuckets(ctx, missing)
	l.s.mirror.loaded(t, refs, entries, failed)
	l.takeAll(ctx, missing, entries, failed)
}

// readBuckets reads the scopes of keys, one request per bucket, the
// buckets in parallel. failed holds the buckets that could not be read.
func (l *lookup) readBuckets(ctx context.Context, keys []string) (entries map[scopeRef]jetstream.KVEntry, failed map[jetstream.KV]error) {
	buckets := l.bucketKeys(keys)
	type answer struct {
		kv  jetstream.KV
		got map[string]jetstream.KVEntry
		err error
	}
	answers := make(chan answer, len(buckets))
	for kv, keys := range buckets {
		if len(buckets) == 1 { // the usual case without a hub: no goroutine
			got, err := kv.GetMany(ctx, keys)
			answers <- answer{kv, got, err}
			break
		}
		go func() {
			got, err := kv.GetMany(ctx, keys)
			answers <- answer{kv, got, err}
		}()
	}
	entries = map[scopeRef]jetstream.KVEntry{}
	failed = map[jetstream.KV]error{}
	for range buckets {
		a := <-answers
		if a.err != nil {
			failed[a.kv] = a.err
			continue
		}
		for key, e := range a.got {
			entries[scopeRef{a.kv, key}] = e
		}
	}
	return entries, failed
}

// takeAll takes, for each of keys, the value of its narrowest scope that
// q may see and read, and notes when a bucket that could hold a key not
// found could not be read.
func (l *lookup) takeAll(ctx context.Context, keys []string, entries map[scopeRef]jetstream.KVEntry, failed map[jetstream.KV]error) {
	l.mu.Lock()
	l.unreachable = nil
	l.mu.Unlock()
	for _, k := range keys {
		gotIt := false
		var lost error
		for _, sc := range l.scopes[k] {
			if err := failed[sc.kv]; err != nil {
				lost = err
				continue
			}
			e, ok := entries[scopeRef{sc.kv, sc.key}]
			if ok && l.take(ctx, k, sc, e) {
				gotIt = true
				break
			}
		}
		if !gotIt && lost != nil {
			l.mu.Lock()
			l.unreachable = lost
			l.mu.Unlock()
		}
	}
}

// take considers entry e of scope sc for key k: if q may see and read it,
// and (for FIRST_READ) this lookup wins the delete, it is found.
func (l *lookup) take(ctx context.Context, k string, sc scope, e jetstream.KVEntry) bool {
	r, err := unmarshalRecord(e.Value)
	if err != nil {
		l.s.log.Warn("skipping a malformed published value", "bucket", sc.kv.Name(), "key", e.Key, "err", err)
		return false
	}
	if r.Key != k || !visible(r, l.q, l.req.rng, l.req.custom) {
		return false
	}
	if !r.permits(l.q) {
		l.mu.Lock()
		if l.denied == nil {
			l.denied = map[string]bool{}
		}
		l.denied[k] = true
		l.mu.Unlock()
		return false
	}
	l.mu.Lock()
	_, already := l.found[k]
	l.mu.Unlock()
	if already {
		return false
	}
	if r.Persistence == pmix.PersistFirstRead {
		if err := l.s.delete(context.WithoutCancel(ctx), sc, e.Revision); err != nil {
			// Another lookup read it first, or it cannot be removed: either
			// way it is not this lookup's to return.
			if pmix.StatusOf(err) != jetstream.ErrRevisionMismatch.Status {
				l.s.log.Warn("consuming a FIRST_READ value", "bucket", sc.kv.Name(), "key", e.Key, "err", err)
			} else {
				l.mu.Lock()
				l.stale = true // a mirror that showed it may be behind
				l.mu.Unlock()
			}
			return false
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, already := l.found[k]; already {
		return false
	}
	l.found[k] = r.datum(l.q)
	return true
}

// watch waits until enough values are found or ctx ends, taking the
// values the mirror's follows put in the missing keys' scopes. It
// registers with the mirror before it reads again, so nothing stored
// after that read is missed (see mirror.wait).
func (l *lookup) watch(ctx context.Context) error {
	byScope := map[scopeRef]scopeOf{}
	for k, scs := range l.scopes {
		for _, sc := range scs {
			byScope[scopeRef{sc.kv, sc.key}] = scopeOf{key: k, scope: sc}
		}
	}
	w := newWaiter(l.refs(l.missing()))
	l.s.mirror.wait(w)
	defer l.s.mirror.unwait(w)
	l.read(ctx)
	for !l.satisfied() {
		select {
		case <-w.ready:
		case <-ctx.Done():
			return ErrTimeout
		}
		refs, es, reread := w.drain()
		for i, e := range es {
			if so, ok := byScope[refs[i]]; ok {
				l.take(ctx, so.key, so.scope, e)
			}
		}
		if reread && !l.satisfied() {
			l.read(ctx)
		}
	}
	return nil
}

// result returns the values found, in key order, and the lookup's status;
// its message names the keys not found. why is what ended the lookup
// early, if anything did.
func (l *lookup) result(why error) ([]Datum, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Datum, 0, len(l.found))
	var missing []string
	for _, k := range l.req.keys {
		if d, ok := l.found[k]; ok {
			out = append(out, d)
		} else {
			missing = append(missing, k)
		}
	}
	n, of := len(out), len(l.req.keys)
	switch {
	case errors.Is(why, ErrTimeout) && l.req.timeout > 0:
		return out, fmt.Errorf("%w: %d of %d keys found within %v; missing %s", ErrTimeout, n, of, l.req.timeout, keyList(missing))
	case errors.Is(why, ErrTimeout):
		return out, fmt.Errorf("%w: %d of %d keys found before the lookup was cancelled; missing %s", ErrTimeout, n, of, keyList(missing))
	case len(missing) == 0:
		return out, nil
	case n > 0:
		return out, fmt.Errorf("%w: %d of %d keys found; not found: %s", ErrPartial, n, of, keyList(missing))
	case len(l.denied) > 0:
		return nil, fmt.Errorf("%w: %d of %d keys are published with permissions that exclude %v", ErrNoPermissions, len(l.denied), of, l.q.Proc)
	case why != nil:
		return nil, pmix.Errorf(pmix.ErrUnreach, "lookup of %s: %w", keyList(missing), why)
	}
	return nil, fmt.Errorf("%w: %s", ErrNotFound, keyList(missing))
}

// keyList names keys in a message: quoted, at most eight of them.
func keyList(keys []string) string {
	const most = 8
	var b strings.Builder
	for i, k := range keys {
		if i == most {
			fmt.Fprintf(&b, " and %d more", len(keys)-most)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", k)
	}
	return b.String()
}

// pause waits d or until ctx ends, returning ctx.Err() then.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
