package pmix

// PMIx 4.2's process groups (PMIx_Group_construct and the rest): the
// events and attributes, with OpenPMIx 4.2.2's values.

// Group events.
const (
	GroupInvited          Status = -159 // PMIX_GROUP_INVITED
	GroupLeft             Status = -160 // PMIX_GROUP_LEFT
	GroupInviteAccepted   Status = -161 // PMIX_GROUP_INVITE_ACCEPTED
	GroupInviteDeclined   Status = -162 // PMIX_GROUP_INVITE_DECLINED
	GroupInviteFailed     Status = -163 // PMIX_GROUP_INVITE_FAILED
	GroupMembershipUpdate Status = -164 // PMIX_GROUP_MEMBERSHIP_UPDATE
	GroupConstructAbort   Status = -165 // PMIX_GROUP_CONSTRUCT_ABORT
	GroupConstructDone    Status = -166 // PMIX_GROUP_CONSTRUCT_COMPLETE
	GroupLeaderSelected   Status = -167 // PMIX_GROUP_LEADER_SELECTED
	GroupLeaderFailed     Status = -168 // PMIX_GROUP_LEADER_FAILED
	GroupContextIDAssign  Status = -169 // PMIX_GROUP_CONTEXT_ID_ASSIGNED
	GroupMemberFailed     Status = -170 // PMIX_GROUP_MEMBER_FAILED
)

// Group attributes.
const (
	KeyGroupName         = "pmix.grp.id"      // string: the group's name
	KeyGroupLeader       = "pmix.grp.ldr"     // bool: this process leads the group
	KeyGroupOptional     = "pmix.grp.opt"     // bool: a member that terminates first is left out
	KeyGroupNotifyTerm   = "pmix.grp.notterm" // bool: PMIX_GROUP_MEMBER_FAILED to the others when a member terminates
	KeyGroupFTCollective = "pmix.grp.ftcoll"  // bool: terminated members are left out of the group's collectives
	KeyGroupMembership   = "pmix.grp.mbrs"    // []Proc: the members
	KeyGroupAssignCtxID  = "pmix.grp.actxid"  // bool: assign the group a context id
	KeyGroupContextID    = "pmix.grp.ctxid"   // size: the context id assigned
	KeyGroupLocalOnly    = "pmix.grp.lcl"     // bool: the members are all of this node
	KeyGroupEndptData    = "pmix.grp.endpt"   // bytes: data shared during construction
	KeyGroupInfo         = "pmix.grp.info"    // []Info: data each member shares with the others
	KeyGroupLocalCID     = "pmix.grp.lclid"   // size: a member's local context id
	KeyGroupAddMembers   = "pmix.grp.add"     // []Proc: procs invited to join as the group is constructed
)

// Group options of PMIx_Group_join.
const (
	GroupDecline = 0 // PMIX_GROUP_DECLINE
	GroupAccept  = 1 // PMIX_GROUP_ACCEPT
)

func init() {
	for s, n := range map[Status]string{
		GroupInvited: "PMIX_GROUP_INVITED", GroupLeft: "PMIX_GROUP_LEFT",
		GroupInviteAccepted: "PMIX_GROUP_INVITE_ACCEPTED", GroupInviteDeclined: "PMIX_GROUP_INVITE_DECLINED",
		GroupInviteFailed: "PMIX_GROUP_INVITE_FAILED", GroupMembershipUpdate: "PMIX_GROUP_MEMBERSHIP_UPDATE",
		GroupConstructAbort: "PMIX_GROUP_CONSTRUCT_ABORT", GroupConstructDone: "PMIX_GROUP_CONSTRUCT_COMPLETE",
		GroupLeaderSelected: "PMIX_GROUP_LEADER_SELECTED", GroupLeaderFailed: "PMIX_GROUP_LEADER_FAILED",
		GroupContextIDAssign: "PMIX_GROUP_CONTEXT_ID_ASSIGNED", GroupMemberFailed: "PMIX_GROUP_MEMBER_FAILED",
	} {
		if _, ok := statusNames[s]; !ok {
			statusNames[s] = n
			statusByName[n] = s
		}
	}
}
