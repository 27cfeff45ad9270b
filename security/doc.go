// Package security closes pmixbus's NATS to whoever does not hold one of
// its keys, with NATS's own means: every connection to a server, and every
// leaf link between clusters, signs in with an nkey, and each key may only
// do what its role allows. docs/security.md tells the whole story.
//
// # Roles
//
// There are five (Roles): RoleAgent, the agents', the only one that
// writes the event caches and the publish/lookup buckets or reads the
// buckets; RoleRM, for a host RM's events sent straight on NATS
// ("pmixbus notify"); RoleWatch, read-only ("pmixbus watch"); RoleLeaf,
// the identity a server's leaf link signs in to its hub with; and
// RoleLauncher, whose key vouches for job credentials. Permissions gives
// each one's NATS permissions.
//
// # Job credentials
//
// A launcher signs in for each job with a JobCredential: a fresh job key
// the launcher key vouches for. The servers ask their JobAuthority (NATS's
// auth callout) about it, which binds the job's nspace to that key and
// admits it with JobPermissions: its own job's subjects only.
//
//	cred, err := keys.JobCredential(nspace)
//	nc, err := nats.Connect(url, cred.Option())
//
// # Keys
//
// Keys holds one nkey per role. A deployment has one set, in a directory
// (DefaultDir: $PMIXBUS_KEYS, else ~/.config/pmixbus/keys) holding one
// file per role, "<role>.nk", mode 0600: the first server to start creates
// them (EnsureKeys); servers and agents read them all, and a host that
// only watches needs watch.nk alone (LoadKeys, FileOption). Servers list
// only the public keys; a seed file is the secret.
//
//	keys, err := security.EnsureKeys(dir)
//	auth, err := keys.ServerAuth()          // for cluster.Config.Auth
//	nc, err := nats.Connect(url, keys.Option(security.RoleWatch))
//
// TLS for the leaf links is cluster.LeafTLS.
//
// # Concurrency
//
// Keys is safe for concurrent use once loaded; so are the options it
// returns. EnsureKeys may run in several processes at once on one
// directory: all end up with the same keys.
package security
