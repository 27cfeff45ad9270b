/*
 * topology.c — PMIx_Load_topology: the node's hwloc topology, as OpenPMIx
 * 4.2.2 loads it (source "hwloc", topology a hwloc_topology_t).
 *
 * It is read from PMIX_LOCAL_TOPO, the XML the agent gives every rank
 * (agent/topology.go), else discovered. The library is built against
 * hwloc's headers when make finds them (PMIXBUS_HWLOC), but does not link
 * it: libhwloc.so.15 (hwloc 2.x) is opened at the first call, so that a
 * rank that never asks loads nothing more than libc. Built without hwloc,
 * or where libhwloc.so.15 is missing, the call is PMIX_ERR_NOT_SUPPORTED.
 *
 * The topology is the library's, one for the process, shared by every
 * caller and destroyed at the last PMIx_Finalize; PMIx_Topology_destruct
 * (objects.c) frees the caller's source string and leaves it alone, as
 * OpenPMIx leaves its own topology.
 */
#include <stdlib.h>
#include <string.h>

#include "conn.h"

#ifdef PMIXBUS_HWLOC
#include <dlfcn.h>
#include <hwloc.h>

#if HWLOC_API_VERSION < 0x20000
#error "hwloc 2.x is needed (its soname is libhwloc.so.15)"
#endif

static pthread_mutex_t topo_mu = PTHREAD_MUTEX_INITIALIZER;
static hwloc_topology_t shared;
static void (*destroy_fn)(hwloc_topology_t);

/* load_shared loads the topology into shared. Called with topo_mu held. */
static pmix_status_t load_shared(void)
{
    int (*init)(hwloc_topology_t *);
    int (*set_xml)(hwloc_topology_t, const char *, int);
    int (*set_flags)(hwloc_topology_t, unsigned long);
    int (*load)(hwloc_topology_t);
    hwloc_topology_t t;
    pmix_value_t xml;
    int have_xml, bad = 0;
    /* Never closed: the topology's code must stay mapped while a caller
     * may hold it. */
    void *h = dlopen("libhwloc.so.15", RTLD_NOW | RTLD_LOCAL);
    if (NULL == h) {
        return PMIX_ERR_NOT_SUPPORTED;
    }
    *(void **)&init = dlsym(h, "hwloc_topology_init");
    *(void **)&set_xml = dlsym(h, "hwloc_topology_set_xmlbuffer");
    *(void **)&set_flags = dlsym(h, "hwloc_topology_set_flags");
    *(void **)&load = dlsym(h, "hwloc_topology_load");
    *(void **)&destroy_fn = dlsym(h, "hwloc_topology_destroy");
    if (NULL == init || NULL == set_xml || NULL == set_flags || NULL == load || NULL == destroy_fn) {
        return PMIX_ERR_NOT_SUPPORTED;
    }
    if (0 != init(&t)) {
        return PMIX_ERR_NOMEM;
    }
    memset(&xml, 0, sizeof(xml));
    have_xml = hello_lookup(PMIX_LOCAL_TOPO, &xml) && PMIX_STRING == xml.type && NULL != xml.data.string;
    if (have_xml) {
        /* The agent's node is this process's: the XML describes it. */
        bad = 0 != set_xml(t, xml.data.string, (int)strlen(xml.data.string) + 1) ||
              0 != set_flags(t, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM);
    }
    PMIx_Value_destruct(&xml);
    if (bad || 0 != load(t)) {
        destroy_fn(t);
        return PMIX_ERROR;
    }
    shared = t;
    return PMIX_SUCCESS;
}

PMIX_EXPORT pmix_status_t PMIx_Load_topology(pmix_topology_t *topo)
{
    pmix_status_t rc = PMIX_SUCCESS;
    if (NULL == topo) {
        return PMIX_ERR_BAD_PARAM;
    }
    if (NULL != topo->source && 0 != strncmp(topo->source, "hwloc", 5)) {
        return PMIX_ERR_NOT_SUPPORTED; /* another library's, as OpenPMIx answers */
    }
    if (0 == __atomic_load_n(&lib.inits, __ATOMIC_ACQUIRE)) {
        return PMIX_ERR_INIT;
    }
    pthread_mutex_lock(&topo_mu);
    if (NULL == shared) {
        rc = load_shared();
    }
    if (PMIX_SUCCESS == rc && NULL == topo->source) {
        topo->source = strdup("hwloc");
        if (NULL == topo->source) {
            rc = PMIX_ERR_NOMEM;
        }
    }
    if (PMIX_SUCCESS == rc) {
        topo->topology = shared;
    }
    pthread_mutex_unlock(&topo_mu);
    return rc;
}

void topology_release(void)
{
    pthread_mutex_lock(&topo_mu);
    if (NULL != shared) {
        destroy_fn(shared);
        shared = NULL;
    }
    pthread_mutex_unlock(&topo_mu);
}

#else

PMIX_EXPORT pmix_status_t PMIx_Load_topology(pmix_topology_t *topo)
{
    (void)topo;
    return PMIX_ERR_NOT_SUPPORTED; /* built without hwloc's headers */
}

void topology_release(void) {}

#endif
