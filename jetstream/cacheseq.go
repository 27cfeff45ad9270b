package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/pmix"
)

// Reading the cache by the events stream's sequence (docs/cache.md). The
// events stream republishes every event it stores, with its sequence
// (Nats-Sequence), in storing order; an agent dispatches those copies in
// that order, and fetches here, by sequence, what it did not receive and
// what a new registration is owed.

// LastSeq returns the events stream's last sequence, as its leader knows
// it.
//
// Errors: as Stats.
func (c *EventCache) LastSeq(ctx context.Context) (uint64, error) { return c.lastSeq(ctx, c.events) }

// errStopScan ends a scan early without an error.
var errStopScan = errors.New("stop")

// ReadSeqs passes to f, a batch at a time, in order of the events stream's
// sequence, each cached event whose sequence is from from to to (or the stream's last): from the
// events stream or, for a job event it evicted, from its copy in the
// job-events stream on jobFilters (nil: every copy; empty: none). It returns how many
// sequences of the range it found in neither (with jobFilters nil, the
// events lost: environment events evicted, job events evicted and retained
// by nobody). f's error ends the read with it.
//
// It is exact on a replicated stream. A direct get may be answered by a
// replica that lacks the newest messages, so a sequence the answer lacked
// that the stream still holds is asked of its leader; and the events
// stream deletes only its oldest messages (limits retention), so a
// sequence below the leader's first sequence was evicted.
//
// Errors: ErrUnreachable when JetStream does not answer; ctx's, or f's.
func (c *EventCache) ReadSeqs(ctx context.Context, from, to uint64, jobFilters []string, f func([]CachedMsg) error) (missing uint64, err error) {
	if from == 0 {
		from = 1
	}
	if to < from {
		return 0, nil
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	info, err := c.events.Info(rctx)
	cancel()
	if err != nil {
		return 0, kvError(err, "cache read")
	}
	to = min(to, info.State.LastSeq) // what is not stored yet is not missing
	if to < from {
		return 0, nil
	}
	first := info.State.FirstSeq
	if info.State.Msgs == 0 {
		first = info.State.LastSeq + 1
	}
	out := emitter{f: f, size: defaultReplayBatch}
	found := uint64(0)
	emit := func(m CachedMsg) error {
		found++
		return out.add(m)
	}
	if from < first && (jobFilters == nil || len(jobFilters) > 0) {
		if err := c.readCopies(ctx, from, min(to, first-1), jobFilters, emit); err != nil {
			return 0, err
		}
	}
	if to >= first {
		next := max(from, first)
		// fill emits next up to (not including) seq, asking the leader.
		// A sequence the leader lacks was evicted, and so was every one
		// below the leader's first sequence (limits delete only the
		// oldest): the copies of that whole run are read at once. Asked
		// one by one, a flood evicting the stream during a replay cost
		// a stream info and a bisection per evicted event (bench events'
		// fan-out: 21k deliveries/s against 189k).
		fill := func(seq uint64) error {
			for next < seq {
				m, err := c.leaderGet(ctx, next)
				if err != nil {
					return err
				}
				if m != nil {
					if err := emit(*m); err != nil {
						return err
					}
					next++
					continue
				}
				rctx, cancel := context.WithTimeout(ctx, requestTimeout)
				info, err := c.events.Info(rctx)
				cancel()
				if err != nil {
					return kvError(err, "cache read")
				}
				end := min(seq, max(info.State.FirstSeq, next+1))
				if jobFilters == nil || len(jobFilters) > 0 {
					if err := c.readCopies(ctx, next, end-1, jobFilters, emit); err != nil {
						return err
					}
				}
				next = end
			}
			return nil
		}
		err := c.scan(ctx, EventStreamName(c.cfg.Cluster), []string{">"}, next-1, to, func(m CachedMsg) error {
			if m.Seq < next {
				return nil
			}
			if err := fill(m.Seq); err != nil {
				return err
			}
			next = m.Seq + 1
			return emit(m)
		})
		if err == nil {
			err = fill(to + 1)
		}
		if err != nil {
			return 0, err
		}
	}
	if err := out.flush(); err != nil {
		return 0, err
	}
	return to - from + 1 - min(found, to-from+1), nil
}

// readCopies emits the job-events stream's copies on filters (nil: all)
// whose events' sequences are lo to hi, in order. The copies are stored
// in the order the events stream stored their events, so the first is
// found by bisection and the rest follow it.
func (c *EventCache) readCopies(ctx context.Context, lo, hi uint64, filters []string, emit func(CachedMsg) error) error {
	api := "$JS.API.DIRECT.GET." + JobStreamName(c.cfg.Cluster)
	info, err := c.copiesCaughtUp(ctx, api, hi)
	if err != nil {
		return err
	}
	if info.State.Msgs == 0 {
		return nil
	}
	// The first copy at or after jseq, with its event's sequence.
	b, e := info.State.FirstSeq, info.State.LastSeq+1
	for b < e {
		mid := b + (e-b)/2
		m, err := directGetOne(ctx, c.js.Conn(), api, directGetRequest{Seq: mid, NextFor: ">"})
		if err != nil {
			return err
		}
		switch {
		case m == nil:
			e = mid
		case m.EventSeq < lo:
			b = m.Seq + 1
		default:
			e = mid
		}
	}
	if len(filters) == 0 {
		filters = []string{">"}
	}
	err = c.scan(ctx, JobStreamName(c.cfg.Cluster), filters, b-1, info.State.LastSeq, func(m CachedMsg) error {
		if m.EventSeq > hi {
			return errStopScan
		}
		if m.EventSeq < lo {
			return nil
		}
		return emit(m)
	})
	if errors.Is(err, errStopScan) {
		return nil
	}
	return err
}

// copyCatchUp bounds how long a read of the copies waits for those still
// on their way to the job-events stream.
const copyCatchUp = time.Second

// copyQuiet is how long the job-events stream must not grow for a read to
// take it that no copy is on its way.
const copyQuiet = 25 * time.Millisecond

// copiesCaughtUp returns the job-events stream's state once its copies
// have caught up with the events stream up to event hi: its last copy is
// of hi or a later event, or it has stopped growing (the events after its
// last copy are no job events), or copyCatchUp has passed. A copy is
// republished as the events stream stores its event and stored by the
// job-events stream a moment later; under a flood the events stream
// evicted an event before its copy was stored, and a fetch that read the
// copies then counted it lost (agent's TestDroppedJobEventsRecovered,
// 2 runs in 6).
func (c *EventCache) copiesCaughtUp(ctx context.Context, api string, hi uint64) (*natsjs.StreamInfo, error) {
	deadline := time.Now().Add(copyCatchUp)
	var last uint64
	for {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		info, err := c.jobs.Info(rctx)
		cancel()
		if err != nil {
			return nil, kvError(err, "cache read")
		}
		if info.State.Msgs > 0 {
			m, err := directGetOne(ctx, c.js.Conn(), api, directGetRequest{LastFor: ">"})
			if err != nil {
				return nil, err
			}
			if m != nil && m.EventSeq >= hi {
				return info, nil
			}
		}
		if (last > 0 && info.State.LastSeq == last) || time.Now().After(deadline) {
			return info, nil
		}
		last = max(info.State.LastSeq, 1)
		select {
		case <-ctx.Done():
			return nil, kvError(ctx.Err(), "cache read")
		case <-time.After(copyQuiet):
		}
	}
}

// leaderGet returns the events stream's message seq as its leader has it
// (the stream API, not a direct get, which any replica answers); nil when
// the stream does not hold it.
func (c *EventCache) leaderGet(ctx context.Context, seq uint64) (*CachedMsg, error) {
	return c.leaderNext(ctx, seq, "")
}

// leaderNext returns the events stream's first message at or after seq on
// subject filter (empty: seq itself) as its leader has it; nil when there
// is none.
func (c *EventCache) leaderNext(ctx context.Context, seq uint64, filter string) (*CachedMsg, error) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, _ := json.Marshal(struct {
		Seq     uint64 `json:"seq"`
		NextFor string `json:"next_by_subj,omitempty"`
	}{seq, filter})
	m, err := c.js.Conn().RequestWithContext(rctx, "$JS.API.STREAM.MSG.GET."+EventStreamName(c.cfg.Cluster), req)
	if err != nil {
		return nil, kvError(err, "cache read")
	}
	var resp struct {
		Message *struct {
			Subject string `json:"subject"`
			Seq     uint64 `json:"seq"`
			Header  []byte `json:"hdrs"`
			Data    []byte `json:"data"`
		} `json:"message"`
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, pmix.Errorf(pmix.ErrUnpackFailure, "cache read: %v", err)
	}
	if resp.Error != nil {
		if resp.Error.Code == 404 {
			return nil, nil
		}
		return nil, pmix.Errorf(pmix.ErrGeneral, "cache read: %s", resp.Error.Description)
	}
	if resp.Message == nil {
		return nil, nil
	}
	cm := CachedMsg{Subject: resp.Message.Subject, Data: resp.Message.Data, Seq: resp.Message.Seq, EventSeq: resp.Message.Seq}
	if len(resp.Message.Header) > 0 {
		cm.ID = decodeHeaders(resp.Message.Header).Get(MsgIDHeader)
	}
	return &cm, nil
}

