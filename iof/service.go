package iof

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
)

// Defaults of a Service's Config.
const (
	// DefaultMaxAge is how long a job's output stays viewable
	// (pmixbus attach) after it was written.
	DefaultMaxAge = 24 * time.Hour
	// DefaultStreamBytes bounds the whole stream of a cluster; beyond it
	// the oldest output of any job goes first.
	DefaultStreamBytes = 1 << 30
	// DefaultIdle is how long a partial line waits for its end before it
	// is sent as it is (a prompt without a newline still shows).
	DefaultIdle = 100 * time.Millisecond
	// DefaultLimit is the bytes of one channel of one job the stream keeps
	// (Flux's multi-user default); MaxLimit is the most it may be set to.
	DefaultLimit = 10 << 20
	MaxLimit     = 1 << 30
	// highWater is what one channel holds while its records are being
	// stored; a process that writes faster waits in write(2).
	highWater = 64 << 10
)

// ServiceConfig configures a Service, the capturing half of I/O forwarding that
// an agent composes.
type ServiceConfig struct {
	// Conn is the agent's NATS connection, owned by the caller. Required.
	Conn *nats.Conn
	// Cluster is the agent's cluster, the JetStream domain of Conn's
	// server. Required.
	Cluster string
	// Memory stores the output in memory instead of files (tests); a
	// NATS restart then loses it.
	Memory bool
	// Replicas of the stream and the limits bucket when this service
	// creates or updates them: 1 to 5, 0 is 1.
	Replicas int
	// MaxAge and StreamBytes bound the cluster's stream; Idle is the
	// partial-line flush time. Zero means the defaults.
	MaxAge      time.Duration
	StreamBytes int64
	Idle        time.Duration
	Logger      *slog.Logger
}

// Validate reports a config that cannot work, with pmix.ErrBadParam.
func (c ServiceConfig) Validate() error {
	switch {
	case c.Conn == nil:
		return pmix.Errorf(pmix.ErrBadParam, "iof: no NATS connection")
	case c.Cluster == "":
		return pmix.Errorf(pmix.ErrBadParam, "iof: no cluster")
	case c.MaxAge < 0 || c.StreamBytes < 0 || c.Idle < 0:
		return pmix.Errorf(pmix.ErrBadParam, "iof: negative max age %v, stream bytes %d or idle time %v", c.MaxAge, c.StreamBytes, c.Idle)
	case c.Replicas < 0 || c.Replicas > 5:
		return pmix.Errorf(pmix.ErrBadParam, "iof: %d replicas: want 1 to 5 (0 is 1)", c.Replicas)
	}
	return nil
}

// Service captures the output of an agent's processes into its cluster's
// stream: one Source per process, records of whole lines, a sequence per
// channel, an explicit end, and the per-job byte limits. Nothing is created
// or deleted per process or per job on NATS: one stream and one limits
// bucket per cluster, made when the first agent opens.
//
// A Service is safe for concurrent use. Close stops its writers; a Source's
// Close waits for its records to be stored.
type Service struct {
	cfg     ServiceConfig
	log     *slog.Logger
	js      natsjs.JetStream
	async   natsjs.JetStream // for pipelined records: bounded, with a timeout
	stream  natsjs.Stream
	limits  natsjs.KeyValue
	lastSeq atomic.Uint64 // the stream sequence of the latest record stored, for DROP_OLDEST

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	taps tapSet // local viewers of a job's records (tap.go)

	mu      sync.Mutex
	budgets map[budgetKey]*budget
	closed  bool
}

