package liveness

// PauseBeats stops the agent's refreshes until resume is called, as a
// paused process (SIGSTOP, a long GC, a hung host) would: a test hook.
func (s *Service) PauseBeats() (resume func()) {
	s.writeMu.Lock()
	return s.writeMu.Unlock
}
