package iof

import "sync"

// A tap hands a job's records to a local viewer as they are numbered,
// before they are stored: the agent's direct output path to a launcher on
// its node (docs/iof.md, *The direct path*). The stream stays the truth —
// a tap sees only what is numbered while it is open, and a viewer that
// misses a record takes it from the stream (or its subscription) by the
// record's sequence.

// tapSet is the Service's taps by nspace.
type tapSet struct {
	mu   sync.RWMutex
	taps map[string][]*tap
}

type tap struct {
	deliver func(Record)
}

// Tap calls deliver with every record of nspace's processes captured by
// this Service from now until stop is called: stdout, stderr and diag,
// the ends of channels and records over the job's limit (which the stream
// does not keep) included, each once, in order per (process, channel).
// deliver is called from the channel's own goroutine, before the record is
// stored: it must not block for long (a slow viewer delays the process's
// output), and must not call back into the Service. After stop returns,
// deliver is not called again.
func (s *Service) Tap(nspace string, deliver func(Record)) (stop func()) {
	t := &tap{deliver: deliver}
	s.taps.mu.Lock()
	if s.taps.taps == nil {
		s.taps.taps = map[string][]*tap{}
	}
	s.taps.taps[nspace] = append(s.taps.taps[nspace], t)
	s.taps.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.taps.mu.Lock()
			defer s.taps.mu.Unlock()
			l := s.taps.taps[nspace]
			for i, x := range l {
				if x == t {
					l = append(l[:i:i], l[i+1:]...)
					break
				}
			}
			if len(l) == 0 {
				delete(s.taps.taps, nspace)
			} else {
				s.taps.taps[nspace] = l
			}
		})
	}
}

// tapped hands r to the taps of its job. The read lock is held while
// deliver runs, so a stop waits for a delivery in progress.
func (s *Service) tapped(r Record) {
	s.taps.mu.RLock()
	defer s.taps.mu.RUnlock()
	for _, t := range s.taps.taps[r.Nspace] {
		t.deliver(r)
	}
}
