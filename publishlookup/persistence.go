package publishlookup

import (
	"context"

	"github.com/pmixbus/pmixbus/pmix"
)

// Persistence (PMIx_Publish's PMIX_PERSISTENCE) ends with the events below;
// the agent reports them. Each removes the values that end with it, each at
// the revision published, so a key published again since stays.
//
//	PMIX_PERSIST_FIRST_READ  the lookup that reads it (Lookup)
//	PMIX_PERSIST_PROC        ProcEnded: the publisher finalized, died, or was deregistered
//	PMIX_PERSIST_APP         JobEnded: the publisher's job was deregistered
//	PMIX_PERSIST_SESSION     SessionsEnded: no job of the publisher's session is left
//	PMIX_PERSIST_INDEF       never; Unpublish only
//
// The service remembers only what processes of its own agent published:
// an agent that restarts forgets, and what its processes published then
// stays until unpublished.

// ProcEnded removes the PMIX_PERSIST_PROC values p published. It returns
// the first error a removal gave (all are tried); the values it could not
// remove are forgotten all the same.
func (s *Service) ProcEnded(ctx context.Context, p pmix.Proc) error {
	gone := s.forget(p, func(pub publication) bool { return pub.persistence == pmix.PersistProc })
	if len(gone) == 0 {
		return nil
	}
	ctx, cancel := s.cleanupContext(ctx)
	defer cancel()
	return s.removeAll(ctx, gone)
}

// JobEnded removes the PMIX_PERSIST_APP and PMIX_PERSIST_PROC values the
// procs of nspace published, and forgets their INDEF and FIRST_READ ones
// (no process of the job is left to unpublish them). SESSION values are
// kept for SessionsEnded. Errors as ProcEnded.
func (s *Service) JobEnded(ctx context.Context, nspace string) error {
	s.mu.Lock()
	var procs []pmix.Proc
	for p := range s.owned {
		if p.Nspace == nspace {
			procs = append(procs, p)
		}
	}
	s.mu.Unlock()
	var gone []publication
	for _, p := range procs {
		gone = append(gone, s.forget(p, func(pub publication) bool { return pub.persistence != pmix.PersistSession })...)
	}
	var remove []publication
	for _, pub := range gone {
		if pub.persistence == pmix.PersistApp || pub.persistence == pmix.PersistProc {
			remove = append(remove, pub)
		}
	}
	if len(remove) == 0 {
		return nil
	}
	ctx, cancel := s.cleanupContext(ctx)
	defer cancel()
	return s.removeAll(ctx, remove)
}

// SessionsEnded removes the PMIX_PERSIST_SESSION values whose publisher's
// session is not among live: the agent calls it with the sessions it still
// has jobs of, after a job is deregistered. Errors as ProcEnded.
func (s *Service) SessionsEnded(ctx context.Context, live map[string]bool) error {
	s.mu.Lock()
	var procs []pmix.Proc
	for p := range s.owned {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	var gone []publication
	for _, p := range procs {
		gone = append(gone, s.forget(p, func(pub publication) bool {
			return pub.persistence == pmix.PersistSession && !live[pub.session]
		})...)
	}
	if len(gone) == 0 {
		return nil
	}
	ctx, cancel := s.cleanupContext(ctx)
	defer cancel()
	return s.removeAll(ctx, gone)
}
