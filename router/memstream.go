package router

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/subjects"
)

// MemStream is a cluster's event cache in memory, on a MemTransport, so
// the sequenced dispatch (sequence.go) runs without a server: it stores
// every event published on the cluster's cached subjects with the next
// sequence (once per Nats-Msg-Id), keeps the last Max of them (the events
// stream) and a copy of every job event for ever (the job-events stream,
// as if a retainer never let go), republishes each stored event to the
// cluster's copy subject with its Nats-Sequence, and answers reads by
// sequence. Faults, if set, lose or repeat copies, as a slow consumer or
// a leader change does. Safe for concurrent use.
type MemStream struct {
	t       *MemTransport
	cluster string
	max     int
	subjs   [][]string

	mu     sync.Mutex
	msgs   []memStored // oldest first
	jobs   []memStored
	last   uint64
	ids    map[string]bool
	faults Faults
}

// Faults are what a MemStream does to its copies.
type Faults struct {
	// DropCopy loses the copy of seq (the stream stores the event).
	DropCopy func(seq uint64) bool
	// DupCopy sends the copy of seq twice.
	DupCopy func(seq uint64) bool
}

type memStored struct {
	seq  uint64
	subj string
	data []byte
}

// NewMemStream stores on t what the cache of cluster captures, keeping the
// last max events.
func NewMemStream(t *MemTransport, cluster string, max int) *MemStream {
	all, _ := subjects.CacheSubjects(cluster)
	s := &MemStream{t: t, cluster: cluster, max: max, ids: map[string]bool{}}
	for _, p := range all {
		s.subjs = append(s.subjs, strings.Split(p, "."))
	}
	t.onPublish(s.store)
	return s
}

// ElectLeader sends the stream's leader-elected advisory, as a NATS
// server does when the stream's leader changes.
func (s *MemStream) ElectLeader() error {
	return s.t.PublishMsg(&nats.Msg{Subject: LeaderElectedSubject(s.cluster)})
}

// SetFaults sets what the stream does to its copies from now on.
func (s *MemStream) SetFaults(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
}

func (s *MemStream) store(m *nats.Msg) {
	toks := strings.Split(m.Subject, ".")
	captured := false
	for _, p := range s.subjs {
		if subjects.MatchTokens(p, toks) {
			captured = true
			break
		}
	}
	if !captured {
		return
	}
	s.mu.Lock()
	id := m.Header.Get(nats.MsgIdHdr)
	if id != "" && s.ids[id] {
		s.mu.Unlock()
		return
	}
	s.ids[id] = true
	s.last++
	st := memStored{seq: s.last, subj: m.Subject, data: m.Data}
	s.msgs = append(s.msgs, st)
	if len(s.msgs) > s.max {
		s.msgs = s.msgs[1:]
	}
	if strings.HasPrefix(m.Subject, subjects.Prefix+".") {
		s.jobs = append(s.jobs, st)
	}
	f := s.faults
	s.mu.Unlock()
	// Republished as it is stored, by the one goroutine that stores: in
	// order, as the stream's leader does.
	if f.DropCopy != nil && f.DropCopy(st.seq) {
		return
	}
	c := &nats.Msg{Subject: subjects.CopySubject(s.cluster, m.Subject), Data: m.Data, Header: nats.Header{}}
	for k, v := range m.Header {
		c.Header[k] = v
	}
	c.Header.Set("Nats-Sequence", strconv.FormatUint(st.seq, 10))
	_ = s.t.PublishMsg(c)
	if f.DupCopy != nil && f.DupCopy(st.seq) {
		_ = s.t.PublishMsg(c)
	}
}

func (s *MemStream) lastSeq(context.Context) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, nil
}

// readSeqs reads by sequence (seqSource): the events stream's messages,
// and for those it evicted the job events' copies on jobFilters (nil:
// all; empty: none).
func (s *MemStream) readSeqs(_ context.Context, from, to uint64, jobFilters []string, f func([]cachedEvent) error) (uint64, error) {
	var out []memStored
	s.mu.Lock()
	to = min(to, s.last)
	first := s.last + 1
	if len(s.msgs) > 0 {
		first = s.msgs[0].seq
	}
	for _, j := range s.jobs {
		if j.seq >= from && j.seq <= to && j.seq < first && copyMatches(s.cluster, j.subj, jobFilters) {
			out = append(out, j)
		}
	}
	for _, m := range s.msgs {
		if m.seq >= from && m.seq <= to {
			out = append(out, m)
		}
	}
	s.mu.Unlock()
	var missing uint64
	if to >= from {
		missing = to - from + 1 - uint64(len(out))
	}
	b := decodeStored(out)
	if len(b) == 0 {
		return missing, nil
	}
	return missing, f(b)
}

// copyMatches reports whether the copy of an event on subj is on one of
// filters (nil: all).
func copyMatches(cluster, subj string, filters []string) bool {
	if filters == nil {
		return true
	}
	c := subjects.CopySubject(cluster, subj)
	for _, p := range filters {
		if subjects.Match(p, c) {
			return true
		}
	}
	return false
}

// replayTo reads what a registration placed at upTo is owed (seqSource):
// the events stream's messages on filters, and the copies on jobFilters
// of the job events it evicted.
func (s *MemStream) replayTo(_ context.Context, filters, jobFilters []string, from, upTo uint64, f func([]cachedEvent) error) error {
	var out []memStored
	s.mu.Lock()
	first := s.last + 1
	if len(s.msgs) > 0 {
		first = s.msgs[0].seq
	}
	for _, j := range s.jobs {
		if j.seq >= from && j.seq <= upTo && j.seq < first && len(jobFilters) > 0 && copyMatches(s.cluster, j.subj, jobFilters) {
			out = append(out, j)
		}
	}
	for _, m := range s.msgs {
		if m.seq >= from && m.seq <= upTo && subjectMatches(m.subj, filters) {
			out = append(out, m)
		}
	}
	s.mu.Unlock()
	b := decodeStored(out)
	if len(b) == 0 {
		return nil
	}
	return f(b)
}

// subjectMatches reports whether subj is on one of filters.
func subjectMatches(subj string, filters []string) bool {
	for _, p := range filters {
		if subjects.Match(p, subj) {
			return true
		}
	}
	return false
}

// decodeStored decodes stored events, skipping malformed ones.
func decodeStored(out []memStored) []cachedEvent {
	b := make([]cachedEvent, 0, len(out))
	for _, st := range out {
		p, err := subjects.Parse(st.subj)
		if err != nil {
			continue
		}
		m, err := event.UnmarshalMessage(st.data)
		if err != nil {
			continue
		}
		b = append(b, cachedEvent{sc: p.Scope, m: m, seq: st.seq, evSeq: st.seq})
	}
	return b
}
