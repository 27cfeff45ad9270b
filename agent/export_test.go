package agent

// OpenConns counts the connections the agent has accepted and not closed,
// authenticated or not.
func (a *Agent) OpenConns() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.conns)
}
