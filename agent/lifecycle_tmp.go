package agent

import "github.com/pmixbus/pmixbus/pmix"

// TEMPORARY: replaced by h1's lifecycle.go at merge.

type ClientState struct {
	Attached, Finalized, Aborted bool
	AbortStatus                  pmix.Status
	AbortMessage                 string
}

type AbortRequest struct {
	Proc    pmix.Proc
	Status  pmix.Status
	Message string
	Procs   []pmix.Proc
}

func WithExitWatched() ClientOption { return func(e *clientEntry) {} }

func (a *Agent) ClientState(proc pmix.Proc) (ClientState, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.expected[proc]
	return ClientState{}, ok
}

func (a *Agent) OnAbort(f func(AbortRequest)) {}
