package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
)

// FenceCode is the code of the events tests send as fences: whatever a
// source raised before its fence has arrived once the fence has.
const FenceCode = pmix.ExternalErrBase - 999

// SeqInfo numbers events so a test can check order and uniqueness.
func SeqInfo(i int) []pmix.Info { return []pmix.Info{pmix.NewInfo("test.seq", pmix.Int64(int64(i)))} }

func seqOf(d Delivery) int {
	v, _ := pmix.LookupValue(d.Info, "test.seq")
	n, _ := v.Int()
	return int(n)
}

// Seqs returns the numbers (SeqInfo) of the deliveries ds, in order.
func Seqs(ds []Delivery) []int {
	out := make([]int, len(ds))
	for i, d := range ds {
		out[i] = seqOf(d)
	}
	return out
}

// CheckRun fails unless got is exactly from, from+1, …, to.
func CheckRun(t *testing.T, got []int, from, to int) {
	t.Helper()
	if len(got) != to-from+1 {
		t.Fatalf("got %d events, want %d (%d..%d): %v; missing %s", len(got), to-from+1, from, to, abbreviate(got), missing(got, from, to))
	}
	for i, s := range got {
		if s != from+i {
			t.Fatalf("event %d is #%d, want #%d: %v", i, s, from+i, abbreviate(got))
		}
	}
}

// missing names the numbers of from..to that got lacks, as ranges.
func missing(got []int, from, to int) string {
	have := map[int]bool{}
	for _, g := range got {
		have[g] = true
	}
	var out []string
	for i := from; i <= to; i++ {
		if have[i] {
			continue
		}
		j := i
		for j+1 <= to && !have[j+1] {
			j++
		}
		if j == i {
			out = append(out, fmt.Sprint(i))
		} else {
			out = append(out, fmt.Sprintf("%d..%d", i, j))
		}
		i = j
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, " ")
}

func abbreviate(s []int) string {
	if len(s) <= 20 {
		return fmt.Sprint(s)
	}
	return fmt.Sprint(s[:10], " … ", s[len(s)-10:])
}

// WaitCached waits until agent a's cluster caches at least n events.
func WaitCached(t *testing.T, a *agent.Agent, n uint64) {
	t.Helper()
	clustertest.WaitFor(t, WaitTime, func() error {
		s, err := a.CacheStats(t.Context())
		if err != nil {
			return err
		}
		if s.Msgs < n {
			return fmt.Errorf("%d of %d events cached", s.Msgs, n)
		}
		return nil
	})
}

// Fence sends a GLOBAL fence from each agent and waits until every client
// in clients has seen fences more (events from one agent arrive in order,
// so whatever an agent raised before its fence has arrived by then).
func Fence(t *testing.T, w *World, from []string, clients []string, seen map[string]int) {
	t.Helper()
	for _, n := range from {
		if _, err := w.Agents[n].Notify(t.Context(), FenceCode, pmix.RangeGlobal, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range clients {
		seen[c] += len(from)
		w.Client(c).Rec.WaitCount(t, FenceCode, seen[c])
	}
}

// IsString reports whether info holds key with the string want.
func IsString(info []pmix.Info, key, want string) bool {
	v, _ := pmix.LookupValue(info, key)
	s, ok := v.Str()
	return ok && s == want
}
