package query

import (
	"context"
	"errors"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

// TestAnswer: OpenPMIx's rule over several queries, the ABI versions and
// the supported keys the Service answers itself, a hook's answer and its
// not-found.
func TestAnswer(t *testing.T) {
	s := New()
	me := pmix.Proc{Nspace: "job", Rank: 1}
	s.Handle(pmix.KeyJobSize, func(_ context.Context, caller pmix.Proc, _ string, q []pmix.Info) (pmix.Value, error) {
		if Nspace(caller, q) != "job" {
			return pmix.Value{}, pmix.Errorf(pmix.ErrNotFound, "no such job")
		}
		return pmix.Uint32(4), nil
	})
	got, err := s.Answer(t.Context(), me, []Query{{Keys: []string{pmix.KeyJobSize, pmix.KeyQueryStableABIVersion}}})
	if err != nil || len(got) != 2 || got[0].Key != pmix.KeyJobSize || got[1].Value.String() != `"0.0"` {
		t.Fatalf("%v %v", got, err)
	}
	got, err = s.Answer(t.Context(), me, []Query{{Keys: []string{pmix.KeyJobSize}}, {Keys: []string{pmix.KeyJobSize}, Qualifiers: []pmix.Info{pmix.NewInfo(pmix.KeyNspace, pmix.String("other"))}}})
	if pmix.StatusOf(err) != pmix.QueryPartialSuccess || len(got) != 1 {
		t.Errorf("partial: %v %v", got, err)
	}
	if _, err := s.Answer(t.Context(), me, []Query{{Keys: []string{"pmix.qry.unknown"}}}); !errors.Is(err, pmix.ErrNotFound) {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := s.Answer(t.Context(), me, nil); !errors.Is(err, pmix.ErrBadParam) {
		t.Errorf("no key: %v", err)
	}
	got, _ = s.Answer(t.Context(), me, []Query{{Keys: []string{pmix.KeyQuerySupportedKeys}}})
	if v, _ := got[0].Value.Str(); v != "pmix.job.size,pmix.qry.keys,pmix.qry.prabiver,pmix.qry.stabiver" {
		t.Errorf("supported keys %q", v)
	}
}
