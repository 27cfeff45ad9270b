package iof

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// channel is one process channel being captured: Write appends to a
// buffer, and a goroutine of the Service stores the buffer as records —
// whole lines, at most MaxRecord bytes, as many lines as are there when
// the previous record is stored. So a quiet process's line goes out at
// once, and a fast writer's lines go out in big records, with no timer.
// A partial line waits Idle for its end; Close flushes it.
//
// Records are numbered (and handed to the Service's taps) under mu: by
// the goroutine as it takes them, or, when the goroutine has nothing to
// do, by Write itself — so that the line of a quiet process reaches a
// tap without waiting for the goroutine to wake (ready).
type channel struct {
	svc *Service
	src *Source
	ch  Channel
	bud *budget

	mu       sync.Mutex
	space    *sync.Cond // signalled when the buffer shrinks or the channel ends
	pending  []byte
	lastW    time.Time // the last Write, for the idle flush
	seq      uint64
	ready    []Record     // numbered by Write, not yet stored
	idle     bool         // the goroutine found nothing to take: Write numbers what it can
	help     []helpRecord // queued diag records, each its own record
	inflight []inflight   // stored asynchronously, not yet acknowledged; run's only
	closing  bool
	finished bool // the Complete record is stored (or the service closed)
	err      error
	kick     chan struct{}
	done     chan struct{}
}

// pipeline is how many records of a channel may be unacknowledged.
const pipeline = 8

type inflight struct {
	m *nats.Msg
	f natsjs.PubAckFuture // nil: the publish failed at once
}

type helpRecord struct {
	help   *Help
	text   []byte
	stored chan<- error // buffered; nil when nobody waits (DiagStored)
}

// newChannel starts a channel's writer. s.mu is held.
func (s *Service) newChannel(src *Source, ch Channel) *channel {
	c := &channel{svc: s, src: src, ch: ch, kick: make(chan struct{}, 1), done: make(chan struct{})}
	c.space = sync.NewCond(&c.mu)
	if ch != STDDIAG {
		c.bud = s.budgetFor(src.proc.Nspace, ch, src.opts.Limit)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(c.done)
		c.run()
	}()
	return c
}

// Write queues p, waiting while the channel holds highWater bytes. It
// never fails: a process's write must not see an error because a viewer
// is slow; after the channel ended, bytes are dropped.
func (c *channel) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.pending) >= highWater && !c.finished {
		c.space.Wait()
	}
	if c.finished || c.closing {
		return len(p), nil
	}
	c.pending = append(c.pending, p...)
	c.lastW = time.Now()
	if c.idle && len(c.ready) == 0 && len(c.pending) == len(p) {
		if n := c.cut(); n > 0 {
			c.idle = false
			c.ready = append(c.ready, c.number(c.takePending(n), nil, false))
		}
	}
	c.signal()
	return len(p), nil
}

// record queues a diag record of its own; stored, if set, is told how
// storing it went.
func (c *channel) record(help *Help, text []byte, stored chan<- error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished || c.closing {
		return ErrClosed
	}
	// Never nil, which take would read as nothing to store.
	c.help = append(c.help, helpRecord{help, append([]byte{}, text...), stored})
	c.signal()
	return nil
}

func (c *channel) signal() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *channel) close() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.signal()
}

func (c *channel) wait() error {
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *channel) release() {
	if c.bud != nil {
		c.svc.releaseBudget(c.bud)
	}
}

// run stores the channel's records until its Complete record is stored.
func (c *channel) run() {
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	defer func() {
		idle.Stop()
		c.mu.Lock()
		c.finished = true
		c.space.Broadcast()
		c.mu.Unlock()
	}()
	for {
		c.mu.Lock()
		n := c.take()
		c.mu.Unlock()
		var err error
		switch {
		case n.rec != nil && !n.rec.Complete && c.pipelined():
			err = c.storeAsync(*n.rec)
		case n.rec != nil:
			// After what went before: the end, and a diag's reply, follow it.
			if err = c.settle(0); err == nil {
				err = c.store(*n.rec)
			}
			if n.stored != nil {
				n.stored <- err
			}
		default:
			if err = c.settle(0); err == nil {
				err = c.await(idle, n.wait)
			}
		}
		if err != nil {
			c.fail(err)
			return
		}
		if n.rec != nil && n.rec.Complete {
			return
		}
	}
}

// pipelined says whether stdout and stderr records are stored without
// waiting for each acknowledgement: not under DROP_OLDEST, which marks its
// reservations with the stream's last sequence, only settled records move.
func (c *channel) pipelined() bool {
	return c.ch != STDDIAG && (c.bud == nil || !c.bud.limit.DropOldest)
}

// await waits for more to store, or until a partial line has waited long
// enough (wait > 0).
func (c *channel) await(idle *time.Timer, wait time.Duration) error {
	var timeout <-chan time.Time
	if wait > 0 {
		idle.Reset(wait)
		timeout = idle.C
	}
	select {
	case <-c.kick:
	case <-timeout:
	case <-c.svc.ctx.Done():
		return ErrClosed
	}
	return nil
}

func (c *channel) fail(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}

