package router

import (
	"errors"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
)

// While the link is down, a cacheable GLOBAL event succeeds (the other
// clusters source it from this cluster's events stream once the link is
// back); a transient one says it reached this cluster only.
func TestLinkDownTransientGlobalUnreach(t *testing.T) {
	l := NewLink(LinkConfig{Cluster: "B"})
	m := &event.Message{ID: "e1", Code: pmix.ExternalErrBase - 1, Range: pmix.RangeGlobal, Source: bus.Origin{Cluster: "B", Node: "b1"}, Time: time.Now()}
	transient := *m
	transient.Info = []pmix.Info{pmix.NewInfo(pmix.KeyEventDoNotCache, pmix.Bool(true))}
	if err := l.sent(&transient); err != nil {
		t.Fatalf("a transient GLOBAL event, the link not watched: %v", err)
	}
	l.watched.Store(true)
	l.down.Store(true)
	if err := l.sent(m); err != nil {
		t.Fatalf("a cacheable GLOBAL event while the link is down: %v", err)
	}
	if err := l.sent(&transient); !errors.Is(err, pmix.ErrUnreach) {
		t.Errorf("a transient GLOBAL event while the link is down: %v, want PMIX_ERR_UNREACH", err)
	}
	if st := l.Stats(); !st.Down || !st.Watched {
		t.Errorf("stats %+v, want down and watched", st)
	}
}
