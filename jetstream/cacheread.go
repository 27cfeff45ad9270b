package jetstream

import (
	"context"
	"encoding/json"
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

const (
	defaultReplayBatch = 256
	// directBatch and directMaxBytes bound one direct-get answer.
	directBatch    = 256
	directMaxBytes = 1 << 20
	// requestTimeout bounds one JetStream request of a read; a read as a
	// whole takes as long as its backlog needs.
	requestTimeout = 5 * time.Second
)

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
	m := CachedMsg{ID: h.Get(MsgIDHeader), Subject: lastHeader(h, hdrSubject), Data: data, Seq: seq, EventSeq: seq}
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

// directGetOne makes one direct get, and returns nil when there is no such
// message.
func directGetOne(ctx context.Context, nc *nats.Conn, api string, req directGetRequest) (*CachedMsg, error) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	b, _ := json.Marshal(req)
	m, err := nc.RequestWithContext(rctx, api, b)
	if err != nil {
		return nil, kvError(err, "cache read")
	}
	if status := m.Header.Get(hdrStatus); status != "" && len(m.Data) == 0 {
		if status == "404" {
			return nil, nil
		}
		return nil, statusError(status, m.Header.Get(hdrDescription), "cache read")
	}
	seq, err := strconv.ParseUint(lastHeader(m.Header, hdrSequence), 10, 64)
	if err != nil {
		return nil, pmix.Errorf(pmix.ErrUnpackFailure, "cache read: direct get answered sequence %q", lastHeader(m.Header, hdrSequence))
	}
	cm := directMsg(m.Header, m.Data, seq)
	return &cm, nil
}
