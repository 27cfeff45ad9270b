package router

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/subjects"
)

// Transport is the part of NATS the router uses: publish, subscribe into
// one channel or to a callback, flush. NATS is the real one; MemTransport
// carries messages in memory, so the routing logic is tested without a
// server.
type Transport interface {
	PublishMsg(*nats.Msg) error
	// Subscribe feeds the messages on subject (a pattern) into ch, in the
	// order the connection receives them, each with Sub.Subject set to
	// subject.
	Subscribe(subject string, ch chan *nats.Msg) (Subscription, error)
	// SubscribeFunc calls f with each message on subject (a pattern),
	// outside the inbox: for the router's own signals (a stream's
	// advisories), not events. f must not block.
	SubscribeFunc(subject string, f func(*nats.Msg)) (Subscription, error)
	// Flush returns once the server has processed what was sent before.
	Flush(ctx context.Context) error
}

// NATS is a Transport over a NATS connection.
func NATS(nc *nats.Conn) Transport { return natsTransport{nc} }

type natsTransport struct{ nc *nats.Conn }

func (t natsTransport) PublishMsg(m *nats.Msg) error { return t.nc.PublishMsg(m) }

// Subscription is one subscription of a Transport; *nats.Subscription is
// one.
type Subscription interface {
	Unsubscribe() error
	// Dropped is how many messages did not fit the channel (NATS's slow
	// consumer).
	Dropped() (int, error)
}

func (t natsTransport) Subscribe(subject string, ch chan *nats.Msg) (Subscription, error) {
	sub, err := t.nc.ChanSubscribe(subject, ch)
	if err != nil {
		return nil, err
	}
	return sub, nil
}

func (t natsTransport) SubscribeFunc(subject string, f func(*nats.Msg)) (Subscription, error) {
	sub, err := t.nc.Subscribe(subject, f)
	if err != nil {
		return nil, err
	}
	return sub, nil
}

func (t natsTransport) Flush(ctx context.Context) error { return t.nc.FlushWithContext(ctx) }

// MemTransport is a Transport in memory: a message published goes, at
// once and in order, to every Subscription whose pattern matches its
// subject (NATS's "*" and ">" wildcards). The zero value is ready; it
// waits for room in a full channel, or with dropWhenFull drops the
// message and counts it, as NATS does.
type MemTransport struct {
	mu           sync.Mutex
	sendMu       sync.Mutex
	subs         map[*memSub]struct{}
	dropWhenFull bool
	stores       []func(*nats.Msg) // MemStream's: after the subscribers
}

// onPublish has f called with every message published, after it went to
// the subscribers (as a NATS server delivers a message before a stream
// stores it), outside the transport's lock: f may publish.
func (t *MemTransport) onPublish(f func(*nats.Msg)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stores = append(t.stores, f)
}

type memSub struct {
	t       *MemTransport
	pattern []string
	sub     *nats.Subscription
	ch      chan *nats.Msg
	f       func(*nats.Msg) // SubscribeFunc's: called instead of ch
	dropped atomic.Int64
}

func (s *memSub) Unsubscribe() error {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	delete(s.t.subs, s)
	return nil
}

func (s *memSub) Dropped() (int, error) { return int(s.dropped.Load()), nil }

func (t *MemTransport) PublishMsg(m *nats.Msg) error {
	toks := strings.Split(m.Subject, ".")
	// Deliveries are serialized by sendMu, not mu: a publish that waits
	// for room in a full channel must not keep the channel's reader from
	// counting its drops (Dropped).
	t.sendMu.Lock()
	t.mu.Lock()
	stores := t.stores
	var to []*memSub
	for s := range t.subs {
		if subjects.MatchTokens(s.pattern, toks) {
			to = append(to, s)
		}
	}
	t.mu.Unlock()
	var funcs []func()
	for _, s := range to {
		c := *m
		c.Sub = s.sub
		if s.f != nil {
			funcs = append(funcs, func() { s.f(&c) })
			continue
		}
		if !t.dropWhenFull {
			s.ch <- &c
			continue
		}
		select {
		case s.ch <- &c:
		default:
			s.dropped.Add(1)
		}
	}
	t.sendMu.Unlock()
	for _, f := range funcs { // outside the locks: f may publish
		f()
	}
	for _, f := range stores {
		f(m)
	}
	return nil
}

func (t *MemTransport) Subscribe(subject string, ch chan *nats.Msg) (Subscription, error) {
	return t.add(&memSub{t: t, pattern: strings.Split(subject, "."), sub: &nats.Subscription{Subject: subject}, ch: ch})
}

// SubscribeFunc calls f, on the publisher's goroutine once the message
// went to the channels, with each message matching subject.
func (t *MemTransport) SubscribeFunc(subject string, f func(*nats.Msg)) (Subscription, error) {
	return t.add(&memSub{t: t, pattern: strings.Split(subject, "."), sub: &nats.Subscription{Subject: subject}, f: f})
}

func (t *MemTransport) add(s *memSub) (Subscription, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.subs == nil {
		t.subs = map[*memSub]struct{}{}
	}
	t.subs[s] = struct{}{}
	return s, nil
}

func (t *MemTransport) Flush(context.Context) error { return nil }
