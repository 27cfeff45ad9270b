package iof

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/pmix"
)

// Follower reads a job's records from its cluster's stream, in the order
// they were stored, from the first: an ordered consumer, which the NATS
// client re-creates at the next sequence after a reconnect or a gap, so a
// reader sees every record once. Stop ends it.
type Follower struct {
	sub  *nats.Subscription
	once sync.Once
}

// Delivered is one record as a Follower hands it over: the record, its
// sequence in the stream, and how many of the job's records the stream
// held after it when it was sent (0: the reader has caught up).
type Delivered struct {
	Parsed
	StreamSeq uint64
	Pending   uint64
}

// FollowOptions say where a Follower starts and what it checks.
type FollowOptions struct {
	// StartSeq, if set, starts at this stream sequence instead of the
	// job's first record.
	StartSeq uint64
	// MustExist makes Follow fail with ErrNoJob when the stream holds
	// nothing of the job.
	MustExist bool
	// Bad, if set, is told of messages that do not parse; they are
	// skipped.
	Bad func(error)
}

// Follow calls handle with every record of nspace on cluster, in stream
// order, from one goroutine; a handle that blocks holds the consumer back
// (the server waits on flow control), never the stream.
//
// Errors: ErrNoJob when the stream holds nothing of the job (with
// MustExist); pmix.ErrUnreach when the cluster's stream does not answer.
func Follow(ctx context.Context, nc *nats.Conn, cluster, nspace string, opts FollowOptions, handle func(Delivered)) (*Follower, error) {
	js, err := nc.JetStream(nats.Domain(cluster), nats.Context(ctx))
	if err != nil {
		return nil, pmix.Errorf(pmix.ErrUnreach, "iof: JetStream of cluster %s: %v", cluster, err)
	}
	if opts.MustExist {
		n, err := JobRecords(ctx, nc, cluster, nspace)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: %s:%s has no output in stream %s of cluster %s (it never ran there, or its output aged out)", ErrNoJob, cluster, nspace, StreamName, cluster)
		}
	}
	start := nats.DeliverAll()
	if opts.StartSeq > 0 {
		start = nats.StartSequence(opts.StartSeq)
	}
	sub, err := js.Subscribe(JobFilter(cluster, nspace), func(m *nats.Msg) {
		p, err := ParseMessage(m.Subject, m.Header, m.Data)
		if err != nil {
			if opts.Bad != nil {
				opts.Bad(err)
			}
			return
		}
		d := Delivered{Parsed: p}
		if md, err := m.Metadata(); err == nil {
			d.StreamSeq, d.Pending = md.Sequence.Stream, md.NumPending
		}
		handle(d)
	}, nats.OrderedConsumer(), start, nats.BindStream(StreamName))
	if err != nil {
		return nil, pmix.Errorf(pmix.ErrUnreach, "iof: following the output of %s on cluster %s: %v", nspace, cluster, err)
	}
	return &Follower{sub: sub}, nil
}

// Stop ends the Follower; handle is not called once Stop returns, except
// for a call in progress. Safe to call twice.
func (f *Follower) Stop() {
	f.once.Do(func() { _ = f.sub.Unsubscribe() })
}

// JobRecords counts the records the stream holds of nspace.
//
// Errors: pmix.ErrUnreach when the stream does not answer.
func JobRecords(ctx context.Context, nc *nats.Conn, cluster, nspace string) (uint64, error) {
	js, err := nc.JetStream(nats.Domain(cluster), nats.Context(ctx))
	if err != nil {
		return 0, pmix.Errorf(pmix.ErrUnreach, "iof: JetStream of cluster %s: %v", cluster, err)
	}
	info, err := js.StreamInfo(StreamName, &nats.StreamInfoRequest{SubjectsFilter: JobFilter(cluster, nspace)}, nats.Context(ctx))
	if errors.Is(err, nats.ErrStreamNotFound) {
		return 0, pmix.Errorf(pmix.ErrUnreach, "iof: cluster %s has no output stream (no agent of this version has run there)", cluster)
	}
	if err != nil {
		return 0, pmix.Errorf(pmix.ErrUnreach, "iof: the output stream of cluster %s: %v", cluster, err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, nil
}
