// Package clustertest starts the topologies of package cluster inside tests
// and gives tests the helpers they share: a polling WaitFor, a logger that
// writes to t.Log, client connections closed at cleanup, and a goroutine
// leak check; for secured servers, a CA and certificates in t.TempDir()
// (LeafTLS), the permission violations a connection is told of
// (Violations) and a check that a server refuses a connection (Refused).
//
// Every Start function stores JetStream data in a temporary directory
// removed after the shutdown (retrying: a file store may finish a write
// late), listens on free
// ports of 127.0.0.1, fails the test if the topology does not become ready,
// and registers a t.Cleanup that shuts it down:
//
//	func TestAcrossClusters(t *testing.T) {
//		clustertest.CheckGoroutines(t) // first: its cleanup runs last
//		mc := clustertest.StartMultiCluster(t,
//			cluster.ClusterSpec{ID: "A", Servers: 1},
//			cluster.ClusterSpec{ID: "B", Servers: 3})
//		a := clustertest.Connect(t, mc.Cluster("A").URL())
//		b := clustertest.Connect(t, mc.Cluster("B").URL())
//		sub, _ := b.SubscribeSync("x")
//		clustertest.WaitFor(t, 5*time.Second, func() error {
//			a.Publish("x", nil)
//			_, err := sub.NextMsg(100 * time.Millisecond)
//			return err
//		})
//	}
//
// Server logs are off unless PMIXBUS_TEST_LOG names a level (error, warn,
// info, debug or trace); they then go to t.Log, shown with -v or on failure.
//
// The helpers may be called from the test's goroutine only, as testing.TB's
// Fatal methods require; the topologies they return are safe for concurrent
// use. CheckGoroutines counts every goroutine of the process, so a test that
// uses it must not run in parallel with others.
package clustertest
