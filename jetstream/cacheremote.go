package jetstream

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/pmix"
)

// Reading another cluster's cache: the events stream of a cluster in its
// own JetStream domain, reached over the leaf links ("$JS.<domain>.API"),
// by direct get as a cluster's own reads are (cacheread.go).

// ReadClusterEvents reads, through nc, the events stream of cluster, in
// JetStream domain domain, for the messages on filters it stored at or
// after since, and passes them to batch in the order it stored them, 256
// at most at a time, up to its last message when the read began. Memory
// does not grow with the backlog.
//
// evicted reports that the stream had already discarded, for its limits,
// messages that may have been stored at or after since: those were not
// read.
//
// Errors: ErrUnreachable when the stream does not answer (the domain is
// not reachable, or has no such stream); ctx's error, or batch's.
func ReadClusterEvents(ctx context.Context, nc *nats.Conn, cluster, domain string, filters []string, since time.Time, batch func([]CachedMsg) error) (evicted bool, err error) {
	api := "$JS." + domain + ".API.DIRECT.GET." + EventStreamName(cluster)
	last, err := directGetOne(ctx, nc, api, directGetRequest{LastFor: ">"})
	if err != nil || last == nil {
		return false, err // an empty stream
	}
	first, err := directGetOne(ctx, nc, api, directGetRequest{StartTime: &since})
	if err != nil || first == nil || first.Seq > last.Seq {
		return false, err // nothing stored since then
	}
	if first.Seq > 1 {
		before, err := directGetOne(ctx, nc, api, directGetRequest{Seq: first.Seq - 1})
		if err != nil {
			return false, err
		}
		// The stream discards the oldest first: the message just before
		// the first one stored since then is gone, and so may be others
		// of that time.
		evicted = before == nil
	}
	out := emitter{f: batch, size: defaultReplayBatch}
	err = scanStream(ctx, nc, api, filters, first.Seq-1, last.Seq, out.add)
	if err == nil {
		err = out.flush()
	}
	return evicted, err
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