// Open creates (or updates) the cluster's output stream and limits bucket
// and returns the Service.
//
// Errors: pmix.ErrBadParam for a bad config; pmix.ErrUnreach when
// JetStream does not answer or refuses the stream.
func Open(ctx context.Context, cfg ServiceConfig) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.StreamBytes == 0 {
		cfg.StreamBytes = DefaultStreamBytes
	}
	if cfg.Idle == 0 {
		cfg.Idle = DefaultIdle
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	js, err := natsjs.New(cfg.Conn)
	if err != nil {
		return nil, pmix.Errorf(pmix.ErrUnreach, "iof: JetStream: %v", err)
	}
	storage := natsjs.FileStorage
	if cfg.Memory {
		storage = natsjs.MemoryStorage
	}
	stream, err := js.CreateOrUpdateStream(ctx, natsjs.StreamConfig{
		Name:        StreamName,
		Description: "pmixbus: the output of the cluster's jobs (iof)",
		Subjects:    StreamSubjects(cfg.Cluster),
		Storage:     storage,
		MaxAge:      cfg.MaxAge,
		MaxBytes:    cfg.StreamBytes,
		Discard:     natsjs.DiscardOld,
		Duplicates:  jetstream.DuplicateWindow(cfg.MaxAge),
		AllowDirect: true,
		Replicas:    max(cfg.Replicas, 1),
	})
	if err != nil {
		return nil, pmix.Errorf(pmix.ErrUnreach, "iof: the output stream %s: %v", StreamName, err)
	}
	limits, err := js.CreateOrUpdateKeyValue(ctx, natsjs.KeyValueConfig{
		Bucket:      LimitsBucket,
		Description: "pmixbus: the bytes each job's channels have used of their limit (iof)",
		History:     1,
		TTL:         cfg.MaxAge,
		Storage:     storage,
		Replicas:    max(cfg.Replicas, 1),
	})
	if err != nil {
		return nil, pmix.Errorf(pmix.ErrUnreach, "iof: the limits bucket %s: %v", LimitsBucket, err)
	}
	async, err := natsjs.New(cfg.Conn, natsjs.WithPublishAsyncMaxPending(4096), natsjs.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		return nil, pmix.Errorf(pmix.ErrUnreach, "iof: JetStream: %v", err)
	}
	s := &Service{cfg: cfg, log: cfg.Logger, js: js, async: async, stream: stream, limits: limits, budgets: map[budgetKey]*budget{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Close stops the writers of every Source (what they hold unsent is
// lost) and waits for them. Safe to call twice.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// SourceOptions are a process's output settings, from its job.
type SourceOptions struct {
	// Incarnation tells this run of the job from an earlier one with the
	// same nspace (the launcher and start time): it keys the records'
	// message ids.
	Incarnation string
	// Raw sends bytes as they come, not cut into lines
	// (PMIX_IOF_OUTPUT_RAW).
	Raw bool
	// Limit bounds the bytes kept per channel of the whole job.
	Limit Limit
	// DiagOnly captures only what the process logs, for a client whose
	// pipes another launcher holds (one a host RM registered): Stdout and
	// Stderr discard, and Close ends only the diag channel, so nothing
	// claims that the process's stdout and stderr ended here.
	DiagOnly bool
}

// Source is one process's output: Stdout and Stderr take what the process
// writes (its pipes), Diag what it logs. Close ends every channel with a
// Complete record once what was written is stored.
type Source struct {
	svc  *Service
	opts SourceOptions
	proc pmix.Proc

	out, err *channel

	mu   sync.Mutex
	diag *channel
}

// Source starts capturing proc's output.
//
// Errors: pmix.ErrBadParam for a limit above MaxLimit; ErrClosed after
// Close.
func (s *Service) Source(proc pmix.Proc, opts SourceOptions) (*Source, error) {
	if err := opts.Limit.validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	src := &Source{svc: s, opts: opts, proc: proc}
	if !opts.DiagOnly {
		src.out = s.newChannel(src, STDOUT)
		src.err = s.newChannel(src, STDERR)
	}
	return src, nil
}

// Stdout is where the process's standard output goes. Write blocks while
// the channel holds 64 KiB not yet stored: back-pressure to the pipe.
func (src *Source) Stdout() io.Writer {
	if src.out == nil {
		return io.Discard
	}
	return src.out
}

// Stderr is where the process's standard error goes.
func (src *Source) Stderr() io.Writer {
	if src.err == nil {
		return io.Discard
	}
	return src.err
}

// DiagStored queues a diagnostic of the process — a help message when
// help is set (the launcher aggregates duplicates), else a log line — and
// returns a function that waits until it is stored: what the process does
// after that (its exit, the end of its stdout and stderr) comes after the
// record in the stream, so a viewer that stops at the process's end has
// seen it. Records of one Source are stored in the order they were
// queued; a caller that need not wait drops the function.
//
// Errors: ErrClosed once the Source is closed. The wait returns ErrClosed
// when the Service closed before the record was stored (it may be lost),
// and pmix.ErrTimeout when its ctx ends first (the record is stored later
// all the same).
func (src *Source) DiagStored(help *Help, text []byte) (wait func(context.Context) error, err error) {
	d, err := src.diagChannel()
	if err != nil {
		return nil, err
	}
	stored := make(chan error, 1)
	if err := d.record(help, text, stored); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		select {
		case err := <-stored:
			return err
		case <-d.done:
			select {
			case err := <-stored:
				return err
			default:
			}
			return fmt.Errorf("%w: the diagnostic of %v was not stored", ErrClosed, src.proc)
		case <-ctx.Done():
			return pmix.Errorf(pmix.ErrTimeout, "iof: storing the diagnostic of %v: %v", src.proc, ctx.Err())
		}
	}, nil
}

// diagChannel is the Source's diag channel, made on first use.
func (src *Source) diagChannel() (*channel, error) {
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.diag == nil {
		src.svc.mu.Lock()
		defer src.svc.mu.Unlock()
		if src.svc.closed {
			return nil, ErrClosed
		}
		src.diag = src.svc.newChannel(src, STDDIAG)
	}
	return src.diag, nil
}

// Close flushes what the process wrote, partial last lines included, ends
// each channel with a Complete record, and returns once they are stored
// (or the Service closed).
func (src *Source) Close() error {
	src.mu.Lock()
	d := src.diag
	src.mu.Unlock()
	var chans []*channel
	if src.out != nil {
		chans = append(chans, src.out, src.err)
	}
	if d != nil {
		chans = append(chans, d)
	}
	for _, c := range chans {
		c.close()
	}
	var errs []error
	for _, c := range chans {
		if err := c.wait(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range chans {
		c.release()
	}
	return errors.Join(errs...)
}

// publish stores one record, retrying through a NATS outage until it is
// stored or the Service closes: a record is never given up while the
// agent lives. The message id makes a retry after a lost ack harmless.
func (s *Service) publish(m *nats.Msg, what string) error {
	warned := time.Time{}
	start := time.Now()
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
		ack, err := s.js.PublishMsg(ctx, m)
		cancel()
		if err == nil {
			s.lastSeq.Store(ack.Sequence)
			return nil
		}
		if s.ctx.Err() != nil || s.cfg.Conn.IsClosed() {
			return fmt.Errorf("%w: %s not stored: %v", ErrClosed, what, err)
		}
		if time.Since(warned) > 10*time.Second {
			s.log.Warn("storing a process's output, retrying", "what", what, "for", time.Since(start).Round(time.Millisecond), "err", err)
			warned = time.Now()
		}
		select {
		case <-s.ctx.Done():
			return fmt.Errorf("%w: %s not stored", ErrClosed, what)
		case <-time.After(backoff):
		}
	}
}

// JobMetaRecord is the body of a job's JobMeta record, JSON.
type JobMetaRecord struct {
	// Size is the number of ranks whose output the cluster's stream
	// carries (all of the job's but for a job across clusters): a viewer
	// following the job is done once each has ended its stdout and
	// stderr.
	Size int `json:"size"`
}

// JobRecord stores a record of the job itself (JobMeta, JobDiag).
//
// Errors: pmix.ErrUnreach when it is not stored.
func (s *Service) JobRecord(ctx context.Context, nspace, kind string, data []byte) error {
	m := nats.NewMsg(JobSubject(s.cfg.Cluster, nspace, kind))
	m.Data = data
	m.Header.Set(HeaderTime, strconv.FormatInt(time.Now().UnixNano(), 10))
	if _, err := s.js.PublishMsg(ctx, m); err != nil {
		return pmix.Errorf(pmix.ErrUnreach, "iof: storing the %s record of job %s: %v", kind, nspace, err)
	}
	return nil
}
