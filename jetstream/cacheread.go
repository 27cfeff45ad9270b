package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/pmix"
)

// Reading the cache. Reads use JetStream's direct get, in batches, and
// never a consumer: on the job-events stream, which has interest retention,
// every consumer takes part in deciding what the stream keeps, and deleting
// one starts a clean-up that nats-server v2.15.2 can turn into a purge of
// the whole stream (docs/cache.md). A direct get is a request like any
// other: it leaves retention alone, and nothing behind.

// ReadPoint is where a replay's read ends: the last sequence of each stream
// when it began. Every message of its filters up to these sequences is
// read, unless the stream dropped it first.
type ReadPoint struct {
	Events uint64
	Jobs   uint64
}

// ReplayOptions are what Replay does with what it reads.
type ReplayOptions struct {
	// Marked, if set, is called once the read point is fixed and before
	// the first batch: everything published before Replay was called is
	// at or below it.
	Marked func(ReadPoint)
	// Batch receives the events, in order, at most BatchSize at a time;
	// Replay does not touch a slice once passed. An error from Batch ends
	// the replay with it.
	Batch func([]CachedMsg) error
	// BatchSize is 256 if zero.
	BatchSize int
	// After, if set, skips the messages at or below its sequences: they
	// were read before.
	After ReadPoint
	// JobsAfterMarked fixes the job-events stream's read point after
	// Marked returned, instead of before the events stream's. Every event
	// at or below the events stream's read point then has its copy at or
	// below the job-events stream's (the events stream queued the copies
	// of what it stored before its mark ahead of the later one): a job
	// event evicted while still wanted is not missed, and read in its
	// place. The price is the copies of events newer than the events
	// stream's read point, which come last. Marked is then given the
	// events stream's read point alone.
	JobsAfterMarked bool
}

const (
	defaultReplayBatch = 256
	// directBatch and directMaxBytes bound one direct-get answer.
	directBatch    = 256
	directMaxBytes = 1 << 20
	// requestTimeout bounds one JetStream request of a read; a read as a
	// whole takes as long as its backlog needs.
	requestTimeout = 5 * time.Second
)

