package launch

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/pmix"
)

// The launcher's half of I/O forwarding. Each job's records are stored in
// its cluster's output stream (package iof); the launcher takes them as
// they are published, on a plain subscription to the job's output
// subjects, which costs one hop, and shows each (process, channel)'s
// records in sequence. Whenever it may have missed one — a sequence that
// skips, a rank that ended before its output did, a reconnect — it reads
// the stream from where it last read it up to the end (a repair), and the
// sequences put the two sources together: every record once, in order.
// A rank's end is acted on only once both its output channels have ended,
// so the last line of a rank that failed is printed before the run
// reports it (prrte #109).

// outputWait bounds how long a rank's end waits for its output to end
// once a repair has read the whole stream: an agent stores the output
// before it reports the end, so only a stream that lost it makes the
// launcher wait this long.
const outputWait = 5 * time.Second

// maxPending bounds the bytes of records the launcher's subscription
// holds while the launcher is behind.
const maxPending = 64 << 20

// maxHeld bounds the bytes of records taken ahead of a missing one; past
// it they are dropped, and the repair brings them.
const maxHeld = 8 << 20

type rankKey struct {
	nspace string
	rank   pmix.Rank
}

// heldEnd is a rank's end waiting for the end of its output.
type heldEnd struct {
	end   ProcEnd
	until time.Time
}

type chanKey struct {
	nspace  string
	rank    pmix.Rank
	channel iof.Channel
}

// chanState is where a (process, channel) is: the next sequence to show,
// and records that came ahead of it.
type chanState struct {
	next uint64
	held map[uint64]iof.Record
	// subSeen is the highest sequence the subscription brought. It brings
	// a channel's records in the order its agent sent them, the live ones
	// (over the job's limit, which the stream never holds) among them.
	subSeen uint64
	// direct marks the held records a direct path brought (none came from
	// the stream).
	direct map[uint64]bool
}

// incoming is a record from the subscription, from an agent's direct
// path (direct.go), or from repair number gen of job.
type incoming struct {
	iof.Delivered
	direct bool
	repair *runJob
	gen    int
}

// outputState is touched by the follow loop and the readers of direct
// paths, under Run.outMu.
type outputState struct {
	chans     map[chanKey]*chanState
	heldBytes int
	seenJob   map[string]bool // job records shown (no sequence: keyed by subject and time)
}

// repairState is a job's repair: the Follower reading the stream, and the
// stream sequence the last one read to.
type repairState struct {
	f      *iof.Follower
	gen    int // the current repair's number: records of a stopped one still queued are ignored
	readTo uint64
}

// subscribeOutput subscribes to every job's records before any rank
// starts.
func (r *Run) subscribeOutput() error {
	for _, j := range r.jobs {
		subj := iof.JobFilter(string(j.cluster), j.nspace)
		sub, err := r.cfg.Conn.Subscribe(subj, func(m *nats.Msg) {
			p, err := iof.ParseMessage(m.Subject, m.Header, m.Data)
			if err != nil {
				r.log.Warn("an output record that does not parse", "subject", m.Subject, "err", err)
				return
			}
			// Waiting here queues what follows in the subscription,
			// up to its limit; past it NATS drops (the stream keeps the
			// records within the job's limit, a repair brings them).
			select {
			case r.recs <- incoming{Delivered: iof.Delivered{Parsed: p}}:
			case <-r.stop:
			}
		})
		if err != nil {
			return pmix.Errorf(pmix.ErrUnreach, "subscribing to %s: %v", subj, err)
		}
		_ = sub.SetPendingLimits(-1, maxPending)
		r.subs = append(r.subs, sub)
	}
	return nil
}

// repair reads job's records from the stream, from where the last repair
// stopped, unless one is reading already.
func (r *Run) repair(j *runJob) {
	rs := r.repairs[j]
	if rs == nil {
		rs = &repairState{}
		r.repairs[j] = rs
	}
	if rs.f != nil {
		return
	}
	rs.gen++
	gen := rs.gen
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Poll)
	defer cancel()
	f, err := iof.Follow(ctx, r.cfg.Conn, string(j.cluster), j.nspace, iof.FollowOptions{StartSeq: rs.readTo + 1, Bad: func(err error) {
		r.log.Warn("a record of the output stream that does not parse", "err", err)
	}}, func(d iof.Delivered) {
		select {
		case r.recs <- incoming{Delivered: d, repair: j, gen: gen}:
		case <-r.stop:
		}
	})
	if err != nil {
		r.log.Warn("reading a job's output from its stream", "nspace", j.nspace, "err", err)
		return
	}
	rs.f = f
}

