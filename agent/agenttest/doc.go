// Package agenttest starts a whole pmixbus world from a small declaration:
// NATS servers for one or more clusters, one agent per node, jobs
// registered with every agent of their cluster, and a client per rank —
// attached in this process, or registered only, for a process the caller
// launches with its environment. It is what the end-to-end tests, the
// benchmarks and "pmixbus demo" stand on, in the manner of hashicorp/raft's
// MakeCluster.
//
// In a test, Start fails the test on error and shuts the world down at
// cleanup:
//
//	w := agenttest.Start(t, agenttest.Spec{
//		Clusters: []agenttest.Cluster{{ID: "A"}, {ID: "B"}},
//		Jobs: []agenttest.Job{
//			{Cluster: "A", Nspace: "sim", Nodes: []string{"a1", "a1", "a2"}}, // rank r on Nodes[r]
//			{Cluster: "B", Nspace: "viz", Nodes: []string{"b1"}},
//		},
//	})
//	w.WaitSourced(ctx) // each cluster's events stream sources the others' GLOBAL events
//	w.Client("A:sim.0").NotifyEvent(ctx, -3001, pmix.RangeGlobal, nil)
//	w.Agent("b1").Notify(…)
//
// Outside tests (the demo, "pmixbus bench"), New does the same with a
// context, a directory and a logger, and Close shuts it down:
//
//	w, err := agenttest.New(ctx, spec, "", log)
//	defer w.Close(ctx)
//
// Several clusters are joined by leaf-node links through a hub
// (cluster.StartMultiCluster); a lone cluster runs by itself, the top of
// its own topology, so its GLOBAL publish/lookup data stays in its own
// JetStream domain. A world can also use NATS servers that run already
// (Cluster.URL). Agents listen on Unix sockets in a directory with a short
// path (SocketDir): socket paths are limited to 108 bytes.
//
// A world that starts its own servers is secured as pmixbus deploys them
// (docs/security.md): fresh keys, kept in memory, that the servers accept
// and the agents sign in with, so every test runs secured. A test's own
// connections sign in with World.Keys().Option(role); Spec.Insecure turns
// security off, Spec.LeafTLS puts the leaf links on TLS.
//
// A World's methods are safe for concurrent use. Start checks, at cleanup,
// that the world left no goroutine running (clustertest.CheckGoroutines)
// when it started its own servers; such a test must not run in parallel
// with others.
package agenttest
