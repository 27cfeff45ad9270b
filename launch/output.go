package launch

import (
	"context"
	"fmt"
	"time"

	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/pmix"
)

// The launcher's half of I/O forwarding: it reads each job's records from
// its cluster's output stream (package iof) through an ordered consumer,
// from the first, and hands them to the Display, the help Aggregator or
// the plain writers. A rank's end is acted on only once both its output
// channels have ended in the stream, so the last line of a rank that
// failed is printed before the run reports it (prrte #109).

// outputWait bounds how long a rank's end waits for its output to end: an
// agent that reported the end stored the output before, so only a stream
// that lost it makes the launcher wait this long.
const outputWait = 5 * time.Second

type rankKey struct {
	nspace string
	rank   pmix.Rank
}

// heldEnd is a rank's end waiting for the end of its output.
type heldEnd struct {
	end   ProcEnd
	until time.Time
}

// followOutput starts reading every job's output.
func (r *Run) followOutput(ctx context.Context) error {
	for _, j := range r.jobs {
		f, err := iof.Follow(ctx, r.cfg.Conn, string(j.cluster), j.nspace, false, r.deliver, func(err error) {
			r.log.Warn("a record of the output stream that does not parse", "err", err)
		})
		if err != nil {
			return err
		}
		r.followers = append(r.followers, f)
	}
	return nil
}

// deliver passes a record from a Follower's goroutine to the run's; it
// blocks while the run is busy, which holds the consumer back.
func (r *Run) deliver(d iof.Delivered) {
	select {
	case r.recs <- d:
	case <-r.stop:
	}
}

// record shows one record and counts the ends of channels.
func (r *Run) record(d iof.Delivered) {
	rec := d.Record
	switch {
	case d.Job == iof.JobDiag:
		_, _ = r.cfg.Stderr.Write(rec.Data)
		return
	case d.Job != "":
		return
	case rec.Help != nil && r.cfg.Help != nil:
		if err := r.cfg.Help.Show(rec.Help.File, rec.Help.Topic, string(rec.Data)); err != nil {
			r.log.Warn("writing a help message", "err", err)
		}
	case r.cfg.Display != nil:
		if err := r.cfg.Display.Write(rec); err != nil {
			r.log.Warn("writing a process's output", "proc", fmt.Sprintf("%s.%d", rec.Nspace, rec.Rank), "err", err)
		}
	case rec.Channel == iof.STDOUT:
		_, _ = r.cfg.Stdout.Write(rec.Data)
	default:
		_, _ = r.cfg.Stderr.Write(rec.Data)
	}
	if !rec.Complete || rec.Channel == iof.STDDIAG {
		return
	}
	k := rankKey{rec.Nspace, rec.Rank}
	r.mu.Lock()
	r.completes[k]++
	h, held := r.held[k]
	done := r.completes[k] >= 2
	if held && done {
		delete(r.held, k)
	}
	r.mu.Unlock()
	if held && done {
		r.ended(h.end)
	}
}

// procEnd takes an agent's report of a rank's end: acted on now if the
// rank's output has ended, else once it has.
func (r *Run) procEnd(end ProcEnd) {
	k := rankKey{end.Nspace, end.Rank}
	r.mu.Lock()
	if r.completes[k] < 2 && len(r.followers) > 0 {
		if _, dup := r.held[k]; !dup {
			r.held[k] = heldEnd{end: end, until: time.Now().Add(outputWait)}
		}
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.ended(end)
}

// releaseHeld acts on the ends whose output has not ended in time.
func (r *Run) releaseHeld(now time.Time) {
	r.mu.Lock()
	var late []ProcEnd
	for k, h := range r.held {
		if now.After(h.until) {
			late = append(late, h.end)
			delete(r.held, k)
		}
	}
	r.mu.Unlock()
	for _, end := range late {
		r.log.Warn("a rank's output did not end in the stream; it may be incomplete", "nspace", end.Nspace, "rank", end.Rank, "node", end.Node)
		r.ended(end)
	}
}

// stopOutput stops the Followers and writes the help counts left.
func (r *Run) stopOutput() {
	for _, f := range r.followers {
		f.Stop()
	}
	if r.cfg.Help != nil {
		if err := r.cfg.Help.Close(); err != nil {
			r.log.Warn("writing the help message counts", "err", err)
		}
	}
}
