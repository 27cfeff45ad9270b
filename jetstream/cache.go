package jetstream

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// The event cache replaces RFC0002's ring buffer with two streams in a
// cluster's own JetStream domain, capturing events as they are published:
//
//   - the events stream (Subjects) keeps every cacheable event up to a count
//     limit (512 by default), plus optional age and byte limits, discarding
//     the oldest first; what it discards is counted as evicted;
//   - the job-events stream (JobSubjects) keeps a copy of every job event,
//     on a subject of its own (JetStream lets no two streams of a domain
//     capture one subject, and a stream that sources another does not hold
//     its messages back), with interest retention. The events stream makes
//     the copy: it republishes each message it stores on a subject matching
//     CopyFrom to CopyTo, in the order it stores them, so publishers send
//     an event once and the copy never sits on the live delivery's path;
//     each agent holds a durable consumer per local job and acknowledges an
//     event once every local client of that job has received it, so a job's
//     events outlive the count limit until then. Deleting the consumer (the
//     job ended) ends its retention.
//
// Messages carry their event id in the Nats-Msg-Id header, which also lets
// JetStream drop a duplicate publish.

// MsgIDHeader carries an event's id.
const MsgIDHeader = nats.MsgIdHdr

// EventCacheConfig configures a cluster's event cache.
type EventCacheConfig struct {
	// Cluster names the streams; letters, digits, '-' and '_'.
	Cluster string
	// Subjects the events stream captures; JobSubjects the job-events
	// stream captures. The caller derives them from its subject layout;
	// they must not overlap.
	Subjects, JobSubjects []string
	// CopyFrom and CopyTo are the subject transform by which the events
	// stream republishes what it stores to the job-events stream: CopyFrom
	// selects the job events among Subjects, CopyTo (a NATS subject
	// mapping, wildcards in the same order) must fall under JobSubjects
	// and under none of Subjects.
	CopyFrom, CopyTo string
	// MaxMsgs is the events stream's count limit (RFC0002's 512).
	MaxMsgs int64
	// MaxAge and MaxBytes are optional limits of the events stream; zero
	// is none.
	MaxAge   time.Duration
	MaxBytes int64
	// JobMaxMsgs bounds the job-events stream whatever its consumers say,
	// so a job that never finishes cannot fill the disk; zero is 1 000 000.
	JobMaxMsgs int64
	// Memory keeps both streams in memory instead of files. Files survive a
	// server restart; memory does not.
	Memory bool
	// Replicas for a clustered JetStream; zero is 1.
	Replicas int
}

// DefaultEventCacheSize is RFC0002's default cache size.
const DefaultEventCacheSize = 512

var streamNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Validate reports every problem with c.
func (c EventCacheConfig) Validate() error {
	var errs []error
	if !streamNameRE.MatchString(c.Cluster) {
		errs = append(errs, fmt.Errorf("cluster %q: want 1-64 letters, digits, '-' or '_'", c.Cluster))
	}
	if len(c.Subjects) == 0 || len(c.JobSubjects) == 0 {
		errs = append(errs, errors.New("subjects: both streams need subjects"))
	}
	if c.CopyFrom == "" || c.CopyTo == "" {
		errs = append(errs, errors.New("copy: the job-events stream needs the transform that copies job events to it"))
	}
	if c.MaxMsgs <= 0 {
		errs = append(errs, fmt.Errorf("max msgs %d: must be positive", c.MaxMsgs))
	}
	if c.MaxAge < 0 || c.MaxBytes < 0 || c.JobMaxMsgs < 0 || c.Replicas < 0 {
		errs = append(errs, errors.New("limits must not be negative"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidCacheConfig, errors.Join(errs...))
	}
	return nil
}

// EventStreamName and JobStreamName name a cluster's streams.
func EventStreamName(cluster string) string { return "PMIXBUS_EVENTS_" + cluster }

// JobStreamName names a cluster's job-events stream.
func JobStreamName(cluster string) string { return "PMIXBUS_JOBEVENTS_" + cluster }

// EventCache is a handle on a cluster's event cache. Safe for concurrent use.
type EventCache struct {
	cfg    EventCacheConfig
	js     natsjs.JetStream
	events natsjs.Stream
	jobs   natsjs.Stream
}

// OpenEventCache creates the streams, or updates their limits to cfg's, in
// the JetStream domain nc's server belongs to. Every agent of a cluster
// opens the same streams; the last one to start sets the limits.
//
// Errors: ErrInvalidCacheConfig; ErrUnreachable when JetStream does not
// answer.
func OpenEventCache(ctx context.Context, nc *nats.Conn, cfg EventCacheConfig) (*EventCache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	js, err := natsjs.New(nc)
	if err != nil {
		return nil, kvError(err, "event cache")
	}
	storage := natsjs.FileStorage
	if cfg.Memory {
		storage = natsjs.MemoryStorage
	}
	replicas := max(cfg.Replicas, 1)
	jobMax := cfg.JobMaxMsgs
	if jobMax == 0 {
		jobMax = 1_000_000
	}
	jobs, err := js.CreateOrUpdateStream(ctx, natsjs.StreamConfig{
		Name:        JobStreamName(cfg.Cluster),
		Description: "pmixbus job events of cluster " + cfg.Cluster + ", kept until local clients received them",
		Subjects:    cfg.JobSubjects,
		Retention:   natsjs.InterestPolicy,
		Discard:     natsjs.DiscardOld,
		MaxMsgs:     jobMax,
		Storage:     storage,
		Replicas:    replicas,
		Duplicates:  time.Minute,
		AllowDirect: true, // reads never use a consumer (cacheread.go)
	})
	if err != nil {
		return nil, kvError(err, "job events stream")
	}
	// The other clusters' GLOBAL events it sources (SourceGlobal) are
	// kept: another agent added them. Read and updated as SourceGlobal
	// does, one update of the stream at a time in this process.
	defer updating(EventStreamName(cfg.Cluster))()
	var sources []*natsjs.StreamSource
	if s, err := js.Stream(ctx, EventStreamName(cfg.Cluster)); err == nil {
		sources = s.CachedInfo().Config.Sources
	}
	events, err := js.CreateOrUpdateStream(ctx, natsjs.StreamConfig{
		Sources:     sources,
		Name:        EventStreamName(cfg.Cluster),
		Description: "pmixbus event cache of cluster " + cfg.Cluster,
		Subjects:    cfg.Subjects,
		Retention:   natsjs.LimitsPolicy,
		Discard:     natsjs.DiscardOld,
		MaxMsgs:     cfg.MaxMsgs,
		MaxAge:      cfg.MaxAge,
		MaxBytes:    orNoLimit(cfg.MaxBytes),
		Storage:     storage,
		Replicas:    replicas,
		Duplicates:  DuplicateWindow(cfg.MaxAge),
		AllowDirect: true,
		RePublish:   &natsjs.RePublish{Source: cfg.CopyFrom, Destination: cfg.CopyTo},
	})
	if err != nil {
		return nil, kvError(err, "event cache stream")
	}
	return &EventCache{cfg: cfg, js: js, events: events, jobs: jobs}, nil
}

func orNoLimit(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

// CacheStats describes the cache.
type CacheStats struct {
	Msgs    uint64 // events in the events stream
	Bytes   uint64
	Evicted uint64 // events the events stream discarded for its limits, since it was created
	JobMsgs uint64 // job events retained for clients that have not received them
}

// Stats reads the streams' state.
//
// Errors: ErrUnreachable when JetStream does not answer; pmix.ErrTimeout
// when ctx was cancelled; pmix.ErrGeneral for another refusal.
func (c *EventCache) Stats(ctx context.Context) (CacheStats, error) {
	ei, err := c.events.Info(ctx)
	if err != nil {
		return CacheStats{}, kvError(err, "event cache info")
	}
	ji, err := c.jobs.Info(ctx)
	if err != nil {
		return CacheStats{}, kvError(err, "job events info")
	}
	s := CacheStats{Msgs: ei.State.Msgs, Bytes: ei.State.Bytes, JobMsgs: ji.State.Msgs}
	// Nothing deletes from the events stream but its limits, so everything
	// below the first sequence was evicted.
	if ei.State.Msgs == 0 {
		s.Evicted = ei.State.LastSeq
	} else if ei.State.FirstSeq > 0 {
		s.Evicted = ei.State.FirstSeq - 1
	}
	return s, nil
}

// CachedMsg is one event read back from the cache.
type CachedMsg struct {
	ID      string // the Nats-Msg-Id header
	Subject string
	Data    []byte
	Seq     uint64 // in the stream it was read from
	// EventSeq is the event's sequence in the events stream: Seq for a
	// message of the events stream, the sequence its copy carries for one
	// of the job-events stream.
	EventSeq uint64
}

// RetainedMsg is a job event a retainer was given: Ack releases it.
type RetainedMsg struct {
	CachedMsg
	Pending uint64 // messages the retainer has not given yet
	msg     natsjs.Msg
}

// Ack tells the stream this retainer no longer needs the message.
//
// Errors: ErrUnreachable when the connection is closed; pmix.ErrGeneral
// for another refusal (the message was acked already).
func (m *RetainedMsg) Ack() error { return kvError(m.msg.Ack(), "acking a job event") }

// AckSync is Ack, returning once the stream has it, and so every
// acknowledgement sent before it on the same connection.
func (m *RetainedMsg) AckSync(ctx context.Context) error { return m.msg.DoubleAck(ctx) }

// Retainer is a durable consumer on the job-events stream whose
// unacknowledged messages the stream keeps. Stop it to stop receiving (the
// retention stays); Delete it to end the retention.
type Retainer struct {
	c    *EventCache
	name string
	cc   natsjs.ConsumeContext
}

// Retain creates (or resumes) the durable consumer name on the job-events
// stream with the given filters and calls f for every message, from one
// goroutine, in stream order. f is not to keep the message: one it does not
// acknowledge is given again after ackWait, or at once after Redeliver, so
// the caller need not remember what it retains. A resumed consumer gives
// every message it holds again at once.
//
// Errors: as Stats.
func (c *EventCache) Retain(ctx context.Context, name string, filters []string, ackWait time.Duration, f func(*RetainedMsg)) (*Retainer, error) {
	cons, err := c.jobs.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
		Durable:        name,
		Description:    "pmixbus job event retention",
		FilterSubjects: filters,
		AckPolicy:      natsjs.AckExplicitPolicy,
		AckWait:        ackWait,
		MaxAckPending:  -1,
		DeliverPolicy:  natsjs.DeliverAllPolicy,
	})
	if err != nil {
		return nil, kvError(err, "job event consumer")
	}
	r := &Retainer{c: c, name: name}
	// Also sets the consumer's check floor on the server, which it
	// otherwise leaves at 0 until a check runs: a consumer deleted with
	// its floor at 0 while the stream is checked purges the stream
	// (docs/cache.md).
	_ = r.Redeliver(ctx)
	cc, err := cons.Consume(func(m natsjs.Msg) {
		meta, err := m.Metadata()
		if err != nil {
			return
		}
		// A copy carries its event's sequence in the events stream.
		evSeq, _ := strconv.ParseUint(m.Headers().Get(hdrSequence), 10, 64)
		f(&RetainedMsg{
			CachedMsg: CachedMsg{ID: m.Headers().Get(MsgIDHeader), Subject: m.Subject(), Data: m.Data(), Seq: meta.Sequence.Stream, EventSeq: evSeq},
			Pending:   meta.NumPending,
			msg:       m,
		})
	})
	if err != nil {
		return nil, kvError(err, "job event consumer")
	}
	r.cc = cc
	return r, nil
}

