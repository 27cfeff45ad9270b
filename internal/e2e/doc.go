// Package e2e is what pmixbus's end-to-end tests (test/events, test/jobs,
// test/exchange) share: a world of two clusters whose clients record the
// events they get (World, Recorder), the test program launched jobs run
// (Prog) and the helpers around launching (RunJob, SyncBuffer), a client
// that speaks the protocol by hand (Raw), and the waits and checks more
// than one of those packages makes. It stands on package agenttest.
//
// The tests are split into packages so that go test runs them side by
// side (most of their time is waiting); within a package they run one at
// a time, because a World checks at cleanup that the test left no
// goroutine of the process running (clustertest.CheckGoroutines).
//
//	func TestMain(m *testing.M) { os.Exit(e2e.Main(m)) } // e2e.LaunchMain if they launch jobs
//
//	func TestSomething(t *testing.T) {
//		w := e2e.NewWorld(t)
//		w.Client("B:jobB.0").Register(t, []pmix.Status{e2e.FenceCode}, nil, pmix.EventNoActionTaken)
//		…
//		w.Client("B:jobB.0").Rec.WaitCount(t, e2e.FenceCode, 1)
//	}
//
// A Recorder is safe for concurrent use (handlers record from the
// clients' goroutines); a World's methods may be called from several
// goroutines, but Attach and StartAgent, which change it, only from the
// test's own.
package e2e
