package agent

import (
	"slices"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/event"
)

// Outcome batching: a report waits at most outcomeFlush for others to share
// its NATS message, and a message holds at most outcomeBatch reports. Under
// load this turns one message per chain into one per batch; the host's
// OnOutcome callbacks are not delayed.
const (
	outcomeFlush   = 2 * time.Millisecond
	outcomeBatch   = 256
	outcomeBacklog = 1 << 16 // reports waiting beyond this are dropped, and logged
)

// outcomeQueue holds reports until the publishing goroutine sends them.
type outcomeQueue struct {
	mu      sync.Mutex
	reports []event.OutcomeReport
	dropped int
	ready   chan struct{}
}

func (q *outcomeQueue) add(r event.OutcomeReport) {
	q.mu.Lock()
	if len(q.reports) >= outcomeBacklog {
		q.dropped++
	} else {
		q.reports = append(q.reports, r)
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *outcomeQueue) take(n int) ([]event.OutcomeReport, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := min(n, len(q.reports))
	out := slices.Clone(q.reports[:k])
	q.reports = slices.Delete(q.reports, 0, k)
	d := q.dropped
	q.dropped = 0
	return out, d
}

// publishOutcomes sends queued reports in batches until the agent stops,
// then sends what is left.
func (a *Agent) publishOutcomes() {
	q := &a.outcomes
	subject := event.OutcomeSubject(string(a.cfg.Cluster), a.cfg.Node)
	send := func() {
		for {
			batch, dropped := q.take(outcomeBatch)
			if dropped > 0 {
				a.stats.outcomesDropped.Add(uint64(dropped))
				a.log.Warn("outcome reports dropped: NATS is not keeping up", "dropped", dropped)
			}
			if len(batch) == 0 {
				return
			}
			b, err := event.MarshalOutcomes(batch)
			if err != nil {
				a.log.Warn("encoding outcome reports", "err", err)
				continue
			}
			if err := a.nc.Publish(subject, b); err != nil {
				a.log.Debug("publishing outcome reports", "err", err)
			}
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
			case <-a.done:
				send()
				return
			}
			send()
		case <-a.done:
			send()
			return
		}
	}
}