// Redeliver has every message the retainer has not acknowledged given
// again, oldest first, without waiting for the ack wait. It needs
// nats-server 2.14 or later; an older one answers with an error, and the
// messages come again after the ack wait only.
func (r *Retainer) Redeliver(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := r.c.jobs.ResetConsumer(rctx, r.name); err != nil {
		return kvError(err, "redelivering retained job events")
	}
	return nil
}

// Backlog counts the messages the retainer has not acknowledged yet, given
// or not.
func (r *Retainer) Backlog(ctx context.Context) (uint64, error) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	cons, err := r.c.jobs.Consumer(rctx, r.name)
	if err != nil {
		return 0, kvError(err, "job event consumer info")
	}
	info, err := cons.Info(rctx)
	if err != nil {
		return 0, kvError(err, "job event consumer info")
	}
	return uint64(info.NumAckPending) + info.NumPending, nil
}

// Stop stops delivering messages; the consumer and its retention remain.
func (r *Retainer) Stop() { r.cc.Stop() }

// Delete stops the retainer and deletes its consumer: the stream keeps
// nothing for it any more. A consumer deleted already is no error.
//
// Errors: as Stats.
func (r *Retainer) Delete(ctx context.Context) error {
	r.cc.Stop()
	if err := r.c.jobs.DeleteConsumer(ctx, r.name); err != nil && !errors.Is(err, natsjs.ErrConsumerNotFound) {
		return kvError(err, "deleting job event consumer")
	}
	return nil
}

// DuplicateWindow is the duplicate window of a stream whose messages
// live maxAge (0: no limit): a minute, or maxAge if shorter (JetStream
// refuses a window longer than the stream's max age).
func DuplicateWindow(maxAge time.Duration) time.Duration {
	if maxAge > 0 && maxAge < time.Minute {
		return maxAge
	}
	return time.Minute
}
