package pmix

import "strings"

// Reserved reports whether key is one of PMIx's own ("pmix." prefix,
// OpenPMIx's PMIX_CHECK_RESERVED_KEY): information the host and the
// server provide, never waited for, as opposed to an application's key,
// which a Get may wait for until its process commits it.
func Reserved(key string) bool { return strings.HasPrefix(key, "pmix.") }

// ProcLevel reports whether key is information that each process of a job
// has a value of its own of, and the job as a whole none: its rank, local
// rank, node rank and rank within its app. A Get of it names a real rank;
// with RankWildcard it finds nothing the host did not register for the
// job. (PMIX_HOSTNAME, PMIX_APPNUM and the app's size, leader and argv are
// per process too, but PMIx answers them for RankWildcard with the
// caller's node and application.)
func ProcLevel(key string) bool {
	switch key {
	case KeyRank, KeyLocalRank, KeyNodeRank, KeyAppRank:
		return true
	}
	return false
}
