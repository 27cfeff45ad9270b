package liveness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/pmixbus/pmixbus/cluster"
)

// Service keeps an agent's key in its cluster's bucket, watches the keys
// of the other agents, and raises the events of a node whose key expired
// (nodedown.go). Create it with New, then Start it; Shutdown is the clean
// stop. Safe for concurrent use.
type Service struct {
	cfg      Config
	log      *slog.Logger
	key      string
	instance string
	started  time.Time

	js natsjs.JetStream

	// writeMu serializes the writes of the key. kv (set by Start) and rev,
	// the key's revision as last written (0 until claimed), are read and
	// set under it.
	writeMu sync.Mutex
	kv      natsjs.KeyValue
	rev     uint64
	failing bool // refreshes are failing; logged once per streak

	mu        sync.Mutex
	view      map[string]*peer // by key: the agents the watcher knows
	downFuncs []func(NodeDown)
	watcher   natsjs.KeyWatcher
	disc      *nats.Subscription
	state     int // notStarted, running, closed

	// Reconnects of the connection, as last seen by the beat loop, and
	// when a change was seen: an expiry seen soon after a reconnect may be
	// the outage's, not the node's (recentOutage).
	reconnects    atomic.Uint64
	reconnectedAt atomic.Int64
	outage        atomic.Bool // a test's pretended outage (export_test.go)

	stats struct{ beats, beatFailures, declared, rejoined, remoteReads atomic.Uint64 }

	rem remotes // the other clusters connected to this one's processes (remote.go)

	kick  chan struct{} // asks the beat loop to write now
	ready chan struct{} // closed once the watcher has the initial values
	done  chan struct{}
	ctx   context.Context // ends at Shutdown
	stop  context.CancelFunc
	once  sync.Once
	wg    sync.WaitGroup
}

const (
	notStarted = iota
	running
	closed
)

// peer is another agent (or this one) as the watcher last saw it.
type peer struct {
	rec      *Record // nil: a value that did not parse
	revision uint64
	beat     time.Time
}

// New validates cfg and returns a service that is not yet running.
//
// Errors: an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Replicas = max(cfg.Replicas, 1)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	js, err := jsFor(cfg.Conn, cfg.Cluster)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Service{
		cfg: cfg, log: log.With("component", "liveness"), key: key(cfg.Node), instance: nuid.Next(),
		started: time.Now(), js: js, view: map[string]*peer{}, rem: remotes{views: map[cluster.ID]*remoteView{}},
		kick: make(chan struct{}, 1), ready: make(chan struct{}), done: make(chan struct{}),
		ctx: ctx, stop: stop,
	}, nil
}

