package query

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/pmixbus/pmixbus/pmix"
)

// Query is one pmix_query_t: keys and the qualifiers that apply to each
// (PMIX_NSPACE, PMIX_RANK, PMIX_QUERY_REFRESH_CACHE, …).
type Query struct {
	Keys       []string
	Qualifiers []pmix.Info
}

// Answerer answers key for caller under qualifiers. It returns an error
// with pmix.ErrNotFound when it has no answer (an unknown nspace, no
// process set), and any other error when answering failed.
type Answerer func(ctx context.Context, caller pmix.Proc, key string, qualifiers []pmix.Info) (pmix.Value, error)

// ABIVersion is what PMIX_QUERY_STABLE_ABI_VERSION and
// PMIX_QUERY_PROVISIONAL_ABI_VERSION answer: OpenPMIx 4.2.2's "0.0",
// the ABI pmixbus's library implements.
const ABIVersion = "0.0"

// Service maps query keys to the functions that answer them.
type Service struct {
	mu      sync.RWMutex
	answers map[string]Answerer
}

// New returns a Service that answers PMIX_QUERY_SUPPORTED_KEYS and the
// ABI versions itself.
func New() *Service {
	s := &Service{answers: map[string]Answerer{}}
	abi := func(context.Context, pmix.Proc, string, []pmix.Info) (pmix.Value, error) {
		return pmix.String(ABIVersion), nil
	}
	s.answers[pmix.KeyQueryStableABIVersion] = abi
	s.answers[pmix.KeyQueryProvisionalABIVersion] = abi
	s.answers[pmix.KeyQuerySupportedKeys] = func(context.Context, pmix.Proc, string, []pmix.Info) (pmix.Value, error) {
		return pmix.String(strings.Join(s.Keys(), ",")), nil
	}
	return s
}

// Handle makes f the answer to key, replacing any before.
func (s *Service) Handle(key string, f Answerer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[key] = f
}

// Keys lists the keys answered, sorted.
func (s *Service) Keys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	keys := make([]string, 0, len(s.answers))
	for k := range s.answers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Answer answers qs for caller: one Info per key answered, the key as
// asked, in the order asked.
//
// Errors: pmix.ErrBadParam for no key at all; an error with
// pmix.QueryPartialSuccess, with the answers, when some keys were not
// answered; pmix.ErrNotFound when none was; ctx.Err().
func (s *Service) Answer(ctx context.Context, caller pmix.Proc, qs []Query) ([]pmix.Info, error) {
	var out []pmix.Info
	asked := 0
	var missing []string
	for _, q := range qs {
		for _, key := range q.Keys {
			asked++
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			s.mu.RLock()
			f := s.answers[key]
			s.mu.RUnlock()
			if f == nil {
				missing = append(missing, key)
				continue
			}
			v, err := f(ctx, caller, key, q.Qualifiers)
			if errors.Is(err, pmix.ErrNotFound) {
				missing = append(missing, key)
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, pmix.NewInfo(key, v))
		}
	}
	switch {
	case asked == 0:
		return nil, pmix.Errorf(pmix.ErrBadParam, "a query with no key")
	case len(out) == 0:
		return nil, pmix.Errorf(pmix.ErrNotFound, "no answer to %s", strings.Join(missing, ", "))
	case len(missing) > 0:
		return out, pmix.Errorf(pmix.QueryPartialSuccess, "no answer to %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// Nspace is the nspace a query's qualifiers name (PMIX_NSPACE), else
// caller's.
func Nspace(caller pmix.Proc, qualifiers []pmix.Info) string {
	if v, ok := pmix.LookupValue(qualifiers, pmix.KeyNspace); ok {
		if ns, ok := v.Str(); ok && ns != "" {
			return ns
		}
	}
	return caller.Nspace
}
