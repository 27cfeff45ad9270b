package nodefence

import "github.com/pmixbus/pmixbus/pmix"

// The segment's layout, which cabi/src/nodefence.c repeats.
const (
	Magic   = 0x706d7866 // "pmxf"
	Version = 1
	Size    = 4096 // one page

	OffMagic   = 0   // uint32
	OffVersion = 4   // uint32
	OffN       = 8   // uint32: the ranks that arrive
	OffSize    = 12  // uint32: Size
	OffStatus  = 16  // int32: the status of a break (0 before one)
	OffFlags   = 20  // uint32: FlagPartial
	OffGen     = 64  // uint32: the generation, the futex word
	OffArrived = 128 // uint32: arrivals at the current generation
)

// FlagPartial marks the barrier of a node's share of a job with ranks on
// other nodes too: n is the job's ranks on this node, and the last of them
// to arrive completes nothing itself but tells the agent (a fence frame
// with pmix.KeyNodeFenceLast), which runs the job's fence across agents
// for the node's ranks and then moves the generation (or breaks it with
// the fence's failure).
const FlagPartial = 1

// MaxRanks bounds n: a job's ranks on one node.
const MaxRanks = 1 << 20

// Eligible reports whether a fence of self with procs and info takes the
// node's barrier when its job has one: procs none, or exactly self's
// nspace (as the caller names it, not cluster-qualified) with
// PMIX_RANK_WILDCARD; and every info a PMIX_COLLECT_DATA of bool false,
// or a PMIX_TIMEOUT that pmix.KeyDeadline marks as the Go client's (with the
// mark itself). Anything else — data to collect, a timeout, an id, an
// unknown key — takes the agent's path. cabi/src/nodefence.c applies the
// same rule.
func Eligible(self pmix.Proc, procs []pmix.Proc, info []pmix.Info) bool {
	switch len(procs) {
	case 0:
	case 1:
		if procs[0].Nspace != self.Nspace || procs[0].Rank != pmix.RankWildcard {
			return false
		}
	default:
		return false
	}
	marked := pmix.Flag(info, pmix.KeyDeadline)
	for _, in := range info {
		switch in.Key {
		case pmix.KeyCollectData:
			if b, ok := in.Value.Bool(); !ok || b {
				return false
			}
		case pmix.KeyTimeout:
			if !marked {
				return false
			}
		case pmix.KeyDeadline:
			if !marked {
				return false
			}
		case pmix.KeyNodeFenceLast:
		default:
			return false
		}
	}
	return true
}