// Start creates the bucket if needed, claims the node's key, and starts
// refreshing it and watching the other agents' keys. It returns once the
// watcher knows every agent alive, so Agents is complete from then on.
//
// A key that another run of this node left (an agent that crashed) is
// waited for until it expires, at most its TTL and a second.
//
// Errors: ErrNodeTaken when another agent of the node keeps its key
// alive; ErrUnreachable when the cluster's JetStream does not answer;
// ErrClosed after Shutdown or a second Start; ctx.Err().
func (s *Service) Start(ctx context.Context) (err error) {
	s.mu.Lock()
	if s.state != notStarted {
		s.mu.Unlock()
		return fmt.Errorf("%w: Start called twice or after Shutdown", ErrClosed)
	}
	s.state = running
	s.mu.Unlock()
	s.reconnects.Store(s.cfg.Conn.Stats().Reconnects)
	kv, err := openBucket(ctx, s.js, s.cfg)
	if err != nil {
		return err
	}
	if err := s.claim(ctx, kv); err != nil {
		return err
	}
	w, err := kv.WatchAll(s.ctx)
	if err != nil {
		return fmt.Errorf("%w: watching %s: %w", ErrUnreachable, Bucket, err)
	}
	disc, err := s.cfg.Conn.QueueSubscribe(DiscoverySubject, string(s.cfg.Cluster), s.answerDiscovery)
	if err != nil {
		_ = w.Stop()
		return fmt.Errorf("%w: subscribing to %s: %w", ErrUnreachable, DiscoverySubject, err)
	}
	s.mu.Lock()
	s.watcher, s.disc = w, disc
	s.mu.Unlock()
	s.goFunc(func() { s.watch(w) })
	s.goFunc(s.beatLoop)
	if ch, ok := s.cfg.Host.(ConnectionHost); ok {
		s.goFunc(func() { s.watchRemotes(ch) })
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.log.Info("liveness key claimed", "bucket", Bucket, "key", s.key, "interval", s.cfg.Interval, "ttl", s.cfg.TTL)
	return nil
}

// goFunc runs f on a goroutine Shutdown waits for.
func (s *Service) goFunc(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// record is the key's value now.
func (s *Service) record() *Record {
	jobs := s.cfg.Host.HostedJobs()
	used := 0
	for _, j := range jobs {
		used += len(j.Ranks)
	}
	return &Record{
		Cluster: s.cfg.Cluster, Node: s.cfg.Node, Instance: s.instance,
		Slots: s.cfg.Slots, Used: used, Version: s.cfg.Version, Listen: s.cfg.Listen, Started: s.started,
		IntervalMS: s.cfg.Interval.Milliseconds(), TTLMS: s.cfg.TTL.Milliseconds(),
		Jobs: jobs,
	}
}

// claim creates the node's key in kv, waiting out the key of an earlier
// run.
func (s *Service) claim(ctx context.Context, kv natsjs.KeyValue) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.kv = kv
	var deadline time.Time
	for {
		err := s.createLocked(ctx)
		if !errors.Is(err, natsjs.ErrKeyExists) {
			return err
		}
		e, gerr := s.kv.Get(ctx, s.key)
		if errors.Is(gerr, natsjs.ErrKeyDeleted) || errors.Is(gerr, natsjs.ErrKeyNotFound) {
			continue // gone meanwhile: create again
		}
		if gerr != nil {
			return fmt.Errorf("%w: reading key %s: %w", ErrUnreachable, s.key, gerr)
		}
		other, _ := parseRecord(e.Value())
		if deadline.IsZero() {
			wait := s.cfg.TTL
			if other != nil && other.TTL() > 0 {
				wait = other.TTL()
			}
			deadline = time.Now().Add(wait + time.Second)
			s.log.Info("the node's key is held; waiting for it to expire (an agent of this node that did not stop cleanly, or another one alive)", "key", s.key, "wait", wait)
		}
		if time.Now().After(deadline) {
			if other != nil {
				return fmt.Errorf("%w: node %s of cluster %s: the agent started %s (version %s, listening on %s) still refreshes its key",
					ErrNodeTaken, other.Node, s.cfg.Cluster, other.Started.Format(time.RFC3339), other.Version, other.Listen)
			}
			return fmt.Errorf("%w: node %s of cluster %s: its key is still refreshed", ErrNodeTaken, s.cfg.Node, s.cfg.Cluster)
		}
		select {
		case <-time.After(s.cfg.Interval):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// createLocked creates the key with its TTL. Called with writeMu held.
func (s *Service) createLocked(ctx context.Context) error {
	b, err := s.record().marshal()
	if err != nil {
		return err
	}
	rev, err := s.kv.Create(ctx, s.key, b, natsjs.KeyTTL(s.cfg.TTL))
	if err != nil {
		if errors.Is(err, natsjs.ErrKeyExists) {
			return natsjs.ErrKeyExists
		}
		return fmt.Errorf("%w: creating key %s: %w", ErrUnreachable, s.key, err)
	}
	s.rev = rev
	return nil
}

// Refresh writes the key now, with the jobs the host hosts now: the agent
// calls it when they change, so that the key lists a job before its
// processes run. The beat loop retries what fails.
//
// Errors: ErrClosed when not running; ErrUnreachable; ctx.Err().
func (s *Service) Refresh(ctx context.Context) error {
	if !s.running() {
		return ErrClosed
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.stopped() {
		return ErrClosed
	}
	if s.rev == 0 {
		return nil // Start has yet to claim the key, which it writes as it is then
	}
	return s.refreshLocked(ctx)
}

// stopped reports whether Shutdown has begun: after it, nothing writes
// the key, which Shutdown deletes.
func (s *Service) stopped() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *Service) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == running
}

// refreshLocked writes the key if its revision is still the one this
// agent wrote, and resets its TTL. A key found at another revision was
// declared down meanwhile, or rewritten by this agent in a write whose
// answer was lost: reconcile sorts it out. Called with writeMu held.
func (s *Service) refreshLocked(ctx context.Context) error {
	b, err := s.record().marshal()
	if err != nil {
		return err
	}
	ack, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: putSubject(s.cfg.Cluster, s.key), Data: b},
		natsjs.WithMsgTTL(s.cfg.TTL), natsjs.WithExpectLastSequencePerSubject(s.rev))
	if err == nil {
		s.rev = ack.Sequence
		return nil
	}
	var apiErr *natsjs.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == natsjs.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == natsjs.JSErrCodeStreamWrongLastSequenceConstant) {
		return s.reconcileLocked(ctx)
	}
	return fmt.Errorf("%w: refreshing key %s: %w", ErrUnreachable, s.key, err)
}

