package router

// Stats is a snapshot of the router's counters (agent.Stats reports them).
type Stats struct {
	Published, Received, Malformed uint64
	Delivered                      uint64 // live deliveries to a client's chain
	Replayed                       uint64 // cached events replayed to new registrations
	// Early: LOCAL events of local clients run before their copies
	// came (local.go).
	Early                  uint64
	Held                   int    // registrations being replayed to now
	JobDropped, EnvDropped uint64 // transient events dropped by NATS: the inbox was full
	Subscriptions          int
	// The sequenced dispatch's: copies of cached events NATS dropped
	// (the inbox was full), events fetched from the cache for gaps, and
	// events neither stream held any more when fetched.
	CopiesDropped, Fetched, Lost uint64
}

// Stats returns the router's counters; safe at any time.
func (r *Router) Stats() Stats {
	s := Stats{
		Published: r.stats.published.Load(), Received: r.stats.received.Load(), Malformed: r.stats.malformed.Load(),
		Delivered: r.stats.delivered.Load(), Replayed: r.stats.replayed.Load(), Early: r.stats.early.Load(), Held: int(r.nholds.Load()),
		Subscriptions: r.subscriptions(),
	}
	s.JobDropped, s.EnvDropped = r.droppedByKind()
	if q := r.seq; q != nil {
		if d, err := q.sub.Dropped(); err == nil {
			s.CopiesDropped = uint64(d)
		}
		s.Fetched, s.Lost = q.fetched.Load(), q.lost.Load()
	}
	return s
}
