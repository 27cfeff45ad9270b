/* pmixbus-topology: prints this node's hwloc topology as XML on stdout.
 *
 * The agent runs it once at start (it lives beside libpmix.so.2, where
 * make puts it when libhwloc-dev is installed) and gives the XML to its
 * ranks as PMIX_LOCAL_TOPO ("pmix.ltopo"), as mpirun's daemon does: Open
 * MPI's MPI_Init then loads the topology from it instead of discovering
 * it in every rank, which loads hwloc's GL, OpenCL, PCI and libxml
 * plugins (X11, ICU, libstdc++: about 20 ms a rank, measured). I/O
 * devices are left out: placing and binding ranks needs the CPUs, the
 * caches and the memory, and the XML stays small. */
#include <hwloc.h>
#include <stdio.h>

int main(void)
{
    hwloc_topology_t topo;
    char *xml = NULL;
    int len = 0;

    if (0 != hwloc_topology_init(&topo)) {
        fprintf(stderr, "pmixbus-topology: hwloc_topology_init failed\n");
        return 1;
    }
    (void) hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
    if (0 != hwloc_topology_load(topo)) {
        fprintf(stderr, "pmixbus-topology: hwloc_topology_load failed\n");
        hwloc_topology_destroy(topo);
        return 1;
    }
    if (0 != hwloc_topology_export_xmlbuffer(topo, &xml, &len, 0) || len < 1) {
        fprintf(stderr, "pmixbus-topology: exporting the topology as XML failed\n");
        hwloc_topology_destroy(topo);
        return 1;
    }
    fwrite(xml, 1, (size_t) len - 1, stdout); /* len counts the final NUL */
    hwloc_free_xmlbuffer(topo, xml);
    hwloc_topology_destroy(topo);
    return 0 == fflush(stdout) ? 0 : 1;
}