// reconcileLocked handles a key found at a revision this agent did not
// expect. Called with writeMu held.
func (s *Service) reconcileLocked(ctx context.Context) error {
	e, err := s.kv.Get(ctx, s.key)
	switch {
	case errors.Is(err, natsjs.ErrKeyDeleted) || errors.Is(err, natsjs.ErrKeyNotFound):
		// Expired (or removed by an operator): the cluster has declared
		// this node down, and its procs terminated. Join again.
		s.stats.rejoined.Add(1)
		if s.recentOutage() {
			// Every key expires in a server restart: the others,
			// disconnected too, declared nothing (they wait a TTL after
			// their own outage). Only agents that stayed connected did.
			s.log.Warn("this agent's liveness key expired while its NATS connection was down (a server restart, or this node cut off); joining again. "+
				"Agents that stayed connected meanwhile declared this node down; after a restart of the server they shared, none did", "key", s.key, "ttl", s.cfg.TTL)
			return s.createLocked(ctx)
		}
		s.log.Error("this agent's liveness key expired: the cluster declared this node down and its processes terminated "+
			"(PMIX_EVENT_NODE_DOWN, PMIX_ERR_PROC_TERM_WO_SYNC); joining again. Its refreshes were late by more than "+
			"TTL − interval: a paused process, an overloaded host or a slow link (see docs/liveness.md)", "key", s.key, "ttl", s.cfg.TTL)
		return s.createLocked(ctx)
	case err != nil:
		return fmt.Errorf("%w: reading key %s: %w", ErrUnreachable, s.key, err)
	}
	if rec, _ := parseRecord(e.Value()); rec != nil && rec.Instance == s.instance {
		s.rev = e.Revision() // a write of ours whose answer was lost
		return s.refreshLocked(ctx)
	}
	return fmt.Errorf("%w: node %s of cluster %s: another agent wrote its key (revision %d)", ErrNodeTaken, s.cfg.Node, s.cfg.Cluster, e.Revision())
}

// beatLoop refreshes the key every Interval, and when kicked.
func (s *Service) beatLoop() {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		case <-s.kick:
		}
		s.noteReconnects()
		s.beat()
	}
}

// beat refreshes the key once, within the TTL.
func (s *Service) beat() {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.TTL)
	defer cancel()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.stopped() {
		return
	}
	err := s.refreshLocked(ctx)
	if err == nil {
		s.stats.beats.Add(1)
		if s.failing {
			s.failing = false
			s.log.Info("liveness key refreshed again", "key", s.key)
		}
		return
	}
	s.stats.beatFailures.Add(1)
	if s.ctx.Err() != nil {
		return
	}
	if !s.failing || errors.Is(err, ErrNodeTaken) {
		s.log.Warn("refreshing the liveness key failed; the cluster declares this node down if it goes on for the TTL", "key", s.key, "ttl", s.cfg.TTL, "err", err)
	}
	s.failing = true
}

