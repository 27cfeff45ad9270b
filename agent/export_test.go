package agent

import "github.com/pmixbus/pmixbus/pmix"

// SetInboxSize makes the inbox of an agent of cfg hold n events, so a test
// overflows it with a few.
func SetInboxSize(cfg *Config, n int) { cfg.inboxSize = n }

// OpenConns counts the connections the agent has accepted and not closed,
// authenticated or not.
func (a *Agent) OpenConns() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.conns)
}

// Stamped reports whether attached client p has its retention stamp: the
// point from which it counts as receiving its job's events live.
func (a *Agent) Stamped(p pmix.Proc) bool {
	return a.retention.Stamped(p)
}

// Behind tells the agent's retention that its inbox holds a backlog, as
// the router does when it does (router.Retention.Behind).
func (a *Agent) Behind() { a.retention.Behind() }

// Retaining reports whether the agent's consumer of job nspace's events
// exists.
func (a *Agent) Retaining(nspace string) bool { return a.retention.Retaining(nspace) }
