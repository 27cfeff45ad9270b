package publishlookup

import (
	"context"
	"fmt"

	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
)

// Unpublish removes what p published under keys, as PMIx_Unpublish does:
// from the scope of PMIX_RANGE if given, from every scope otherwise. With
// no keys it removes everything p published (through this service) in that
// range. Only the publisher may unpublish: a key published by another
// process is left alone.
//
// Errors, for keys given, each naming the keys not removed: nil when each
// was removed from at least one scope; otherwise ErrPartial when some
// were; else ErrNoPermissions when some key is published in range by
// another process; else PMIX_ERR_UNREACH when a bucket could not be read;
// else ErrNotFound (so a second unpublish of a key is ErrNotFound).
// Also PMIX_ERR_BAD_PARAM for malformed keys or directives, ErrClosed.
func (s *Service) Unpublish(ctx context.Context, p Identity, keys []string, directives []pmix.Info) error {
	if s.isClosed() {
		return ErrClosed
	}
	req, err := parseUnpublish(keys, directives)
	if err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx, req.timeout)
	defer cancel()
	inRange := func(rng pmix.Range) bool { return req.rng == pmix.RangeUndef || req.rng == rng }

	if len(req.keys) == 0 {
		mine := s.forget(p.Proc, func(pub publication) bool { return inRange(pub.scope.rng) })
		return s.removeAll(ctx, mine)
	}

	// Read every scope of every key p could have published into.
	candidates := map[jetstream.KV][]string{}
	var scopes []scopeOf
	for _, k := range req.keys {
		for _, sc := range s.lookupScopes(p, k) {
			if inRange(sc.rng) {
				candidates[sc.kv] = append(candidates[sc.kv], sc.key)
				scopes = append(scopes, scopeOf{key: k, scope: sc})
			}
		}
	}
	entries := map[scopeRef]jetstream.KVEntry{}
	failed := map[jetstream.KV]error{}
	for kv, ks := range candidates {
		got, err := kv.GetMany(ctx, ks)
		if err != nil {
			failed[kv] = err
			continue
		}
		for key, e := range got {
			entries[scopeRef{kv, key}] = e
		}
	}
	removed, foreign := map[string]bool{}, map[string]bool{}
	var lost error
	for _, so := range scopes {
		if err := failed[so.scope.kv]; err != nil {
			lost = err
			continue
		}
		e, ok := entries[scopeRef{so.scope.kv, so.scope.key}]
		if !ok {
			continue
		}
		r, err := unmarshalRecord(e.Value)
		if err != nil || r.Key != so.key {
			continue
		}
		if !r.publishedBy(p) {
			foreign[so.key] = true
			continue
		}
		err = s.delete(ctx, so.scope, e.Revision)
		switch {
		case err == nil:
			removed[so.key] = true
		case pmix.StatusOf(err) == jetstream.ErrRevisionMismatch.Status:
			// Consumed or replaced meanwhile: no longer p's to remove.
		default:
			lost = err
		}
	}
	s.forget(p.Proc, func(pub publication) bool { return removed[pub.key] && inRange(pub.scope.rng) })

	var left []string // the keys not removed
	for _, k := range req.keys {
		if !removed[k] {
			left = append(left, k)
		}
	}
	switch {
	case len(left) == 0:
		return nil
	case len(removed) > 0:
		return fmt.Errorf("%w: %d of %d keys unpublished; not: %s", ErrPartial, len(removed), len(req.keys), keyList(left))
	case len(foreign) > 0:
		return fmt.Errorf("%w: %d of %d keys are published by other processes; only the publisher may unpublish", ErrNoPermissions, len(foreign), len(req.keys))
	case lost != nil:
		return pmix.Errorf(pmix.ErrUnreach, "unpublish of %s: %w", keyList(left), lost)
	}
	return fmt.Errorf("%w: %s", ErrNotFound, keyList(left))
}