// storeAsync stores a stdout or stderr record without waiting for its
// acknowledgement, so the stream takes several of a fast writer's records
// at once; at most pipeline are unacknowledged.
func (c *channel) storeAsync(r Record) error {
	m, live := c.message(r)
	if live {
		return c.sendLive(m)
	}
	f, err := c.svc.async.PublishMsgAsync(m)
	if err != nil {
		f = nil // stored synchronously when settled
	}
	c.inflight = append(c.inflight, inflight{m, f})
	return c.settle(pipeline - 1)
}

// settle waits for acknowledgements until at most keep records are
// unacknowledged. A record that failed is stored again, synchronously,
// with its message id, after the records before it have settled: the
// stream may then hold a later record first, which a reader tells by the
// sequence.
func (c *channel) settle(keep int) error {
	for len(c.inflight) > keep {
		in := c.inflight[0]
		c.inflight = c.inflight[1:]
		var err error
		if in.f == nil {
			err = errors.New("not sent")
		} else {
			select {
			case ack := <-in.f.Ok():
				c.svc.lastSeq.Store(ack.Sequence)
				continue
			case err = <-in.f.Err():
			case <-c.svc.ctx.Done():
				return ErrClosed
			}
		}
		c.svc.log.Debug("a record's store failed; storing it again", "subject", in.m.Subject, "err", err)
		if err := c.svc.publish(in.m, "output of "+c.src.proc.String()); err != nil {
			return err
		}
	}
	return nil
}

// next is what take found to do: a record (with the waiter of a diag),
// the channel's end among them, or nothing yet — then how long a partial
// line may still wait (0: until kicked).
type next struct {
	rec    *Record
	stored chan<- error
	wait   time.Duration
}

// take picks what to do next, numbering it. c.mu is held.
func (c *channel) take() next {
	c.idle = false
	if len(c.ready) > 0 {
		r := c.ready[0]
		c.ready = c.ready[1:]
		return next{rec: &r}
	}
	if len(c.help) > 0 {
		h := c.help[0]
		c.help = c.help[1:]
		r := c.number(h.text, h.help, false)
		return next{rec: &r, stored: h.stored}
	}
	n := c.cut()
	if n == 0 && len(c.pending) > 0 {
		idle := c.svc.cfg.Idle - time.Since(c.lastW)
		if !c.closing && idle > 0 {
			return next{wait: idle}
		}
		n = min(len(c.pending), MaxRecord)
	}
	if n > 0 {
		r := c.number(c.takePending(n), nil, false)
		return next{rec: &r}
	}
	if c.closing {
		r := c.number(nil, nil, true)
		return next{rec: &r}
	}
	c.idle = true
	return next{}
}

// takePending takes the first n pending bytes. c.mu is held.
func (c *channel) takePending(n int) []byte {
	data := bytes.Clone(c.pending[:n])
	c.pending = c.pending[n:] // no shifting: append moves the rest when it grows
	c.space.Broadcast()
	return data
}

// number makes the channel's next record and hands it to the Service's
// taps. c.mu is held.
func (c *channel) number(data []byte, help *Help, complete bool) Record {
	c.seq++
	p := c.src.proc
	r := Record{Cluster: c.svc.cfg.Cluster, Nspace: p.Nspace, Rank: p.Rank, Channel: c.ch, Seq: c.seq, Time: time.Now(), Data: data, Complete: complete, Help: help}
	c.svc.tapped(r) // a launcher on this node has it at once (tap.go)
	return r
}

// cut is how many pending bytes make the next record: the whole lines in
// the first MaxRecord bytes, or MaxRecord bytes of a longer line; in RAW
// mode whatever is there, up to MaxRecord.
func (c *channel) cut() int {
	head := c.pending[:min(len(c.pending), MaxRecord)]
	if c.src.opts.Raw {
		return len(head)
	}
	if i := bytes.LastIndexByte(head, '\n'); i >= 0 {
		return i + 1
	}
	if len(head) == MaxRecord {
		return MaxRecord
	}
	return 0
}

// store publishes one record (or the Complete one, with no data), within
// the job's limit.
func (c *channel) store(r Record) error {
	m, live := c.message(r)
	if live {
		return c.sendLive(m)
	}
	return c.svc.publish(m, "output of "+c.src.proc.String())
}

// message is a record's message. Within the job's limit it is to be
// stored; over it (DROP_NEWEST, the warning given once) it is live: sent
// to whoever is watching now on a subject the stream does not keep, so
// that the launcher's view goes on while the stream keeps the limit. A
// Complete record is always stored, without bytes over the limit.
func (c *channel) message(r Record) (m *nats.Msg, live bool) {
	if len(r.Data) > 0 && c.bud != nil && !c.bud.take(len(r.Data)) {
		live = !r.Complete
		if r.Complete {
			r.Data = nil
		}
	}
	p := c.src.proc
	if live {
		m = Message(r, "")
		m.Subject += "." + tokenLive
		return m, true
	}
	id := p.Nspace + "/" + c.src.opts.Incarnation + "/" + p.Rank.String() + "/" + channelToken(c.ch) + "/" + strconv.FormatUint(r.Seq, 10)
	return Message(r, id), false
}

// sendLive sends a record over the limit. Nothing acknowledges it and
// nothing paces the writer: the viewers' subscriptions bound what they
// hold, and a viewer that falls behind misses some of it.
func (c *channel) sendLive(m *nats.Msg) error {
	if err := c.svc.cfg.Conn.PublishMsg(m); err != nil && c.svc.cfg.Conn.IsClosed() {
		return fmt.Errorf("%w: %v", ErrClosed, err)
	}
	return nil
}
