/* topology.c: the node's topology as the agent gives it to a rank.
 * PMIx_Get of the job-level keys answers PMIX_LOCAL_TOPO and
 * PMIX_HWLOC_SHMEM_FILE as strings, PMIX_HWLOC_SHMEM_ADDR and
 * PMIX_HWLOC_SHMEM_SIZE as PMIX_SIZE (Open MPI 4.1 reads them so); the
 * file adopts (hwloc_shmem_topology_adopt, read-only, no parsing) into
 * the topology of this machine the XML describes; and where the address
 * range is already taken in the rank, the adoption fails with EBUSY and
 * the XML still loads, which is Open MPI's fallback. Prints "topology ok
 * pus N" at the end. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <hwloc/shmem.h>
#include <pmix.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"

static pmix_value_t *get(const pmix_proc_t *job, const char *key, pmix_data_type_t want)
{
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(job, key, NULL, 0, &v);
    CHECK(PMIX_SUCCESS == rc && NULL != v, "PMIx_Get %s: %s", key, PMIx_Error_string(rc));
    if (NULL != v && v->type != want) {
        CHECK(0, "%s is %s, want %s", key, PMIx_Data_type_string(v->type), PMIx_Data_type_string(want));
        PMIX_VALUE_RELEASE(v);
        v = NULL;
    }
    return v;
}

/* pus loads the XML and counts its PUs; -1 when it does not load. */
static int pus(const char *xml)
{
    hwloc_topology_t t;
    int n = -1;
    if (0 != hwloc_topology_init(&t)) {
        return -1;
    }
    if (0 == hwloc_topology_set_xmlbuffer(t, xml, (int) strlen(xml) + 1) &&
        0 == hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM) && 0 == hwloc_topology_load(t)) {
        n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
    }
    hwloc_topology_destroy(t);
    return n;
}

/* adopt adopts the file, counts its PUs (-1 and errno when it does not
 * adopt) and says whether it is this system's topology. */
static int adopt(const char *file, size_t addr, size_t size, int *thissystem)
{
    hwloc_topology_t t;
    int fd = open(file, O_RDONLY), rc, n, err;
    if (fd < 0) {
        return -1;
    }
    rc = hwloc_shmem_topology_adopt(&t, fd, 0, (void *) addr, size, 0);
    err = errno;
    close(fd);
    if (0 != rc) {
        errno = err;
        return -1;
    }
    n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
    *thissystem = hwloc_topology_is_thissystem(t);
    hwloc_topology_destroy(t);
    return n;
}

int main(void)
{
    pmix_proc_t me, job;
    pmix_value_t *xml, *file, *addr, *size;
    int n = -1, thissystem = 0;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);

    if (PMIX_SUCCESS != rc) {
        printf("FAIL PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
    xml = get(&job, PMIX_LOCAL_TOPO, PMIX_STRING);
    file = get(&job, PMIX_HWLOC_SHMEM_FILE, PMIX_STRING);
    addr = get(&job, PMIX_HWLOC_SHMEM_ADDR, PMIX_SIZE);
    size = get(&job, PMIX_HWLOC_SHMEM_SIZE, PMIX_SIZE);
    if (NULL != xml && NULL != file && NULL != addr && NULL != size) {
        int want = pus(xml->data.string);
        CHECK(want > 0, "the XML does not load");
        n = adopt(file->data.string, addr->data.size, size->data.size, &thissystem);
        CHECK(n == want, "adopted %s at %#zx (%zu bytes): %d PUs (%s), the XML %d", file->data.string,
              addr->data.size, size->data.size, n, n < 0 ? strerror(errno) : "", want);
        CHECK(thissystem, "the adopted topology is not this system's: binding through it does nothing");

        /* The range taken in this process: the adoption fails, cleanly. */
        void *p = mmap((void *) addr->data.size, size->data.size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        CHECK(MAP_FAILED != p && p == (void *) addr->data.size, "mapping the range: %s", strerror(errno));
        errno = 0;
        CHECK(adopt(file->data.string, addr->data.size, size->data.size, &thissystem) < 0 && EBUSY == errno,
              "adopted over a mapping of the range (errno %d)", errno);
        CHECK(pus(xml->data.string) == want, "the XML does not load after the failed adoption");
        if (MAP_FAILED != p) {
            munmap(p, size->data.size);
        }
    }
    PMIx_Value_free(xml, 1);
    PMIx_Value_free(file, 1);
    PMIx_Value_free(addr, 1);
    PMIx_Value_free(size, 1);
    rc = PMIx_Finalize(NULL, 0);
    CHECK(PMIX_SUCCESS == rc, "PMIx_Finalize: %s", PMIx_Error_string(rc));
    if (!failed) {
        printf("topology ok pus %d\n", n);
    }
    return failed;
}
