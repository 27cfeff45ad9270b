package liveness

// PauseBeats stops the agent's refreshes until resume is called, as a
// paused process (SIGSTOP, a long GC, a hung host) would: a test hook.
func (s *Service) PauseBeats() (resume func()) {
	s.writeMu.Lock()
	return s.writeMu.Unlock
}

// PretendOutage makes the service behave as if its own connection had
// just come back from an outage, while on: a test hook.
func (s *Service) PretendOutage(on bool) { s.outage.Store(on) }
