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

	mirror *mirror
	ctx    context.Context // ends at Close
	cancel context.CancelFunc

	mu     sync.Mutex
	owned  map[pmix.Proc][]publication // by publisher, the procs of this agent
	closed bool

	goroutines sync.WaitGroup // of the service (goFunc)
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
	if cfg.MirrorScopes == 0 {
		cfg.MirrorScopes = DefaultMirrorScopes
	}
	if cfg.MirrorIdle == 0 {
		cfg.MirrorIdle = DefaultMirrorIdle
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{cfg: cfg, log: log, ctx: ctx, cancel: cancel, owned: make(map[pmix.Proc][]publication)}
	s.mirror = newMirror(s)
	return s, nil
}

// Close makes later calls fail with ErrClosed, stops the mirror's follows
// and waits for the service's goroutines. Calls in progress end as their
// contexts say. It does not remove published data. Safe to call twice.
//
// It returns ctx.Err() if ctx ends first.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.mirror.close()
	done := make(chan struct{})
	go func() { s.goroutines.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// goFunc runs f on a goroutine that Close waits for; after Close it does
// not run f.
func (s *Service) goFunc(f func()) {
	s.mu.Lock()
	if s.closed {
		// Close may be waiting already: no Add after that.
		s.mu.Unlock()
		return
	}
	s.goroutines.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.goroutines.Done()
		f()
	}()
}

// Waiting returns the number of PMIX_WAIT lookups waiting with every
// bucket they wait on followed: each is woken by the next publish of a key
// it waits for. For benchmarks and tests.
func (s *Service) Waiting() int { return s.mirror.waiting() }

// GlobalLinkDown tells the service that the link to the domain of the
// GLOBAL bucket (Config.Global) was found down: its mirrored values are
// dropped at once, so that lookups read the bucket — and are UNREACH while
// it cannot be read — instead of being served values that may have been
// unpublished beyond the link until the follow's heartbeats miss.
func (s *Service) GlobalLinkDown() { s.mirror.lapse(s.cfg.Global, "the link to its domain is down") }

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
		err := s.delete(ctx, pub.scope, pub.revision)
		if err != nil && pmix.StatusOf(err) != jetstream.ErrRevisionMismatch.Status {
			s.log.Warn("removing published data", "key", pub.key, "bucket", pub.scope.kv.Name(), "err", err)
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// delete deletes sc's key at revision, and tells the mirror.
func (s *Service) delete(ctx context.Context, sc scope, revision uint64) error {
	err := sc.kv.Delete(ctx, sc.key, revision)
	if err == nil {
		s.mirror.wrote(scopeRef{sc.kv, sc.key}, revision, nil)
	}
	return err
}
