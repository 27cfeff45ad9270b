// Package publishlookup implements PMIx_Publish, PMIx_Lookup and
// PMIx_Unpublish on JetStream key-value buckets, so that jobs on different
// clusters can find each other — RFC0003's rendezvous on cluster-qualified
// nspaces — before they connect. An agent runs one Service for its local
// processes; it stamps every request with the Identity it authenticated,
// and the service never takes one from a client.
//
//	svc, err := publishlookup.New(publishlookup.Config{Cluster: "A", Local: localKV, Global: hubKV})
//	err = svc.Publish(ctx, me, []pmix.Info{
//		pmix.NewInfo("myrendezvouskey", pmix.String("A:job1")),
//		pmix.NewInfo(pmix.KeyRange, pmix.RangeValue(pmix.RangeGlobal)),
//	})
//	data, err := svc.Lookup(ctx, me, []string{"remoterendezvouskey"}, []pmix.Info{
//		pmix.NewInfo(pmix.KeyWait, pmix.Int32(0)),   // until all are there
//		pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(10)), // or PMIX_ERR_TIMEOUT
//	})
//	// data[0].Value is "B:job7", data[0].Proc is B's publisher as "B:job7".0
//
// # Where data lives
//
// Two buckets (jetstream.KV): the cluster's own, in its JetStream domain,
// for LOCAL, NAMESPACE and SESSION data and for CUSTOM data whose procs are
// all of the cluster; and the global one, in the domain that every cluster
// reaches over its leaf link — the hub's, which the agent learns from the
// top of the topology (cluster.TopDomain) — for GLOBAL data and CUSTOM
// data naming procs of other clusters. With a single cluster both are the
// same bucket. Each key's KV key names its range scope (see scope.go and
// docs/subjects.md), so that creating it is atomic per scope: the same key
// in the same scope is PMIX_ERR_DUPLICATE_KEY. Losing the hub leaves the
// cluster's own scopes working.
//
// # Rules
//
// A lookup by Q at range R sees a value published by X at range P only if X
// is within R of Q and Q within P of X (ranges are checked both ways), and
// reads it only if the value's access permissions admit Q's user or group
// (by default, only X's own user and group). Only X may unpublish it.
// Persistence ends as persistence.go describes.
//
// # The mirror
//
// A Service keeps the scopes its lookups read recently (mirror.go), kept
// current by one follow of each bucket, and answers a lookup whose scopes
// it holds from memory; PMIX_WAIT lookups are woken by the same follows. A
// change made through another service is seen once the follow delivers
// it; a lapsed follow drops its bucket's scopes and the bucket is read
// again. mirror.go states the bounds.
//
// # Concurrency
//
// A Service is safe for concurrent use. Its follows report on goroutines
// of their own; the goroutines that make them are the service's, which
// Close stops and waits for.
package publishlookup