// noteReconnects records when the connection was seen to reconnect.
func (s *Service) noteReconnects() {
	if n := s.cfg.Conn.Stats().Reconnects; n != s.reconnects.Load() {
		s.reconnects.Store(n)
		s.reconnectedAt.Store(time.Now().UnixNano())
	}
}

// recentOutage reports whether this agent's own connection was down in
// the last TTL and interval: a key that expired then may have expired
// because of the outage (a restarted server expires every key at once),
// not because its agent died.
func (s *Service) recentOutage() bool {
	if s.outage.Load() {
		return true
	}
	s.noteReconnects()
	if s.cfg.Conn.Status() != nats.CONNECTED {
		return true
	}
	at := s.reconnectedAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < s.cfg.TTL+s.cfg.Interval
}

// Stats are counts of what the service did.
type Stats struct {
	// Beats and BeatFailures count the refreshes of the key.
	Beats, BeatFailures uint64
	// Declared counts the nodes this agent declared down; Rejoined the
	// times it found its own key expired and created it again.
	Declared, Rejoined uint64
	// RemoteReads counts the reads of other clusters' agents that
	// answered: those whose processes are connected to this cluster's
	// (the nodes a lost cluster's NODE_DOWN names come from the last one).
	RemoteReads uint64
}

// Stats returns the service's counts.
func (s *Service) Stats() Stats {
	return Stats{
		Beats: s.stats.beats.Load(), BeatFailures: s.stats.beatFailures.Load(),
		Declared: s.stats.declared.Load(), Rejoined: s.stats.rejoined.Load(),
		RemoteReads: s.stats.remoteReads.Load(),
	}
}

// Shutdown is the clean stop: it stops refreshing, deletes the key (so no
// agent raises NODE_DOWN for this node), and stops watching. Safe to call
// more than once; a service never started has nothing to do.
//
// Errors: ctx.Err() if ctx ends before the goroutines did, or before the
// key was deleted (it then expires, and the node is declared down); the
// error of deleting the key.
func (s *Service) Shutdown(ctx context.Context) error {
	var err error
	s.once.Do(func() { err = s.shutdown(ctx) })
	return err
}

func (s *Service) shutdown(ctx context.Context) error {
	s.mu.Lock()
	wasRunning := s.state == running
	s.state = closed
	w, disc := s.watcher, s.disc
	s.mu.Unlock()
	close(s.done)
	s.stop()
	if disc != nil {
		_ = disc.Unsubscribe()
	}
	var errs []error
	if wasRunning {
		if err := s.deleteKey(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if w != nil {
		_ = w.Stop() // ends the watch loop
	}
	waited := make(chan struct{})
	go func() { s.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

// deleteKey deletes the key if it is still this agent's, once the beat
// loop has stopped writing it.
func (s *Service) deleteKey(ctx context.Context) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.kv == nil || s.rev == 0 {
		return nil // never claimed
	}
	err := s.kv.Delete(ctx, s.key, natsjs.LastRevision(s.rev))
	if errors.Is(err, natsjs.ErrKeyRevisionMismatch) {
		// A refresh of ours whose answer was lost (a timeout under load)
		// moved the revision: the key is still this agent's if its record
		// says so, and must go, or it expires and the node is declared
		// down after a clean stop. Another agent's is left alone.
		err = nil
		if e, gerr := s.kv.Get(ctx, s.key); gerr == nil {
			if rec, _ := parseRecord(e.Value()); rec != nil && rec.Instance == s.instance {
				err = s.kv.Delete(ctx, s.key, natsjs.LastRevision(e.Revision()))
			}
		}
	}
	if err != nil && !errors.Is(err, natsjs.ErrKeyRevisionMismatch) {
		return fmt.Errorf("deleting liveness key %s (it expires in %v, and the node is declared down): %w", s.key, s.cfg.TTL, err)
	}
	return nil
}