// record shows what came in, in sequence per (process, channel).
func (r *Run) record(in incoming) {
	if j := in.repair; j != nil {
		rs := r.repairs[j]
		if rs == nil || rs.f == nil || in.gen != rs.gen {
			return // from a repair that has been stopped
		}
		rs.readTo = max(rs.readTo, in.StreamSeq)
		if in.Pending == 0 { // caught up: what the subscription misses next triggers the next one
			rs.f.Stop()
			rs.f = nil
		}
	}
	p := in.Parsed
	if p.Job != "" {
		k := p.Job + "/" + p.Nspace + "/" + p.Time.String()
		if p.Job == iof.JobDiag && !r.out.seenJob[k] {
			r.out.seenJob[k] = true
			_, _ = r.cfg.Stderr.Write(p.Data)
		}
		return
	}
	j := r.partOf(p.Rank)
	if j == nil || p.Nspace != r.nspace {
		return // not a process of the run: its state would only grow
	}
	k := chanKey{p.Nspace, p.Rank, p.Channel}
	st := r.out.chans[k]
	if st == nil {
		st = &chanState{next: 1}
		r.out.chans[k] = st
	}
	if in.repair == nil && !in.direct {
		st.subSeen = max(st.subSeen, p.Seq)
	}
	if p.Seq < st.next {
		return // seen
	}
	if p.Seq > st.next && in.direct {
		// The direct path missed some (made before the launcher attached,
		// or dropped while it fell behind): the subscription brings them,
		// or, when it missed them too, the repair its gap started. Held
		// (or, past maxHeld, left to the subscription).
		if _, dup := st.held[p.Seq]; !dup && r.hold(st, p.Record) {
			if st.direct == nil {
				st.direct = map[uint64]bool{}
			}
			st.direct[p.Seq] = true
		}
		return
	}
	if p.Seq > st.next {
		_, heldFromStream := st.held[p.Seq]
		heldFromStream = heldFromStream && !st.direct[p.Seq]
		switch {
		case !p.Live && in.repair == nil && !heldFromStream:
			// The subscription missed some: hold this, the stream has them.
			r.hold(st, p.Record)
			r.repair(j)
			return
		case in.repair != nil && st.subSeen < p.Seq && r.hold(st, p.Record):
			// From the stream, ahead of the subscription: the records
			// between may be live ones still on their way there (sent
			// before this one), which no stream read brings. Held until
			// the subscription brings them, or this record itself.
			return
		}
		// Nothing in between will come: the subscription has passed it
		// (or brought this live record) and the stream holds none of it
		// (dropped at the job's limit, or sent live). Show what came of
		// it, then this.
		for _, s := range slices.Sorted(maps.Keys(st.held)) {
			if s < p.Seq {
				r.show(r.unhold(st, s))
			}
		}
	}
	if _, both := st.held[p.Seq]; both { // it came both ways
		r.unhold(st, p.Seq)
	}
	if in.direct {
		r.directShown.Add(1)
	}
	r.show(p.Record)
	for st.next = p.Seq + 1; ; st.next++ {
		rec, ok := st.held[st.next]
		if !ok {
			break
		}
		r.unhold(st, st.next)
		r.show(rec)
	}
}

// hold keeps rec until the records before it come, within maxHeld, and
// reports whether it is held.
func (r *Run) hold(st *chanState, rec iof.Record) bool {
	if _, dup := st.held[rec.Seq]; dup {
		return true
	}
	if r.out.heldBytes+len(rec.Data) > maxHeld {
		return false
	}
	if st.held == nil {
		st.held = map[uint64]iof.Record{}
	}
	st.held[rec.Seq] = rec
	r.out.heldBytes += len(rec.Data)
	return true
}

// flushHeld shows, in order, what is still held of rank's channels (of
// every rank when all): their missing records will not come now.
func (r *Run) flushHeld(rank rankKey, all bool) {
	for _, k := range slices.SortedFunc(maps.Keys(r.out.chans), func(a, b chanKey) int {
		return cmp.Or(cmp.Compare(a.nspace, b.nspace), cmp.Compare(a.rank, b.rank), cmp.Compare(a.channel, b.channel))
	}) {
		st := r.out.chans[k]
		if len(st.held) == 0 || (!all && (k.nspace != rank.nspace || k.rank != rank.rank)) {
			continue
		}
		for _, s := range slices.Sorted(maps.Keys(st.held)) {
			r.show(r.unhold(st, s))
			st.next = s + 1
		}
	}
}

func (r *Run) unhold(st *chanState, seq uint64) iof.Record {
	rec := st.held[seq]
	delete(st.held, seq)
	delete(st.direct, seq)
	r.out.heldBytes -= len(rec.Data)
	return rec
}

// show writes one record and counts the ends of channels.
func (r *Run) show(rec iof.Record) {
	switch {
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
// rank's output has ended, else once it has — the agent stored the end
// of the output before it reported, so the stream has it if the
// subscription missed it.
func (r *Run) procEnd(end ProcEnd) {
	k := rankKey{end.Nspace, end.Rank}
	r.mu.Lock()
	if r.completes[k] < 2 {
		if _, dup := r.held[k]; !dup {
			r.held[k] = heldEnd{end: end, until: time.Now().Add(outputWait)}
		}
		r.mu.Unlock()
		if j := r.partOf(end.Rank); j != nil && end.Nspace == r.nspace {
			r.repair(j)
		}
		return
	}
	r.mu.Unlock()
	r.ended(end)
}

// checkOutput, at each poll: a reconnect may have lost records, so every
// job is repaired; ends whose output has not ended in time are acted on.
func (r *Run) checkOutput(now time.Time) {
	if n := r.cfg.Conn.Stats().Reconnects; n != r.reconnects {
		r.reconnects = n
		for _, j := range r.jobs {
			r.repair(j)
		}
	}
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
		r.flushHeld(rankKey{end.Nspace, end.Rank}, false)
		r.ended(end)
	}
}

// stopOutput shows what is still held, stops the repairs and writes the
// help counts left.
func (r *Run) stopOutput() {
	r.flushHeld(rankKey{}, true)
	for _, rs := range r.repairs {
		if rs.f != nil {
			rs.f.Stop()
		}
	}
	if r.cfg.Help != nil {
		if err := r.cfg.Help.Close(); err != nil {
			r.log.Warn("writing the help message counts", "err", err)
		}
	}
}
