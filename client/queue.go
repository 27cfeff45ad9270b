package client

import (
	"sync"

	"github.com/pmixbus/pmixbus/proto"
)

// queue is an unbounded FIFO of invocations: the read loop never waits for
// handlers, and handlers run one after another in the order the agent sent
// them, as on a PMIx progress thread.
type queue struct {
	mu     sync.Mutex
	items  []*proto.Frame
	ready  chan struct{} // signalled when items become non-empty
	closed bool
}

func newQueue() *queue { return &queue{ready: make(chan struct{}, 1)} }

func (q *queue) push(f *proto.Frame) {
	q.mu.Lock()
	q.items = append(q.items, f)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// pop returns the next frame, waiting for one; false once the queue is
// closed and drained.
func (q *queue) pop() (*proto.Frame, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			f := q.items[0]
			q.items[0] = nil
			q.items = q.items[1:]
			q.mu.Unlock()
			return f, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return nil, false
		}
		<-q.ready
	}
}

// tryPop returns the next frame if one is queued.
func (q *queue) tryPop() (*proto.Frame, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return nil, false
	}
	f := q.items[0]
	q.items[0] = nil
	q.items = q.items[1:]
	return f, true
}

// runHandlers invokes the agent's requests in order until the connection
// ends. Invocations already queued run with the socket corked, so the
// answers of a burst go back in one write.
func (c *Client) runHandlers() {
	defer c.wg.Done()
	for {
		f, ok := c.invokes.pop()
		if !ok {
			return
		}
		c.w.Cork()
		c.invoke(f)
		f.Recycle() // the handlers keep what the frame and its entries held, not them
		for range 256 {
			if f, ok = c.invokes.tryPop(); !ok {
				break
			}
			c.invoke(f)
			f.Recycle()
		}
		_ = c.w.Uncork()
	}
}