// Replay reads the cached events on the given subjects (filters for the
// events stream, jobFilters for the job-events stream) and passes them to
// opts.Batch as it reads them: each once, in the order they were received —
// the job events the events stream has already evicted first, since they
// are older than all it still holds, then the events stream's, oldest
// first. Everything published before the call is included. Memory does not
// grow with the backlog: at most a batch is held, and the ids of the
// events stream's messages (bounded by its limits).
//
// It returns the read point. Errors: ErrUnreachable when JetStream stops
// answering; ctx's error, or Batch's.
func (c *EventCache) Replay(ctx context.Context, filters, jobFilters []string, opts ReplayOptions) (ReadPoint, error) {
	// The job-events stream first: the events stream makes a copy after it
	// stored the event, so every copy at or below rp.Jobs has its event at
	// or below rp.Events, or evicted.
	var rp ReadPoint
	var err error
	if !opts.JobsAfterMarked {
		if rp.Jobs, err = c.mark(ctx, "jobs"); err != nil {
			return rp, err
		}
	}
	if rp.Events, err = c.mark(ctx, "events"); err != nil {
		return rp, err
	}
	if opts.Marked != nil {
		opts.Marked(rp)
	}
	if opts.JobsAfterMarked {
		if rp.Jobs, err = c.mark(ctx, "jobs"); err != nil {
			return rp, err
		}
	}
	out := emitter{f: opts.Batch, size: opts.BatchSize}
	if out.size <= 0 {
		out.size = defaultReplayBatch
	}

	// The events stream's messages now, by id: a copy whose event is among
	// them is emitted with the events stream's, in its place.
	var inEvents map[string]*present
	var order []*present // by events-stream sequence
	var tail []CachedMsg // copies newer than every listed event (JobsAfterMarked)
	if len(jobFilters) > 0 {
		inEvents = map[string]*present{}
		err := c.scan(ctx, EventStreamName(c.cfg.Cluster), filters, opts.After.Events, rp.Events, func(m CachedMsg) error {
			p := &present{seq: m.Seq}
			inEvents[m.ID] = p
			order = append(order, p)
			return nil
		})
		if err != nil {
			return rp, err
		}
		// The copies of evicted events. With JobsAfterMarked, a copy
		// after one whose event is listed has its event beyond the
		// listing: it comes with the next listed event, or last.
		matched := false
		err = c.scan(ctx, JobStreamName(c.cfg.Cluster), jobFilters, opts.After.Jobs, rp.Jobs, func(m CachedMsg) error {
			if p, ok := inEvents[m.ID]; ok {
				p.jobSeq = m.Seq
				p.before, tail = tail, nil
				matched = true
				return nil
			}
			if opts.JobsAfterMarked && matched {
				tail = append(tail, m)
				return nil
			}
			return out.add(m)
		})
		if err != nil {
			return rp, err
		}
	}

	// The events stream, in order. An event evicted since it was listed
	// above, while the read went on, is replaced by its copy, if it has
	// one, in its place.
	next := 0
	emitBefore := func(p *present) error {
		for _, m := range p.before {
			if err := out.add(m); err != nil {
				return err
			}
		}
		p.before = nil
		return nil
	}
	copiesBefore := func(seq uint64) error {
		for ; next < len(order) && order[next].seq < seq; next++ {
			p := order[next]
			if err := emitBefore(p); err != nil {
				return err
			}
			if p.emitted || p.jobSeq == 0 {
				continue
			}
			m, err := c.getJob(ctx, p.jobSeq)
			if err != nil {
				return err
			}
			if m != nil {
				if err := out.add(*m); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err = c.scan(ctx, EventStreamName(c.cfg.Cluster), filters, opts.After.Events, rp.Events, func(m CachedMsg) error {
		if err := copiesBefore(m.Seq); err != nil {
			return err
		}
		if p, ok := inEvents[m.ID]; ok {
			if err := emitBefore(p); err != nil {
				return err
			}
			if p.emitted {
				return nil
			}
			p.emitted = true
		}
		return out.add(m)
	})
	if err == nil {
		err = copiesBefore(rp.Events + 1)
	}
	for _, m := range tail {
		if err != nil {
			break
		}
		err = out.add(m)
	}
	if err == nil {
		err = out.flush()
	}
	return rp, err
}

// present is an event of the events stream a replay listed.
type present struct {
	seq     uint64 // in the events stream
	jobSeq  uint64 // of its copy, 0 if none was read
	emitted bool
	before  []CachedMsg // copies to emit before it (JobsAfterMarked)
}

// emitter gathers messages into batches.
type emitter struct {
	f    func([]CachedMsg) error
	size int
	buf  []CachedMsg
}

func (e *emitter) add(m CachedMsg) error {
	if e.buf == nil {
		e.buf = make([]CachedMsg, 0, e.size)
	}
	e.buf = append(e.buf, m)
	if len(e.buf) < e.size {
		return nil
	}
	return e.flush()
}

func (e *emitter) flush() error {
	if len(e.buf) == 0 || e.f == nil {
		return nil
	}
	b := e.buf
	e.buf = nil
	return e.f(b)
}

// Read returns what Replay would pass to Batch, all at once. Its memory
// grows with the backlog; an agent replays instead.
func (c *EventCache) Read(ctx context.Context, filters, jobFilters []string) ([]CachedMsg, error) {
	var out []CachedMsg
	_, err := c.Replay(ctx, filters, jobFilters, ReplayOptions{Batch: func(b []CachedMsg) error {
		out = append(out, b...)
		return nil
	}})
	return out, err
}

// Mark returns the streams' last sequences once they have stored
// everything published before the call: the job-events stream's first, so
// that every copy at or below it has its event at or below the events
// stream's.
//
// Errors: as Stats.
func (c *EventCache) Mark(ctx context.Context) (ReadPoint, error) {
	var rp ReadPoint
	var err error
	if rp.Jobs, err = c.mark(ctx, "jobs"); err != nil {
		return rp, err
	}
	rp.Events, err = c.mark(ctx, "events")
	return rp, err
}

// mark returns the stream's last sequence once it has stored everything
// published before the call (see Sync): the refusal of the barrier names
// the last sequence the stream has.
//
// The refusal comes once the stream's ingest queue ahead of the barrier is
// stored, which under a flood can take longer than any one request should:
// mark waits as long as the stream keeps storing (its last sequence moves
// within every requestTimeout), and fails only when it stops (no store in
// two checks in a row, or no answer to six), or ctx ends.
// (A registration's replay read failed after 5 s behind a flood, and gave
// the registration nothing of the cache.)
func (c *EventCache) mark(ctx context.Context, stream string) (uint64, error) {
	s := c.events
	if stream == "jobs" {
		s = c.jobs
	}
	m := nats.NewMsg(barrierSubject(c.cfg.Cluster, stream))
	fut, err := c.js.PublishMsgAsync(m, natsjs.WithExpectLastSequence(barrierSeq))
	if err != nil {
		return 0, kvError(err, "cache barrier")
	}
	progress := time.NewTicker(c.patience)
	defer progress.Stop()
	var last uint64
	unknown, same := 0, 0 // checks in a row that could not tell, that saw no store
	for {
		select {
		case <-fut.Ok():
			return 0, pmix.Errorf(pmix.ErrGeneral, "cache barrier on %s was stored", stream) // cannot happen
		case err := <-fut.Err():
			var apiErr *natsjs.APIError
			if !errors.As(err, &apiErr) || (apiErr.ErrorCode != natsjs.JSErrCodeStreamWrongLastSequence && apiErr.ErrorCode != natsjs.JSErrCodeStreamWrongLastSequenceConstant) {
				return 0, kvError(err, "cache barrier")
			}
			// "wrong last sequence: 1234"
			if _, num, ok := cutLast(apiErr.Description, ": "); ok {
				if seq, err := strconv.ParseUint(num, 10, 64); err == nil {
					return seq, nil
				}
			}
			// A server that does not say: its state now is at least as far.
			return c.lastSeq(ctx, s)
		case <-progress.C:
			// A server too busy to answer is not one that stopped: only
			// a stream seen storing nothing twice in a row has stalled.
			seq, err := c.lastSeq(ctx, s)
			switch {
			case err != nil:
				if unknown++; unknown >= markUnknownChecks {
					return 0, err
				}
			case seq == last:
				unknown = 0
				if same++; same >= 2 {
					return 0, fmt.Errorf("cache barrier on %s: %w: the stream stored nothing for %v and has not answered", stream, ErrUnreachable, 2*c.patience)
				}
			default:
				unknown, same, last = 0, 0, seq
			}
		case <-ctx.Done():
			return 0, kvError(ctx.Err(), "cache barrier on "+stream)
		}
	}
}

// markUnknownChecks bounds the progress checks in a row that a barrier
// makes without an answer before it gives up.
const markUnknownChecks = 6

// lastSeq reads a stream's last sequence.
func (c *EventCache) lastSeq(ctx context.Context, s natsjs.Stream) (uint64, error) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	info, err := s.Info(rctx)
	if err != nil {
		return 0, kvError(err, "cache read point")
	}
	return info.State.LastSeq, nil
}

func cutLast(s, sep string) (before, after string, ok bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

// getJob returns the job-events stream's message seq, or nil if it is gone.
func (c *EventCache) getJob(ctx context.Context, seq uint64) (*CachedMsg, error) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	raw, err := c.jobs.GetMsg(rctx, seq)
	if errors.Is(err, natsjs.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, kvError(err, "cache read")
	}
	// nats.go reads the first Nats-Subject and Nats-Time-Stamp: a copy's
	// event's (see lastHeader).
	m := directMsg(raw.Header, raw.Data, seq)
	if m.Subject == "" { // not answered by a direct get
		m.Subject, m.Time = raw.Subject, raw.Time
	}
	return &m, nil
}

// scan calls f for every message of stream on filters after sequence
// after, up to sequence upTo,
// in sequence order: one direct-get cursor per filter, merged. A message
// two overlapping filters both match is passed once.
func (c *EventCache) scan(ctx context.Context, stream string, filters []string, after, upTo uint64, f func(CachedMsg) error) error {
	return scanStream(ctx, c.js.Conn(), "$JS.API.DIRECT.GET."+stream, filters, after, upTo, f)
}

// scanStream is scan through nc, on the direct-get API subject api of a
// stream in any domain.
func scanStream(ctx context.Context, nc *nats.Conn, api string, filters []string, after, upTo uint64, f func(CachedMsg) error) error {
	if len(filters) == 0 || upTo <= after {
		return nil
	}
	curs := make([]*cursor, 0, len(filters))
	defer func() {
		for _, cu := range curs {
			cu.close()
		}
	}()
	batch := max(directBatch/len(filters), 16)
	for _, flt := range filters {
		curs = append(curs, &cursor{nc: nc, api: api, filter: flt, next: after + 1, upTo: upTo, batch: batch})
	}
	return merge(ctx, curs, func(m CachedMsg) uint64 { return m.Seq }, f)
}

// merge passes to f the messages of curs in the order of key, each key
// once (filters overlap; an event and its copy share their event's
// sequence).
func merge(ctx context.Context, curs []*cursor, key func(CachedMsg) uint64, f func(CachedMsg) error) error {
	var last uint64
	for {
		var best *cursor
		for _, cu := range curs {
			if err := cu.fill(ctx); err != nil {
				return err
			}
			if len(cu.buf) > 0 && (best == nil || key(cu.buf[0]) < key(best.buf[0])) {
				best = cu
			}
		}
		if best == nil {
			return nil
		}
		m := best.buf[0]
		best.buf[0] = CachedMsg{}
		best.buf = best.buf[1:]
		k := key(m)
		if k == last {
			continue
		}
		last = k
		if err := f(m); err != nil {
			return err
		}
	}
}

// cursor walks the messages of one filter of a stream in sequence order,
// a direct-get batch at a time, answered on an inbox of its own.
type cursor struct {
	nc     *nats.Conn
	api    string // "$JS.API.DIRECT.GET.<stream>"
	filter string
	next   uint64 // the sequence to ask from next
	upTo   uint64
	batch  int
	buf    []CachedMsg
	done   bool
	// eventUpTo, if set, ends a read of copies at the first whose event
	// is past it.
	eventUpTo uint64
	// atEnd, if set, is called when the answers end below upTo; it may
	// fill buf and clear done.
	atEnd func(context.Context, *cursor) error
	sub   *nats.Subscription
	msgs  chan *nats.Msg // sub's: room for one answer
}

type directGetRequest struct {
	Seq      uint64 `json:"seq"`
	NextFor  string `json:"next_by_subj"`
	Batch    int    `json:"batch"`
	MaxBytes int    `json:"max_bytes"`
	// StartTime, if set, starts from the first message stored then or
	// later, instead of from Seq.
	StartTime *time.Time `json:"start_time,omitempty"`
	// LastFor asks for the last message on a subject (">": the stream's
	// last).
	LastFor string `json:"last_by_subj,omitempty"`
}

// fill fetches the next batch if the buffer is empty and the filter may
// have more.
func (cu *cursor) fill(ctx context.Context) error {
	if len(cu.buf) > 0 {
		return nil
	}
	if !cu.done {
		if err := cu.fetch(ctx); err != nil || len(cu.buf) > 0 {
			return err
		}
	}
	if cu.done && cu.next <= cu.upTo && cu.atEnd != nil {
		return cu.atEnd(ctx, cu)
	}
	return nil
}

// fetch asks for the next batch.
func (cu *cursor) fetch(ctx context.Context) error {
	if cu.next > cu.upTo {
		cu.done = true
		return nil
	}
	if cu.sub == nil {
		// One answer at a time: at most batch messages and its end. (A
		// SubscribeSync makes a channel of 65,536 for every read of
		// every registration: 512 KiB each, most of what a registration
		// allocated.)
		cu.msgs = make(chan *nats.Msg, cu.batch+2)
		sub, err := cu.nc.ChanSubscribe(cu.nc.NewInbox(), cu.msgs)
		if err != nil {
			return kvError(err, "cache read")
		}
		cu.sub = sub
	}
	req, _ := json.Marshal(directGetRequest{Seq: cu.next, NextFor: cu.filter, Batch: cu.batch, MaxBytes: directMaxBytes})
	if err := cu.nc.PublishRequest(cu.api, cu.sub.Subject, req); err != nil {
		return kvError(err, "cache read")
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	for {
		var m *nats.Msg
		select {
		case m = <-cu.msgs:
		case <-rctx.Done():
			return kvError(rctx.Err(), "cache read")
		}
		if status := m.Header.Get(hdrStatus); status != "" && len(m.Data) == 0 {
			switch status {
			case "404": // nothing from cu.next on
				cu.done = true
				return nil
			case "204": // end of batch
				if m.Header.Get(hdrNumPending) == "0" {
					cu.done = true
				}
				return nil
			}
			return statusError(status, m.Header.Get(hdrDescription), "cache read")
		}
		seq, err := strconv.ParseUint(lastHeader(m.Header, hdrSequence), 10, 64)
		if err != nil {
			return pmix.Errorf(pmix.ErrUnpackFailure, "cache read: direct get answered sequence %q", lastHeader(m.Header, hdrSequence))
		}
		cu.next = seq + 1
		if seq > cu.upTo {
			cu.done = true // the rest of the answer is past the read point too
			continue
		}
		dm := directMsg(m.Header, m.Data, seq)
		if cu.eventUpTo > 0 && dm.EventSeq > cu.eventUpTo {
			cu.done, cu.upTo = true, seq-1
			continue
		}
		cu.buf = append(cu.buf, dm)
	}
}

// directMsg is the message a direct get answered, with headers h and
// data, at sequence seq.
func directMsg(h nats.Header, data []byte, seq uint64) CachedMsg {
	ts, _ := time.Parse(time.RFC3339Nano, lastHeader(h, natsjs.TimeStampHeaer))
	m := CachedMsg{ID: h.Get(MsgIDHeader), Subject: lastHeader(h, hdrSubject), Data: data, Time: ts, Seq: seq, EventSeq: seq}
	if v := h.Values(hdrSequence); len(v) > 1 { // a copy: its event's, then its own
		m.EventSeq, _ = strconv.ParseUint(v[0], 10, 64)
	}
	return m
}

// lastHeader returns the last value of a header. A direct get appends the
// stream's own Nats-Subject, Nats-Sequence and Nats-Time-Stamp to the
// headers a message was stored with; a job-event copy was stored with the
// same names, describing its event in the events stream (the events stream
// republished it), so the direct get's are the last ones.
func lastHeader(h nats.Header, key string) string {
	v := h.Values(key)
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

func (cu *cursor) close() {
	if cu.sub != nil {
		_ = cu.sub.Unsubscribe()
	}
}
