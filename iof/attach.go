package iof

import (
	"bytes"
	"context"
	"encoding/json"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/pmix"
)

// AttachOptions say what Attach shows of a job's output.
type AttachOptions struct {
	// Tail, if positive, starts with the last Tail lines the stream holds
	// (over all ranks and channels, in stream order) instead of all.
	Tail int
	// Follow goes on showing output as it comes until every rank's
	// stdout and stderr have ended; otherwise Attach returns once it has
	// shown what the stream held when it attached.
	Follow bool
	// Bad, if set, is told of messages that do not parse (skipped).
	Bad func(error)
}

// Attach shows the output of a running or finished job from its
// cluster's stream (pmixbus attach): show is called with each record in
// stream order, from one goroutine; job-level records (the job's size,
// a truncation warning) come too, with Parsed.Job set. A viewer that
// attaches again sees every record again, from the start, exactly once.
//
// Errors: ErrNoJob when the stream holds nothing of the job; pmix.ErrUnreach
// when the stream does not answer; ctx.Err() when ctx ends first.
func Attach(ctx context.Context, nc *nats.Conn, cluster, nspace string, opts AttachOptions, show func(Parsed)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v := &viewer{opts: opts, show: show, done: cancel, size: -1, ended: map[pmix.Rank]int{}}
	f, err := Follow(ctx, nc, cluster, nspace, FollowOptions{MustExist: true, Bad: opts.Bad}, v.deliver)
	if err != nil {
		return err
	}
	defer f.Stop()
	<-ctx.Done()
	if v.finished() {
		return nil
	}
	return context.Cause(ctx)
}

// viewer is Attach's state; deliver runs on the Follower's goroutine
// only, finished after it stopped.
type viewer struct {
	opts AttachOptions
	show func(Parsed)
	done context.CancelFunc

	caughtUp bool
	tail     []Parsed // records held until caught up, when Tail is set
	size     int      // the job's ranks, from its meta record; -1 unknown
	ended    map[pmix.Rank]int
	over     atomic.Bool // the viewer has shown what it was asked to
}

func (v *viewer) deliver(d Delivered) {
	if v.over.Load() {
		return
	}
	p := d.Parsed
	if p.Job == JobMeta {
		var m JobMetaRecord
		if err := json.Unmarshal(p.Data, &m); err == nil && m.Size > 0 {
			v.size = m.Size
		}
	}
	if p.Job == "" && p.Complete && p.Channel != STDDIAG {
		v.ended[p.Rank]++
	}
	if !v.caughtUp && v.opts.Tail > 0 {
		v.tail = append(v.tail, p)
	} else {
		v.show(p)
	}
	if !v.caughtUp && d.Pending == 0 {
		v.caughtUp = true
		for _, t := range lastLines(v.tail, v.opts.Tail) {
			v.show(t)
		}
		v.tail = nil
	}
	if v.caughtUp && (!v.opts.Follow || v.allEnded()) {
		v.over.Store(true)
		v.done()
	}
}

func (v *viewer) allEnded() bool {
	if v.size < 0 || len(v.ended) < v.size {
		return false
	}
	for _, n := range v.ended {
		if n < 2 {
			return false
		}
	}
	return true
}

func (v *viewer) finished() bool { return v.over.Load() }

// lastLines keeps the records that hold the last n lines, the first of
// them cut to its last lines; records without data (ends, job records)
// are kept where they are among them.
func lastLines(recs []Parsed, n int) []Parsed {
	if n <= 0 {
		return recs
	}
	lines := 0
	for i := len(recs) - 1; i >= 0; i-- {
		data := recs[i].Data
		if recs[i].Job != "" || len(data) == 0 {
			continue
		}
		k := bytes.Count(data, []byte{'\n'})
		if data[len(data)-1] != '\n' {
			k++ // a partial line counts as one
		}
		if lines+k >= n {
			keep := n - lines
			first := recs[i]
			first.Data = lastNLines(data, keep)
			return append([]Parsed{first}, recs[i+1:]...)
		}
		lines += k
	}
	return recs
}

// lastNLines is the end of data that holds its last n lines.
func lastNLines(data []byte, n int) []byte {
	end := len(data)
	if data[end-1] == '\n' {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if data[i] == '\n' {
			if n--; n == 0 {
				return data[i+1:]
			}
		}
	}
	return data
}
