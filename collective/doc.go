// Package collective runs PMIx collectives across nodes and clusters on
// NATS: PMIx_Fence and the key-value exchange (PMIx_Put, PMIx_Commit,
// PMIx_Get), and RFC0003's PMIx_Connect/Disconnect (a new nspace and
// ranks, the attributes, terminations of members) on the same engine. An agent runs
// one Service for its processes, hands it its NATS connection and its job
// table, and turns its clients' frames into Join, Commit and Get calls.
//
//	svc, err := collective.New(collective.Config{Cluster: "A", Node: "n1", Conn: nc, Jobs: jobs})
//	err = svc.JobChanged(ctx, "job1")                   // as jobs are registered
//	err = svc.Commit(me, puts)                          // PMIx_Commit
//	_, err = svc.Join(ctx, collective.Request{           // PMIx_Fence, blocks
//		Kind: collective.KindFence, Procs: []pmix.Proc{{Nspace: "job1", Rank: pmix.RankWildcard}},
//		Self: me, Timeout: 10 * time.Second, Collect: true,
//	})
//	v, err := svc.Get(ctx, me, peer, "my.key", nil)     // PMIx_Get
//
// # The engine
//
// An operation is named by its kind, its id and its participants, which
// are qualified "cluster:nspace", de-duplicated (a WILDCARD rank absorbs
// the explicit ranks of its nspace) and sorted by nspace, then rank: a
// 128-bit hash of these is its signature. The same participants may run
// the same operation again and again (every MPI job fences more than
// once): each agent numbers the instances of a signature as its
// participants begin them, and since every participant runs them in the
// same order, every agent gives an instance the same number.
//
// Each agent takes part for the participants it hosts, which it reads from
// its job table (a WILDCARD participant: every rank of that nspace on this
// node). When all of them have called, it sends one contribution to the
// coordinator; the coordinator sends one release, which every
// participating agent receives. Messages per operation: one contribution
// per agent (plus its acknowledgement, a reply) and one release, whatever
// the number of processes.
//
// The coordinator is no elected leader: it is the agent hosting the lowest
// rank of the first participant's nspace, which subscribes to that
// nspace's lead subject when the job is registered (JobChanged). Any agent,
// in any cluster, reaches it by subject without knowing its node. It
// completes an operation when the contributions cover every participant:
// each names the procs it covers, and for a WILDCARD nspace of its own
// cluster how many ranks it has.
//
// A connect's release names the new nspace and its members in new rank
// order; the members' agents remember them, so that an operation naming
// the new nspace (WILDCARD, or its ranks) is one of the members, and Get
// of a new rank reads that member's data.
//
// RFC0003's connect attributes (Flags) travel with the contributions
// and the release: NOTIFY_EACH and NOTIFY_REQ make the agents raise
// events through Config.Raise as their participants arrive; OPTIONAL and
// EARLY_TERM_ALLOWED decide what a termination does. ProcTerminated,
// which the launch service calls on the agent of a process that ended,
// fails (or excuses) it in pending operations and raises
// PMIX_ERR_PROC_TERM_WO_SYNC at the other members of its groups; NodeDown,
// which every agent of a cluster calls for the processes of a node it
// declared down, does the same for them. The agents learn of it on
// GoneSubject; a coordinator that begins to watch an nspace there asks
// its cluster's agents (AskSubject) to announce again what they announced
// lately, so that no termination is missed for having come first. Each
// cluster keeps its groups in Config.Memberships (JetStream KV,
// NATSMemberships), which Restore reads when an agent starts again.
//
// PMIx 4.2's process groups (pgroup.go) run on the same engine:
// Construct is an operation of kind KindGroup whose id is the group's
// name, with every member's committed data collected; its release may
// carry a context id, which the coordinator takes from its cluster's
// groups bucket (unique in the cluster set). The group is then held as a
// connect's new nspace is, under its name. Destruct is a collective of the
// members, which excuses those that terminated or left (Leave, announced
// on GoneSubject); Invite is a construct of the leader and the invitees
// that the invitees' JoinGroup take part in, or decline out of, after
// asking the leader's agent for the invitation (InviteSubject).
// PMIX_GROUP_NOTIFY_TERMINATION raises PMIX_GROUP_MEMBER_FAILED at the
// members when one terminates; a construct that loses a member fails with
// PMIX_GROUP_CONSTRUCT_ABORT, or with PMIX_GROUP_FT_COLLECTIVE completes
// on the survivors, each told by PMIX_GROUP_MEMBER_FAILED.
//
// An agent whose contribution was acknowledged but which has no release
// after Config.Recheck sends it again: a coordinator that restarted learns
// it again, and one that concluded the operation sends the release again.
//
// # Partitions
//
// A release is one message, which a cut leaf link drops. Before it
// releases a success to agents of other clusters, the coordinator asks
// each that contributed whether it still waits (CheckSubject, check.go),
// and releases once all said yes: while one is cut off the release is
// held, and the operation's timeout fails it for every participant with
// ErrTimeout, as the cut-off agent fails its own when no release comes.
// An agent that said yes waits one Grace more at its timeout, and sends
// its contribution again AckWait after its answer if no release came, so
// that a cut right after its answer that heals before that deadline
// still completes it; and an agent whose NATS connection comes back sends
// every contribution still waiting again at once (Reconnected).
// docs/collective.md ("Partitions") says what window remains.
//
// # Timeouts
//
// A request's Timeout (PMIX_TIMEOUT) runs from the first local arrival.
// When it passes, an agent whose participants have not all arrived tells
// the coordinator which did; the coordinator fails the operation for every
// participant with ErrTimeout naming those that had not arrived. The
// coordinator also times the operation itself, from the first
// contribution, with the longest timeout any contribution gave plus half
// of Config.Grace (so that an agent's naming comes first), for the case
// where no agent has a participant missing; and an agent that hears
// nothing from the coordinator within Config.Grace after its timeout fails
// its own participants alike. Without a timeout nothing fails, but the
// coordinator logs who has not arrived every Config.WarnAfter. A
// participant that arrives after its operation failed, or after the others
// completed it, gets ErrFinished — except when a participant's termination
// failed it: that is every participant's failure, and a latecomer gets
// ErrParticipantTerminated as the others did.
//
// # Data
//
// Committed data lives in the agent's memory: what its own processes
// committed, and what fences with Collect brought. A contribution carries
// the REMOTE and GLOBAL data of its participants; the release carries all
// of it to every participating agent. LOCAL data never leaves its node. A
// Get of a value no fence brought asks the proc's agent (direct modex),
// which answers with all of the proc's REMOTE and GLOBAL data.
//
// # Concurrency
//
// A Service is safe for concurrent use; a process may be in several
// operations at once. Join blocks its caller only. Contributions are sent
// on goroutines of the service, which Close waits for.
package collective