// decodeHeaders parses a stored message's header block ("NATS/1.0\r\n…").
func decodeHeaders(b []byte) nats.Header {
	h := nats.Header{}
	lines := strings.Split(string(b), "\r\n")
	for _, l := range lines[1:] {
		if k, v, ok := strings.Cut(l, ":"); ok {
			h[k] = append(h[k], strings.TrimSpace(v))
		}
	}
	return h
}

// replayBatch bounds the messages of one answer to a replay's read of a
// subject: the cache's default size (512) and more.
const replayBatch = 1024

// ReplayTo passes to f, a batch at a time, in the events stream's order,
// the cached events on filters whose sequences are from from to upTo: the
// events stream's, and the copies on jobFilters of the job events it
// evicted, each once. What a replay owes a registration placed at upTo.
//
// It reads only the subjects asked for, yet is exact on a replicated
// stream: a direct get may be answered by a replica that lacks the newest
// messages, so once a filter's answers end below upTo, the stream's
// leader is asked for the next message on it (one request per filter);
// one at or below upTo continues the read. A job event evicted while the
// read goes on is taken from its copy, which the merge puts in its place.
// An environment event evicted before it was read is not read.
//
// Errors: ErrUnreachable when JetStream does not answer; ctx's, or f's.
func (c *EventCache) ReplayTo(ctx context.Context, filters, jobFilters []string, from, upTo uint64, f func([]CachedMsg) error) error {
	from = max(from, 1)
	if upTo < from {
		return nil
	}
	nc := c.js.Conn()
	var curs []*cursor
	defer func() {
		for _, cu := range curs {
			cu.close()
		}
	}()
	// One answer reads a subject's messages at one instant (the server
	// isolates a direct get from the stream's writes), so a subject whose
	// cached events fit one answer is read whole, none skipped for a
	// flood that evicts the stream while the read goes on; the answer's
	// bytes are bounded (directMaxBytes).
	const batch = replayBatch
	events := "$JS.API.DIRECT.GET." + EventStreamName(c.cfg.Cluster)
	for _, flt := range filters {
		cu := &cursor{nc: nc, api: events, filter: flt, next: from, upTo: upTo, batch: batch}
		cu.atEnd = func(ctx context.Context, cu *cursor) error {
			m, err := c.leaderNext(ctx, cu.next, cu.filter)
			if err != nil {
				return err
			}
			if m == nil || m.Seq > upTo {
				cu.next = upTo + 1 // read to the end
				return nil
			}
			cu.buf, cu.next, cu.done = append(cu.buf, *m), m.Seq+1, false
			return nil
		}
		curs = append(curs, cu)
	}
	jobs := "$JS.API.DIRECT.GET." + JobStreamName(c.cfg.Cluster)
	for _, flt := range jobFilters {
		curs = append(curs, &cursor{nc: nc, api: jobs, filter: flt, next: 1, upTo: ^uint64(0), batch: batch, eventUpTo: upTo})
	}
	out := emitter{f: f, size: defaultReplayBatch}
	err := merge(ctx, curs, func(m CachedMsg) uint64 { return m.EventSeq }, func(m CachedMsg) error {
		if m.EventSeq < from {
			return nil
		}
		return out.add(m)
	})
	if err != nil {
		return err
	}
	return out.flush()
}
