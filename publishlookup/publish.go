package publishlookup

import (
	"context"
	"fmt"
	"time"

	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
)

// Publish stores the data infos of PMIx_Publish for p. The infos mix data
// and directives: PMIX_RANGE (default PMIX_RANGE_SESSION), PMIX_PERSISTENCE
// (default PMIX_PERSIST_APP), PMIX_ACCESS_PERMISSIONS (with
// PMIX_ACCESS_USERIDS and PMIX_ACCESS_GRPIDS, comma-separated ids; the
// default admits the publisher's own user and group), PMIX_TIMEOUT, and for
// PMIX_RANGE_CUSTOM the proc list under KeyCustomRange. Every other info is
// a key to publish.
//
// Each key is created atomically in its range scope; if one fails, those
// already created are removed, so a failed publish leaves nothing behind.
//
// Errors: ErrDuplicate (PMIX_ERR_DUPLICATE_KEY) when a key is already
// published in the same scope, by anyone; PMIX_ERR_BAD_PARAM for malformed
// directives or keys; PMIX_ERR_NOT_SUPPORTED for the RM and PROC_LOCAL
// ranges; PMIX_ERR_UNREACH when the bucket's domain cannot be reached (the
// global one while the hub is cut off); ErrClosed.
func (s *Service) Publish(ctx context.Context, p Identity, infos []pmix.Info) error {
	if s.isClosed() {
		return ErrClosed
	}
	req, err := parsePublish(infos)
	if err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx, req.timeout)
	defer cancel()
	now := time.Now()
	var done []publication
	for _, in := range req.data {
		sc := s.publishScope(p, req.rng, req.custom, in.Key)
		rec := record{
			Key: in.Key, Value: in.Value, Publisher: p, Range: req.rng, Persistence: req.persistence,
			AccessUIDs: req.accessUIDs, AccessGIDs: req.accessGIDs, Custom: req.custom, Time: now,
		}
		b, err := rec.marshal()
		var rev uint64
		if err == nil {
			rev, err = sc.kv.Create(ctx, sc.key, b)
		}
		if err != nil {
			// Undo on a context of its own: the request's may be what ended.
			if rerr := s.removeAll(context.WithoutCancel(ctx), done); rerr != nil {
				s.log.Warn("undoing a failed publish", "proc", p.Proc.String(), "err", rerr)
			}
			if pmix.StatusOf(err) == pmix.ErrDuplicateKey {
				return fmt.Errorf("%w: %s at %v in %s", ErrDuplicate, pmix.Quote(in.Key), req.rng, sc.kv.Name())
			}
			return pmix.Errorf(pmix.StatusOf(err), "publishing %s: %w", pmix.Quote(in.Key), err)
		}
		s.mirror.wrote(scopeRef{sc.kv, sc.key}, rev, &jetstream.KVEntry{Key: sc.key, Value: b, Revision: rev})
		done = append(done, publication{scope: sc, key: in.Key, revision: rev, persistence: req.persistence, session: p.Session})
	}
	s.remember(p.Proc, done...)
	return nil
}
