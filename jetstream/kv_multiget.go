package jetstream

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/pmix"
)

// multiGetter reads the last message of many subjects of one stream in one
// request: JetStream's direct get with "multi_last" answers with one message
// per subject that has one, then an end-of-batch status (204), or a single
// 404 when none has. The answers of every request arrive on one wildcard
// inbox subscription, made on first use, and are routed by the inbox's last
// token, so a read costs one publish and no subscription of its own.
type multiGetter struct {
	nc      *nats.Conn
	subject string // "$JS.<domain>.API.DIRECT.GET.KV_<bucket>"
	prefix  string // "$KV.<bucket>.": stripped from subjects to give keys

	mu      sync.Mutex
	inbox   string // "<inbox prefix>.<nuid>." ; requests append a counter
	sub     *nats.Subscription
	next    uint64
	pending map[string]chan *nats.Msg
	closed  bool
}

func newMultiGetter(nc *nats.Conn, subject, prefix string) *multiGetter {
	return &multiGetter{nc: nc, subject: subject, prefix: prefix, pending: make(map[string]chan *nats.Msg)}
}

// Headers of direct-get answers.
const (
	hdrStatus      = "Status"
	hdrDescription = "Description"
	hdrSubject     = "Nats-Subject"
	hdrSequence    = "Nats-Sequence"
	hdrKVOperation = "KV-Operation"
	hdrMarker      = "Nats-Marker-Reason"
	hdrNumPending  = "Nats-Num-Pending"
)

// request returns the JSON of a multi_last request for keys:
// {"multi_last":["$KV.<bucket>.<key>",…],"batch":<n>}. Keys and bucket
// names hold nothing JSON escapes, so it is written by hand: a lookup makes
// one on every read.
func (g *multiGetter) request(keys []string) []byte {
	n := 32
	for _, k := range keys {
		n += len(g.prefix) + len(k) + 3
	}
	b := make([]byte, 0, n)
	b = append(b, `{"multi_last":[`...)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, g.prefix...)
		b = append(b, k...)
		b = append(b, '"')
	}
	b = append(b, `],"batch":`...)
	b = strconv.AppendInt(b, int64(len(keys)), 10)
	return append(b, '}')
}

// getMany sends one request for keys and collects the answers.
func (g *multiGetter) getMany(ctx context.Context, keys []string) (map[string]KVEntry, error) {
	body := g.request(keys)
	reply, ch, err := g.register(len(keys) + 1)
	if err != nil {
		return nil, err
	}
	defer g.unregister(reply)
	if err := g.nc.PublishRequest(g.subject, reply, body); err != nil {
		return nil, err
	}
	got := make(map[string]KVEntry, len(keys))
	for {
		select {
		case m := <-ch:
			if status := m.Header.Get(hdrStatus); status != "" && len(m.Data) == 0 {
				switch status {
				case "204": // end of batch
					return got, nil
				case "404": // none of the subjects has a message
					return got, nil
				}
				return nil, statusError(status, m.Header.Get(hdrDescription), "direct get")
			}
			subj := m.Header.Get(hdrSubject)
			seq, err := strconv.ParseUint(m.Header.Get(hdrSequence), 10, 64)
			if !strings.HasPrefix(subj, g.prefix) || err != nil {
				return nil, pmix.Errorf(pmix.ErrUnpackFailure, "direct get answered subject %q sequence %q", subj, m.Header.Get(hdrSequence))
			}
			if !isDeletion(m.Header) {
				key := subj[len(g.prefix):]
				got[key] = KVEntry{Key: key, Value: m.Data, Revision: seq}
			}
			if m.Header.Get(hdrNumPending) == "0" {
				return got, nil // the last answer; the end of batch follows
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// register subscribes on first use and returns a fresh reply subject and
// the channel its answers arrive on.
func (g *multiGetter) register(capacity int) (string, chan *nats.Msg, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return "", nil, ErrKVClosed
	}
	if g.sub == nil {
		inbox := g.nc.NewInbox() + "."
		sub, err := g.nc.Subscribe(inbox+"*", g.route)
		if err != nil {
			return "", nil, err
		}
		_ = sub.SetPendingLimits(-1, -1)
		g.inbox, g.sub = inbox, sub
	}
	g.next++
	reply := g.inbox + strconv.FormatUint(g.next, 36)
	ch := make(chan *nats.Msg, capacity+1)
	g.pending[reply] = ch
	return reply, ch, nil
}

func (g *multiGetter) unregister(reply string) {
	g.mu.Lock()
	delete(g.pending, reply)
	g.mu.Unlock()
}

// route hands an answer to its request. The channel holds every answer a
// request can get (one per key, and the end of batch), so the send never
// blocks; answers to a request that gave up are dropped.
func (g *multiGetter) route(m *nats.Msg) {
	g.mu.Lock()
	ch := g.pending[m.Subject]
	g.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- m:
	default:
	}
}

func (g *multiGetter) close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	if g.sub == nil {
		return nil
	}
	err := g.sub.Unsubscribe()
	g.sub = nil
	return err
}

// isDeletion reports whether a KV message with headers h is a delete,
// purge or expiry marker rather than a value.
func isDeletion(h nats.Header) bool {
	return h.Get(hdrKVOperation) != "" || h.Get(hdrMarker) != ""
}
