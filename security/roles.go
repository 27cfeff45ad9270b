package security

import (
	"slices"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/pmixbus/pmixbus/subjects"
)

// Role names what one NATS identity of pmixbus may do. Each role has one
// key (Keys) and the permissions Permissions gives it.
type Role string

const (
	// RoleAgent is the agents': events, outcomes, the JetStream API (the
	// event caches, the publish/lookup buckets, every domain's), inboxes
	// and every other subject of pmixbus. The only role that writes the
	// streams and buckets.
	RoleAgent Role = "agent"

	// RoleRM is a host RM's outside an agent ("pmixbus notify"): it
	// publishes events as the RM and receives the events of the RM range,
	// the chains' outcomes, and the event cache's acknowledgements on its
	// own inbox (RMInboxPrefix). It cannot read or change a stream or
	// bucket.
	RoleRM Role = "rm"

	// RoleWatch is read-only ("pmixbus watch", status tools): it receives
	// events and outcomes, and publishes nothing but its questions (which
	// clusters answer, which jobs an agent runs).
	RoleWatch Role = "watch"

	// RoleLeaf is the identity a server's leaf link signs in to its hub
	// with; its permissions bound what crosses between clusters. It may
	// make leaf connections only, and no other role may.
	RoleLeaf Role = "leaf"

	// RoleLauncher is `pmixbus run`'s. Its key vouches for the job keys
	// a launcher signs in with, one per job (JobCredential): each sends
	// its own job's control requests (spawn, kill, stdin: remote code
	// execution, which no other role but the agents' may send), keeps
	// its job's key in the jobs buckets, receives its job's process ends
	// and output, and raises its PMIX_EVENT_JOB_END (JobPermissions).
	// Signed in with the key itself, a launcher only reads.
	RoleLauncher Role = "launcher"
)

// Roles returns every role, in a fixed order.
func Roles() []Role { return []Role{RoleAgent, RoleRM, RoleWatch, RoleLeaf, RoleLauncher} }

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return slices.Contains(Roles(), r) }

const (
	outcomes = "pmix.outcome.>"
	// inboxes are the reply subjects of nats.go's requests. Only roles
	// trusted with every reply get them: a subscription to "_INBOX.>"
	// sees the replies to everyone's requests, the values an agent reads
	// from a bucket among them.
	inboxes = "_INBOX.>"
)

// WatchInboxPrefix is the inbox prefix of the read-only tools
// (nats.CustomInboxPrefix): the replies to their own requests only.
const WatchInboxPrefix = "_PMIXBUS.watch"

// RMInboxPrefix is the inbox prefix of "pmixbus notify" signed in as the
// RM: the event cache's acknowledgement of a GLOBAL event it sends.
const RMInboxPrefix = "_PMIXBUS.rm"

// LauncherInboxPrefix is the launcher's inbox prefix: the replies to its
// own requests only.
const LauncherInboxPrefix = "_PMIXBUS.launcher"

// Subjects and streams of package launch, named here so that security
// imports nothing above it.
const (
	JobsStream  = "KV_PMIXBUS_JOBS"
	controlJobs = "pmix.ctl.*.*.jobs" // the agents' running jobs: read-only, for status
	jobOutput   = "pmix.iof.>"
	// OutputStream is package iof's, one per domain: launchers and
	// viewers read it through ordered consumers.
	OutputStream = "PMIXBUS_IOF"
)

// AgentsStream is the stream of the agents bucket (liveness), which the
// watch role may read, and DiscoverySubject where tools ask which clusters
// are reachable; both are package launch/liveness's, named here so that
// security imports nothing above it.
const (
	AgentsStream     = "KV_PMIXBUS_AGENTS"
	DiscoverySubject = "pmix.ctl.clusters"
)

