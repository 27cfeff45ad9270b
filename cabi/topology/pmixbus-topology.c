/* pmixbus-topology: prints this node's hwloc topology as XML on stdout.
 *
 * The agent runs it once at start (it lives beside libpmix.so.2, where
 * make puts it when libhwloc-dev is installed) and gives the XML to its
 * ranks as PMIX_LOCAL_TOPO ("pmix.ltopo"), as mpirun's daemon does: Open
 * MPI's MPI_Init then loads the topology from it instead of discovering
 * it in every rank. I/O devices are left out: placing and binding ranks
 * needs the CPUs, the caches and the memory, and the XML stays small.
 *
 *   pmixbus-topology                 the XML
 *   pmixbus-topology --shmem FILE    also writes the topology into FILE (an
 *                                    existing file, which the agent made)
 *                                    for hwloc_shmem_topology_adopt, and
 *                                    prints "shmem ADDRESS LENGTH\n" (hex
 *                                    address, decimal length) before the XML
 *   pmixbus-topology --check FILE ADDRESS LENGTH
 *                                    adopts FILE as a rank would and prints
 *                                    its number of PUs (a test's check)
 *
 * The shared-memory copy is what Open MPI 4.1's opal_hwloc_base_get_topology
 * tries first (PMIX_HWLOC_SHMEM_FILE/ADDR/SIZE): each rank maps the file
 * read-only at ADDRESS instead of parsing the XML. ADDRESS must be free in
 * every rank, which cannot be known here; see pick_address for the choice.
 * A rank where it is taken fails the adoption (EBUSY) and loads the XML. */
#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <hwloc/shmem.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where in the address space the shared topology goes: the middle of the
 * largest gap between this process's mappings below its stack, rounded
 * down to 1 GiB. On Linux, as in every rank, the executable and its brk
 * heap sit low (a PIE executable at about 2/3 of the user space), the
 * mmap area grows down from below the stack, and the stack, vdso and
 * vsyscall pages are at the top; the gaps are then the one below the
 * executable and the one between the heap and the mmap area, tens of TiB
 * each on x86-64. Their middle is further from the heap's growth, from
 * the mmap area's growth and from address randomisation (1 TiB at most
 * with 28 random bits of pages) than any rank reaches. OpenPMIx and ORTE
 * also search the largest gap of the server's own maps ("biggest"), but
 * take its end, next to where mappings grow. Returns 0 when there is no
 * gap of 1024 times the length (nothing is shared then). */
static uintptr_t pick_address(size_t length)
{
    const uintptr_t align = (uintptr_t) 1 << 30;
    uintptr_t prev_end = 0, best_lo = 0, best_len = 0;
    char line[512];
    FILE *maps = fopen("/proc/self/maps", "r");

    if (NULL == maps) {
        return 0;
    }
    while (NULL != fgets(line, sizeof(line), maps)) {
        uintptr_t lo, hi;
        if (2 != sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) || lo < prev_end) {
            continue;
        }
        if (lo - prev_end > best_len) {
            best_lo = prev_end;
            best_len = lo - prev_end;
        }
        prev_end = hi;
        if (NULL != strstr(line, "[stack]")) {
            break; /* above it: vvar, vdso, vsyscall; nothing is mapped there */
        }
        if (NULL == strchr(line, '\n')) { /* a long path: skip the rest of the line */
            int c;
            while (EOF != (c = fgetc(maps)) && '\n' != c) {
            }
        }
    }
    fclose(maps);
    if (best_len / 1024 < length || best_len < 4 * align) {
        return 0;
    }
    return (best_lo + best_len / 2) & ~(align - 1);
}

/* write_shmem writes topo into path at an address of pick_address and
 * prints the line the agent reads; nothing is printed when it cannot (the
 * ranks then load the XML). */
static void write_shmem(hwloc_topology_t topo, const char *path)
{
    size_t length = 0;
    uintptr_t addr;
    int fd;

    if (0 != hwloc_shmem_topology_get_length(topo, &length, 0)) {
        fprintf(stderr, "pmixbus-topology: no shared-memory length: %s\n", strerror(errno));
        return;
    }
    if (0 == (addr = pick_address(length))) {
        fprintf(stderr, "pmixbus-topology: no address range for %zu bytes of shared topology\n", length);
        return;
    }
    /* No O_CREAT: the agent made the file, with its owner and mode. */
    if (0 > (fd = open(path, O_RDWR | O_CLOEXEC))) {
        fprintf(stderr, "pmixbus-topology: %s: %s\n", path, strerror(errno));
        return;
    }
    if (0 != hwloc_shmem_topology_write(topo, fd, 0, (void *) addr, length, 0)) {
        fprintf(stderr, "pmixbus-topology: writing the shared topology at %#" PRIxPTR ": %s\n", addr, strerror(errno));
        close(fd);
        return;
    }
    close(fd);
    printf("shmem %#" PRIxPTR " %zu\n", addr, length);
}

/* check adopts path as Open MPI's ranks do and prints its PU count. */
static int check(const char *path, const char *addr, const char *length)
{
    hwloc_topology_t topo;
    char *end1, *end2;
    unsigned long long a = strtoull(addr, &end1, 0), n = strtoull(length, &end2, 0);
    int fd, rc;

    if ('\0' != *end1 || '\0' != *end2 || 0 == a || 0 == n) {
        fprintf(stderr, "pmixbus-topology: --check FILE ADDRESS LENGTH\n");
        return 2;
    }
    if (0 > (fd = open(path, O_RDONLY | O_CLOEXEC))) {
        fprintf(stderr, "pmixbus-topology: %s: %s\n", path, strerror(errno));
        return 1;
    }
    rc = hwloc_shmem_topology_adopt(&topo, fd, 0, (void *) (uintptr_t) a, (size_t) n, 0);
    close(fd);
    if (0 != rc) {
        fprintf(stderr, "pmixbus-topology: adopting %s: %s\n", path, strerror(errno));
        return 1;
    }
    printf("pus %d\n", hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU));
    hwloc_topology_destroy(topo);
    return 0;
}

int main(int argc, char **argv)
{
    hwloc_topology_t topo;
    const char *shmem = NULL;
    char *xml = NULL;
    int len = 0;

    if (5 == argc && 0 == strcmp(argv[1], "--check")) {
        return check(argv[2], argv[3], argv[4]);
    }
    if (3 == argc && 0 == strcmp(argv[1], "--shmem")) {
        shmem = argv[2];
    } else if (1 != argc) {
        fprintf(stderr, "usage: pmixbus-topology [--shmem FILE | --check FILE ADDRESS LENGTH]\n");
        return 2;
    }
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
    if (NULL != shmem) {
        write_shmem(topo, shmem);
    }
    fwrite(xml, 1, (size_t) len - 1, stdout); /* len counts the final NUL */
    hwloc_free_xmlbuffer(topo, xml);
    hwloc_topology_destroy(topo);
    return 0 == fflush(stdout) ? 0 : 1;
}
