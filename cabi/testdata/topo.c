/* topo.c export|load: "export" prints, as XML, a synthetic hwloc topology
 * of 2 packages of 3 cores of 2 PUs (the test gives it to the agent as
 * the node's, PMIX_LOCAL_TOPO). "load" calls PMIx_Load_topology twice,
 * checks the source ("hwloc") and that both calls give the same
 * topology, counts its PUs ("pus N"), and destructs both
 * pmix_topology_t's before PMIx_Finalize. Linked with -lhwloc. It exits
 * 0, or prints "FAIL ..." and exits 1. */
#include <stdio.h>
#include <string.h>

#include <hwloc.h>
#include <pmix.h>

#include "check.h"

static int export(void)
{
    hwloc_topology_t t;
    char *xml = NULL;
    int len = 0;
    if (0 != hwloc_topology_init(&t) || 0 != hwloc_topology_set_synthetic(t, "pack:2 core:3 pu:2") ||
        0 != hwloc_topology_load(t) || 0 != hwloc_topology_export_xmlbuffer(t, &xml, &len, 0)) {
        printf("FAIL synthetic topology\n");
        return 1;
    }
    fwrite(xml, 1, (size_t)len - 1, stdout);
    hwloc_free_xmlbuffer(t, xml);
    hwloc_topology_destroy(t);
    return 0;
}

int main(int argc, char **argv)
{
    pmix_proc_t me;
    pmix_topology_t a, b, other;
    pmix_status_t rc;
    if (argc == 2 && 0 == strcmp(argv[1], "export")) {
        return export();
    }
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    printf("before-init %d\n", PMIx_Load_topology(&a));
    rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    rc = PMIx_Load_topology(&a);
    printf("load %d\n", rc);
    if (PMIX_SUCCESS == rc) {
        CHECK(NULL != a.source && 0 == strcmp("hwloc", a.source) && NULL != a.topology, "source %s, topology %p",
              a.source, a.topology);
        printf("pus %d\n", hwloc_get_nbobjs_by_type((hwloc_topology_t)a.topology, HWLOC_OBJ_PU));
        rc = PMIx_Load_topology(&b);
        CHECK(PMIX_SUCCESS == rc && b.topology == a.topology, "second load: %s", PMIx_Error_string(rc));
    }
    printf("bad %d\n", PMIx_Load_topology(NULL));
    memset(&other, 0, sizeof(other));
    other.source = "other";
    printf("other-source %d\n", PMIx_Load_topology(&other));
    PMIx_Topology_destruct(&a);
    PMIx_Topology_destruct(&b);
    rc = PMIx_Finalize(NULL, 0);
    printf("finalize %d\n", rc);
    return failed;
}