// Permissions returns the NATS permissions of role r, or nil for a role
// that is not one of Roles. For RoleLeaf they are seen from the leaf
// link's end, as nats-server takes them: what it may publish crosses
// from the leaf to the hub, what it may subscribe to crosses back.
func Permissions(r Role) *server.Permissions {
	switch r {
	case RoleAgent:
		all := []string{
			"pmix.>",    // events, job-event copies, outcomes, and what later services add
			"pmixbus.>", // the caches' ingest barriers
			"_PMIXBUS.>",
			inboxes,
			"$JS.>", // the JetStream API, in every domain; acks, flow control
			"$KV.>",
		}
		p := both(all)
		// Serving the servers' authorization requests (JobAuthority).
		p.Publish.Allow = append(p.Publish.Allow, authReplies)
		p.Subscribe.Allow = append(p.Subscribe.Allow, AuthCalloutSubject)
		return p
	case RoleRM:
		return &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{
				subjects.Prefix + ".>", subjects.EnvPrefix + ".>",
			}},
			Subscribe: &server.SubjectPermission{Allow: []string{
				subjects.Prefix + ".*.rm.>", subjects.EnvPrefix + ".*.rm.>", outcomes,
				RMInboxPrefix + ".>",
			}},
		}
	case RoleLauncher:
		// The key vouches for the job keys launchers sign in with
		// (JobCredential, JobPermissions); signed in itself it only
		// reads: which jobs run (the jobs buckets, an agent's "jobs"),
		// the agents buckets and the output stream, as watch does.
		return &server.Permissions{
			Publish: &server.SubjectPermission{Allow: launcherReads()},
			// The watch tools' inbox too, so that `pmixbus attach` signed
			// in with this key reads the output as the watch role does
			// (replies there carry nothing this role cannot read).
			Subscribe: &server.SubjectPermission{Allow: []string{
				jobOutput, LauncherInboxPrefix + ".>", WatchInboxPrefix + ".>",
			}},
		}
	case RoleWatch:
		// Read-only: events and outcomes, and for `pmixbus status` the
		// clusters' answer to discovery and a read of their agents
		// buckets (which list nodes and the ranks they host, no data) —
		// with replies on an inbox of its own, never "_INBOX.>".
		// It may also get the last event on an event subject from any
		// stream (a late watcher's JOB_END, pmixbus watch --job): events
		// it may watch live anyway; no bucket's subject starts so.
		pub := append(append(agentsRead(), outputRead()...), DiscoverySubject, controlJobs, "$JS.API.INFO",
			"$JS.API.DIRECT.GET.*."+subjects.Prefix+".>", "$JS.*.API.DIRECT.GET.*."+subjects.Prefix+".>")
		return &server.Permissions{
			Publish: &server.SubjectPermission{Allow: pub},
			Subscribe: &server.SubjectPermission{Allow: []string{
				subjects.Prefix + ".>", subjects.EnvPrefix + ".>", outcomes, WatchInboxPrefix + ".>",
			}},
		}
	case RoleLeaf:
		return both([]string{
			"pmix.>",
			"_PMIXBUS.>", // the top of the topology's domain, readiness probes
			inboxes,
			"$JS.*.API.>", // JetStream in another domain ($KV puts and direct gets included)
			"$JS.ACK.>",
			"$JS.FC.>",
			// Stream sourcing from another domain: the source
			// consumer's deliveries, and the answer to its creation.
			"$JS.S.>",
			"$JSC.R.>",
		})
	}
	return nil
}

// streamAPI is the subjects of JetStream API call api on stream, in the
// local domain and any other.
func streamAPI(api, stream string) []string {
	return []string{"$JS.API." + api + "." + stream, "$JS.*.API." + api + "." + stream,
		"$JS.API." + api + "." + stream + ".>", "$JS.*.API." + api + "." + stream + ".>"}
}

// launcherReads is what a launcher publishes to read, with its key or a
// job credential: which jobs run (the jobs buckets, an agent's "jobs"),
// the agents buckets, the output stream, which cluster is local.
func launcherReads() []string {
	pub := []string{controlJobs, "$JS.API.INFO"}
	for _, api := range []string{"STREAM.INFO", "DIRECT.GET", "STREAM.MSG.GET"} {
		pub = append(pub, streamAPI(api, JobsStream)...)
	}
	return append(append(pub, agentsRead()...), outputRead()...)
}

// agentsRead is what reading an agents bucket (liveness) takes.
func agentsRead() []string {
	var pub []string
	for _, api := range []string{"STREAM.INFO", "CONSUMER.CREATE", "CONSUMER.DELETE", "DIRECT.GET", "STREAM.MSG.GET"} {
		pub = append(pub, streamAPI(api, AgentsStream)...)
	}
	return append(pub, "$JS.FC."+AgentsStream+".>")
}

// outputRead is what reading jobs' output takes (pmixbus run, attach):
// ordered consumers on the output stream, delivered to the reader's
// inbox.
func outputRead() []string {
	var pub []string
	for _, api := range []string{"STREAM.INFO", "CONSUMER.CREATE", "CONSUMER.DELETE", "CONSUMER.INFO"} {
		pub = append(pub, streamAPI(api, OutputStream)...)
	}
	return append(pub, "$JS.FC."+OutputStream+".>")
}

// both allows subjects for publishing and subscribing alike.
func both(subjects []string) *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: slices.Clone(subjects)},
		Subscribe: &server.SubjectPermission{Allow: slices.Clone(subjects)},
	}
}

// connectionTypes are the kinds of connection a role's key may make.
func connectionTypes(r Role) map[string]struct{} {
	if r == RoleLeaf {
		return map[string]struct{}{jwt.ConnectionTypeLeafnode: {}}
	}
	return map[string]struct{}{jwt.ConnectionTypeStandard: {}, jwt.ConnectionTypeInProcess: {}}
}
