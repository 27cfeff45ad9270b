package pmix

// Attribute keys of PMIx_Spawn, with OpenPMIx's strings, and pmixbus's
// own: the cluster a spawned job runs on.
const (
	KeySpawned  = "pmix.spawned"  // bool: the proc was started by PMIx_Spawn
	KeyParentID = "pmix.parent"   // Proc: the proc that called PMIx_Spawn
	KeyHost     = "pmix.host"     // string: comma list of hosts for the spawned procs
	KeyHostfile = "pmix.hostfile" // string: a hostfile for the spawned procs
	KeyMapBy    = "pmix.mapby"    // string: the mapping policy
	KeyWdir     = "pmix.wdir"     // string: the spawned procs' working directory
	KeyNoOver   = "pmix.noover"   // bool: do not oversubscribe
	// KeySpawnCluster is pmixbus's: the cluster the spawned job (in the
	// job info) or app (in its info) runs on; the caller's when absent.
	// PMIXBUS_SPAWN_CLUSTER in C.
	KeySpawnCluster = "pmixbus.spawn.cluster" // string
)
