// Package jetstream provisions and uses the JetStream streams and key-value
// buckets pmixbus keeps its state in: the publish/lookup buckets (kv*.go),
// and the event cache. It knows nothing of handler chains or of PMIx
// ranges; callers give it bucket names, domains and keys.
//
// # Key-value buckets
//
// A bucket lives in one JetStream domain: a cluster's own, or the hub's for
// what every cluster shares. NATSKV reaches it through whatever server the
// caller is connected to, over the leaf links, and provisions it on first
// use, so a handle made while its domain is unreachable starts working once
// it answers:
//
//	kv, err := jetstream.NewKV(jetstream.KVConfig{Conn: nc, Domain: "hub", Bucket: "PMIXBUS_PUBLISH"})
//	rev, err := kv.Create(ctx, "g.myrendezvouskey", value) // ErrKeyExists if taken
//	got, err := kv.GetMany(ctx, []string{"g.a", "g.b"})     // one round trip
//	err = kv.Delete(ctx, "g.a", got["g.a"].Revision)        // ErrRevisionMismatch if it changed
//	f, err := kv.Follow(ctx, func(c jetstream.KVChange) {}) // every change from now on
//	defer f.Stop()
//
// The KV interface is the seam: MemKV implements it in memory, with fault
// injection (SetUnreachable), so code above a bucket is tested without a
// server and the same tests then run against NATSKV.
//
// Errors are *pmix.Error values with a PMIx status and the code of this
// package's sentinel: ErrKeyExists (PMIX_ERR_DUPLICATE_KEY),
// ErrRevisionMismatch, ErrUnreachable (PMIX_ERR_UNREACH, for no
// responders, timeouts and lost links), so callers can pass them on to
// PMIx clients as they are and still tell them apart with errors.Is.
//
// # Concurrency
//
// NATSKV and MemKV are safe for concurrent use; a follow's reports come
// one at a time, on a goroutine of the follow, until it lapses or Stop.
package jetstream
