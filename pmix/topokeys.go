package pmix

// KeyLocalTopo is PMIX_LOCAL_TOPO: the node's hwloc topology as XML
// (string), which the agent gives its clients so that each need not
// discover it (Open MPI's MPI_Init loads it from there).
const KeyLocalTopo = "pmix.ltopo"
