package router

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/event"
)

// Outcome reports go on NATS only while someone subscribes to them (a
// `pmixbus watch --outcomes`, an RM outside the agent). Encoding and
// publishing a report for every chain cost most of what fan-out spends
// beyond the chain itself, for nobody in the common case; the host's
// OnOutcome callbacks get every report regardless, at once.
//
// The agent asks NATS whether its outcome subject has a subscriber by
// sending an empty batch there as a request (outcomeProbe): NATS answers
// at once that there are no responders if nobody subscribes, and a
// subscriber receives an empty batch, which it reads as no reports.
// Meanwhile reports wait in the queue. A probe that finds nobody discards
// those that ended before it was sent: published, they would have reached
// the server before the probe, with nobody to receive them. One that finds
// a listener has them published, and the following ones as they come, until
// a probe finds nobody again. So a listener receives every report of a
// chain that ended after its subscription was known to the agent's server,
// as when every report was published; the first ones come up to a probe
// interval late.
//
// Reports wait at most outcomeFlush for others to share their NATS message,
// and a message holds at most outcomeBatch reports. Under load this turns
// one message per chain into one per batch.
const (
	outcomeFlush   = 2 * time.Millisecond
	outcomeBatch   = 256
	outcomeBacklog = 1 << 16 // reports waiting beyond this are dropped, and logged
	// outcomeProbeInterval is the time between probes; outcomeProbeTimeout
	// how long a probe waits for NATS to say nobody subscribes (past it,
	// somebody does).
	outcomeProbeInterval = 250 * time.Millisecond
	outcomeProbeTimeout  = 250 * time.Millisecond
	// outcomeProbeBacklog reports waiting with no listener known have the
	// agent probe before the interval is up.
	outcomeProbeBacklog = 1024
)

// outcomeQueue holds reports until the publishing goroutine sends them,
// or a probe finds that nobody would receive them. Under fan-out a probe
// takes 100–300 ms to come back (its PONG waits behind the agent's event
// backlog) while thousands of reports queue, so the queue is a list of
// fixed-size chunks: adding never moves what is queued, discarding the
// front drops whole chunks, and emptied chunks are reused (a single slice
// grown by append and cut by slices.Delete moved every waiting report,
// through the GC's write barriers, 5 % of the fan-out's CPU).
type outcomeQueue struct {
	mu      sync.Mutex
	chunks  [][]event.OutcomeReport // each of capacity outcomeChunk; the first from head
	head    int                     // reports of chunks[0] already gone
	n       int                     // reports queued
	free    [][]event.OutcomeReport // emptied chunks, at most outcomeFreeChunks
	added   uint64                  // reports ever added: the i-th queued is number added-n+i
	heard   bool                    // the last probe found a listener: reports go out
	dropped int                     // not published for the backlog, while heard
	unheard int                     // discarded for the backlog while nobody was known to listen
	ready   chan struct{}           // reports to publish
	probe   chan struct{}           // many wait: probe now
}

// outcomeChunk is the reports one chunk holds; outcomeFreeChunks the
// emptied chunks kept for reuse (a probe's worth of reports under load,
// about 2 MB).
const (
	outcomeChunk      = 128
	outcomeFreeChunks = 64
)

func (q *outcomeQueue) add(r event.OutcomeReport) {
	q.mu.Lock()
	if q.n >= outcomeBacklog {
		if q.heard {
			q.dropped++
			q.mu.Unlock()
			return
		}
		// Nobody listened at the last probe: make room by forgetting the
		// older half, which a listener is the least likely to want.
		n := q.n / 2
		q.dropFrontLocked(n)
		q.unheard += n
	}
	q.pushLocked(r)
	q.added++
	heard, waiting := q.heard, q.n
	q.mu.Unlock()
	switch {
	case heard:
		q.kick()
	case waiting%outcomeProbeBacklog == 0:
		select {
		case q.probe <- struct{}{}:
		default:
		}
	}
}

