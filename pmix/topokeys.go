package pmix

// KeyLocalTopo is PMIX_LOCAL_TOPO: the node's hwloc topology as XML
// (string), which the agent gives its clients so that each need not
// discover it (Open MPI's MPI_Init loads it from there).
const KeyLocalTopo = "pmix.ltopo"

// The node's topology in a shared-memory file, as hwloc_shmem_topology_write
// made it: a client maps the file at the address, with the length, and
// adopts the topology (hwloc_shmem_topology_adopt) instead of parsing
// PMIX_LOCAL_TOPO. Open MPI 4.1 tries them first. The address and the
// length are size_t in C (PMIX_SIZE), uint64 on the wire.
const (
	KeyHwlocShmemFile = "pmix.hwlocfile" // PMIX_HWLOC_SHMEM_FILE, string: the file's path
	KeyHwlocShmemAddr = "pmix.hwlocaddr" // PMIX_HWLOC_SHMEM_ADDR, size: where to map it
	KeyHwlocShmemSize = "pmix.hwlocsize" // PMIX_HWLOC_SHMEM_SIZE, size: its length
)
