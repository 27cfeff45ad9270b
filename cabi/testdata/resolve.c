/* resolve.c: PMIx_Resolve_nodes and PMIx_Resolve_peers in a launched job
 * of 4 ranks on nodes a1 and a2 (two each): the job's node list, the
 * caller's node's ranks (nodename NULL) and a2's, a node with none, an
 * nspace nobody knows, and missing arguments. Prints "resolved" once
 * done; failures print FAIL lines and exit 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pmix.h>

#include "check.h"

/* ranks formats procs' ranks as "r,r,...", checking their nspace. */
static const char *ranks(const pmix_proc_t *procs, size_t n, const char *ns)
{
    static char buf[256];
    size_t i, at = 0;
    buf[0] = '\0';
    for (i = 0; i < n && at < sizeof(buf) - 16; i++) {
        CHECK(0 == strcmp(procs[i].nspace, ns), "peer %zu of nspace %s", i, procs[i].nspace);
        at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%s%u", i ? "," : "", procs[i].rank);
    }
    return buf;
}

int main(void)
{
    pmix_proc_t me, *procs = NULL;
    size_t n = 0;
    char *nodes = NULL;
    pmix_status_t rc;
    pmix_nspace_t nobody;

    rc = PMIx_Resolve_nodes(NULL, &nodes);
    CHECK(PMIX_ERR_INIT == rc, "PMIx_Resolve_nodes before PMIx_Init: %s", PMIx_Error_string(rc));
    if (PMIX_SUCCESS != (rc = PMIx_Init(&me, NULL, 0))) {
        printf("FAIL PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }

    rc = PMIx_Resolve_nodes(me.nspace, &nodes);
    CHECK(PMIX_SUCCESS == rc && NULL != nodes && 0 == strcmp(nodes, "a1,a2"), "PMIx_Resolve_nodes: %s, %s",
          PMIx_Error_string(rc), nodes ? nodes : "(null)");
    free(nodes);
    rc = PMIx_Resolve_nodes(NULL, &nodes); /* the caller's own job */
    CHECK(PMIX_SUCCESS == rc && NULL != nodes && 0 == strcmp(nodes, "a1,a2"), "PMIx_Resolve_nodes(NULL): %s",
          PMIx_Error_string(rc));
    free(nodes);

    rc = PMIx_Resolve_peers(NULL, me.nspace, &procs, &n);
    CHECK(PMIX_SUCCESS == rc, "PMIx_Resolve_peers of this node: %s", PMIx_Error_string(rc));
    CHECK(0 == strcmp(ranks(procs, n, me.nspace), me.rank < 2 ? "0,1" : "2,3"), "this node's peers: %s",
          ranks(procs, n, me.nspace));
    PMIX_PROC_FREE(procs, n);

    rc = PMIx_Resolve_peers("a2", NULL, &procs, &n);
    CHECK(PMIX_SUCCESS == rc && 0 == strcmp(ranks(procs, n, me.nspace), "2,3"), "a2's peers: %s, %s",
          PMIx_Error_string(rc), ranks(procs, n, me.nspace));
    PMIX_PROC_FREE(procs, n);

    rc = PMIx_Resolve_peers("nowhere", me.nspace, &procs, &n);
    CHECK(PMIX_SUCCESS == rc && NULL == procs && 0 == n, "a node with no rank: %s, %zu", PMIx_Error_string(rc), n);

    PMIX_LOAD_NSPACE(nobody, "no-such-job");
    rc = PMIx_Resolve_peers(NULL, nobody, &procs, &n);
    CHECK(PMIX_SUCCESS != rc && NULL == procs && 0 == n, "an nspace nobody knows: %s", PMIx_Error_string(rc));
    rc = PMIx_Resolve_nodes(nobody, &nodes);
    CHECK(PMIX_SUCCESS != rc && NULL == nodes, "the nodes of an nspace nobody knows: %s", PMIx_Error_string(rc));

    CHECK(PMIX_ERR_BAD_PARAM == PMIx_Resolve_peers(NULL, NULL, NULL, &n), "no procs pointer");
    CHECK(PMIX_ERR_BAD_PARAM == PMIx_Resolve_peers(NULL, NULL, &procs, NULL), "no count pointer");
    CHECK(PMIX_ERR_BAD_PARAM == PMIx_Resolve_nodes(NULL, NULL), "no node list pointer");

    rc = PMIx_Finalize(NULL, 0);
    CHECK(PMIX_SUCCESS == rc, "PMIx_Finalize: %s", PMIx_Error_string(rc));
    printf("resolved\n");
    return failed;
}