func (q *outcomeQueue) pushLocked(r event.OutcomeReport) {
	last := len(q.chunks) - 1
	if last < 0 || len(q.chunks[last]) == outcomeChunk {
		var c []event.OutcomeReport
		if k := len(q.free); k > 0 {
			c, q.free = q.free[k-1], q.free[:k-1]
		} else {
			c = make([]event.OutcomeReport, 0, outcomeChunk)
		}
		q.chunks = append(q.chunks, c)
		last++
	}
	q.chunks[last] = append(q.chunks[last], r)
	q.n++
}

// dropFrontLocked forgets the n oldest reports (n <= q.n).
func (q *outcomeQueue) dropFrontLocked(n int) {
	q.n -= n
	for n > 0 {
		c := q.chunks[0]
		left := len(c) - q.head
		if n < left {
			clear(c[q.head : q.head+n]) // nothing they point to is kept alive
			q.head += n
			return
		}
		n -= left
		clear(c)
		if len(q.free) < outcomeFreeChunks {
			q.free = append(q.free, c[:0])
		}
		q.chunks[0] = nil
		q.chunks = q.chunks[1:]
		q.head = 0
	}
	if len(q.chunks) == 0 {
		q.chunks = q.chunks[:0:0] // let go of the spine a burst grew
	}
}

func (q *outcomeQueue) kick() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take returns up to n reports to publish, none unless a listener was
// found, and the reports dropped since the last call.
func (q *outcomeQueue) take(n int) ([]event.OutcomeReport, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	d := q.dropped
	q.dropped = 0
	if !q.heard {
		return nil, d
	}
	k := min(n, q.n)
	out := make([]event.OutcomeReport, 0, k)
	for i := 0; len(out) < k; i++ {
		c := q.chunks[i]
		if i == 0 {
			c = c[q.head:]
		}
		out = append(out, c[:min(len(c), k-len(out))]...)
	}
	q.dropFrontLocked(k)
	return out, d
}

// mark returns the number of the next report, to pass to heard.
func (q *outcomeQueue) mark() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.added
}

// probed records a probe's finding; mark is what mark returned before it
// was sent. Without a listener, the reports before mark are discarded
// (returned: how many); with one, everything queued goes out. lost is how
// many reports the backlog made room for while nobody was known to listen,
// counted once a listener is found.
func (q *outcomeQueue) probed(listener bool, mark uint64) (discarded, lost int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.heard = listener
	if listener {
		lost, q.unheard = q.unheard, 0
		if q.n > 0 {
			q.kick()
		}
		return 0, lost
	}
	first := q.added - uint64(q.n)
	if mark > first {
		discarded = int(min(mark-first, uint64(q.n)))
		q.dropFrontLocked(discarded)
	}
	discarded += q.unheard
	q.unheard = 0
	return discarded, 0
}

// Outcomes publishes an agent's outcome reports (above). Its methods are
// safe for concurrent use.
type Outcomes struct {
	q       outcomeQueue
	nc      *nats.Conn
	subject string
	log     *slog.Logger
	ctx     context.Context
	done    <-chan struct{}

	dropped, published, unheard atomic.Uint64
}

// NewOutcomes returns the outcome reports of the agent of node in cluster,
// published on nc; run its Publish and Probe on goroutines of the agent's,
// which return once done is closed (ctx ends the probes' waits).
func NewOutcomes(nc *nats.Conn, cluster, node string, log *slog.Logger, ctx context.Context, done <-chan struct{}) *Outcomes {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o := &Outcomes{nc: nc, subject: event.OutcomeSubject(cluster, node), log: log, ctx: ctx, done: done}
	o.q.ready = make(chan struct{}, 1)
	o.q.probe = make(chan struct{}, 1)
	return o
}

// Add queues a report of a chain that ended.
func (o *Outcomes) Add(r event.OutcomeReport) { o.q.add(r) }

