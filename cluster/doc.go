// Package cluster provides the identity of a PMIx cluster, RFC0003's
// multi-cluster "cluster:nspace" names, and embedded NATS servers with
// JetStream shaped the way pmixbus deploys them. It knows nothing of PMIx
// semantics.
//
// # Names
//
// A cluster ID never contains ':'. A multi-cluster name is split at its first
// ':', so the nspace may itself contain ':' and still round-trips; a name
// without ':' is unqualified and refers to the local cluster:
//
//	cluster.Qualify("A", "job:1")  // "A:job:1"
//	cluster.Split("A:job:1")       // "A", "job:1", true
//	cluster.Split("job1")          // "", "job1", false
//
// # Topologies
//
// Every server runs JetStream in the domain named after its cluster. There
// are three shapes, each started on free ports and ready when Start returns:
//
//   - StartServer: one standalone server;
//   - StartCluster: N servers joined by routes, one JetStream domain;
//   - StartMultiCluster: K such clusters, each its own domain, every server of
//     every cluster linked as a leaf node to one hub server that has a domain
//     of its own ("hub").
//
// Leaf links bind the global account on both ends; no accounts or shared
// system account are configured. Servers with an Auth accept only its
// nkeys, each with its permissions, and their leaf links sign in with its
// leaf key; LeafTLS puts the leaf links on TLS (see auth.go, tls.go, and
// package security for pmixbus's roles). nats-server then adds to the global
// account of every server a mapping from "$JS.<domain>.API.>" (and the
// domain-prefixed KV and object-store subjects) to its local JetStream API,
// advertises interest in those subjects over leaf links, and denies the
// un-prefixed "$JS.API.>" across a link whose two ends have different domains.
// So a client anywhere reaches cluster A's JetStream with
// jetstream.NewWithDomain(nc, "A"), its own cluster's with jetstream.New(nc),
// and each cluster's JetStream keeps its own RAFT meta group: losing the hub
// or another cluster leaves it working. Gateways (a supercluster) are not
// used, because they join all clusters in one meta group.
//
// A server with no leaf remote is the top of its topology (the hub, or a
// server linked to no other); its domain is the one every cluster reaches.
// Each such server answers TopDomain from anywhere in the topology, so
// that data all clusters share can be placed without configuration (see
// topology.go).
//
// Usage:
//
//	mc, err := cluster.StartMultiCluster(ctx, cluster.DefaultMultiClusterConfig(dir,
//		cluster.ClusterSpec{ID: "A", Servers: 1},
//		cluster.ClusterSpec{ID: "B", Servers: 3}))
//	if err != nil { … }
//	defer mc.Shutdown(context.Background())
//	nc, _ := nats.Connect(mc.Cluster("B").URL())
//	js, _ := jetstream.NewWithDomain(nc, "A") // A's JetStream, from B
//
// Tests should use package clustertest, which starts these topologies in
// t.TempDir() and shuts them down at cleanup.
//
// # Concurrency
//
// Server, Cluster and MultiCluster are safe for concurrent use. Their
// Shutdown methods may be called any number of times, from any goroutine;
// each waits until every goroutine and listener of the servers has ended, or
// returns ctx.Err() when its context ends first. Starting and shutting down
// leave no goroutine of this package behind.
package cluster
