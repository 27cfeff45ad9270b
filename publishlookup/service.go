package publishlookup

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
)

// Service serves PMIx_Publish, PMIx_Lookup and PMIx_Unpublish for the
// processes of one agent, on the KV buckets of its Config. It remembers
// what those processes published, to remove it when their persistence
// ends (ProcEnded, JobEnded, SessionsEnded). Safe for concurrent use.
type Service struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	owned  map[pmix.Proc][]publication // by publisher, the procs of this agent
	closed bool

	stops sync.WaitGroup // watches being stopped after their lookup returned
}

// publication is one value a process of this agent published.
type publication struct {
	scope       scope
	key         string
	revision    uint64
	persistence pmix.Persistence
	session     string
}

// New returns a service on cfg's buckets. It does no I/O.
//
// Errors: an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Retry == 0 {
		cfg.Retry = 250 * time.Millisecond
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, log: log, owned: make(map[pmix.Proc][]publication)}, nil
}

// Close makes later calls fail with ErrClosed, and waits until the watches
// of finished lookups are stopped. Calls in progress end as their contexts
// say. It does not remove published data. Safe to call twice.
//
// It returns ctx.Err() if ctx ends first.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.stops.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopLater stops w on a goroutine of its own: stopping a watch deletes its
// consumer, a round trip a lookup need not wait for before it answers.
func (s *Service) stopLater(w jetstream.KVWatcher) {
	s.mu.Lock()
	if s.closed {
		// Close may be waiting on stops already: no Add after that.
		s.mu.Unlock()
		_ = w.Stop()
		return
	}
	s.stops.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.stops.Done()
		_ = w.Stop()
	}()
}

func (s *Service) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// remember records publications of p.
func (s *Service) remember(p pmix.Proc, pubs ...publication) {
	s.mu.Lock()
	s.owned[p] = append(s.owned[p], pubs...)
	s.mu.Unlock()
}

// forget drops p's publications for which drop is true, and returns them.
func (s *Service) forget(p pmix.Proc, drop func(publication) bool) []publication {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone, kept []publication
	for _, pub := range s.owned[p] {
		if drop(pub) {
			gone = append(gone, pub)
		} else {
			kept = append(kept, pub)
		}
	}
	if len(kept) == 0 {
		delete(s.owned, p)
	} else {
		s.owned[p] = kept
	}
	return gone
}

// bound returns ctx bounded by the request's PMIX_TIMEOUT, if it gave
// one. Without, each bucket operation is bounded by the bucket's own
// timeout (jetstream.KVConfig.Timeout).
func (s *Service) bound(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout == 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, timeout)
}

// cleanupContext bounds a cleanup by Config.Timeout.
func (s *Service) cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.Timeout)
}

// removeAll deletes publications, each at the revision published: a value
// published again since, by anyone, stays. Values already gone (read by a
// FIRST_READ lookup, unpublished) are no error. It returns the first other
// error, having tried every publication.
func (s *Service) removeAll(ctx context.Context, pubs []publication) error {
	var first error
	for _, pub := range pubs {
		err := pub.scope.kv.Delete(ctx, pub.scope.key, pub.revision)
		if err != nil && pmix.StatusOf(err) != jetstream.ErrRevisionMismatch.Status {
			s.log.Warn("removing published data", "key", pub.key, "bucket", pub.scope.kv.Name(), "err", err)
			if first == nil {
				first = err
			}
		}
	}
	return first
}