// Stats returns the reports dropped (NATS not keeping up), published, and
// not published for want of a listener.
func (o *Outcomes) Stats() (dropped, published, unheard uint64) {
	return o.dropped.Load(), o.published.Load(), o.unheard.Load()
}

// outcomeProbe is an empty batch of reports: a msgpack array of length 0.
var outcomeProbe = []byte{0x90}

// Probe asks NATS, every outcomeProbeInterval until done is closed, whether anyone subscribes to the agent's outcome subject, and
// tells the queue. It asks at once when outcomeProbeBacklog reports wait
// for an answer, so that a burst with nobody listening holds few.
func (o *Outcomes) Probe() {
	tick(o.done, outcomeProbeInterval, o.q.probe, func() bool { o.probeOnce(); return false })
}

func (o *Outcomes) probeOnce() {
	q := &o.q
	mark := q.mark()
	listener, err := o.probeListener(o.subject)
	switch {
	case err != nil:
		// NATS is down, or the agent stops: keep the reports, ask again.
		o.log.Debug("probing for outcome listeners", "err", err)
	case !listener:
		discarded, _ := q.probed(false, mark)
		o.unheard.Add(uint64(discarded))
	default:
		if _, lost := q.probed(true, mark); lost > 0 {
			o.dropped.Add(uint64(lost))
			o.log.Warn("outcome reports dropped: more waited for a listener than the backlog holds", "dropped", lost)
		}
	}
}

// probeListener sends the probe as a request to subject and reports
// whether anyone received it. It does not guess from a timeout, which a
// busy agent's backlog of events could pass: the server answers "no
// responders" as it processes the request, before the PONG of the flush
// that follows on the same connection, so once the flush returns the
// answer is in hand, or there is none because somebody subscribes.
func (o *Outcomes) probeListener(subject string) (bool, error) {
	inbox := o.nc.NewRespInbox()
	// A channel for the one answer (SubscribeSync would make one of
	// 65,536 per probe).
	answer := make(chan *nats.Msg, 1)
	sub, err := o.nc.ChanSubscribe(inbox, answer)
	if err != nil {
		return false, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	ctx, cancel := context.WithTimeout(o.ctx, outcomeProbeTimeout)
	defer cancel()
	if err := o.nc.PublishMsg(&nats.Msg{Subject: subject, Reply: inbox, Data: outcomeProbe}); err != nil {
		return false, err
	}
	if err := o.nc.FlushWithContext(ctx); err != nil {
		return false, err
	}
	select {
	case m := <-answer:
		// "No responders" is a message without data whose status is 503.
		return len(m.Data) > 0 || m.Header.Get("Status") != noRespondersStatus, nil
	default:
		return true, nil // received, not answered
	}
}

// noRespondersStatus is the status of the server's answer to a request
// nobody received.
const noRespondersStatus = "503"

// Publish sends queued reports in batches, while a listener is known,
// until done is closed, then sends what is left.
func (o *Outcomes) Publish() {
	q := &o.q
	subject := o.subject
	send := func() {
		for {
			batch, dropped := q.take(outcomeBatch)
			if dropped > 0 {
				o.dropped.Add(uint64(dropped))
				o.log.Warn("outcome reports dropped: NATS is not keeping up", "dropped", dropped)
			}
			if len(batch) == 0 {
				return
			}
			b, err := event.MarshalOutcomes(batch)
			if err != nil {
				o.log.Warn("encoding outcome reports", "err", err)
				continue
			}
			if err := o.nc.Publish(subject, b); err != nil {
				o.log.Debug("publishing outcome reports", "err", err)
				continue
			}
			o.published.Add(uint64(len(batch)))
		}
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-q.ready:
			timer.Reset(outcomeFlush)
			select {
			case <-timer.C:
			case <-o.done:
				send()
				return
			}
			send()
		case <-o.done:
			send()
			return
		}
	}
}
