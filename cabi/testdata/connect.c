/* connect.c <nspace-a> <nspace-b> [nb]: connects every rank of the two
 * jobs with PMIx_Connect (PMIx_Connect_nb with "nb"), reads the new
 * nspace and its rank there with PMIx_Get of pmixbus's keys, disconnects
 * (naming the procs in the other order, and with PMIx_Disconnect_nb with
 * "nb"), and disconnects again, which fails: no connect is left. */
#include <stdio.h>
#include <string.h>

#include <pmix.h>

#include "waitcb.h"

#ifndef PMIXBUS_CONNECT_NSPACE /* compiled against OpenPMIx's header */
#define PMIXBUS_CONNECT_NSPACE "pmixbus.cnct.nspace"
#define PMIXBUS_CONNECT_RANK "pmixbus.cnct.rank"
#endif

int main(int argc, char **argv)
{
    pmix_proc_t me, procs[2], reversed[2];
    pmix_value_t *ns = NULL, *rank = NULL;
    pmix_status_t rc;
    int nb;

    if (argc < 3) {
        fprintf(stderr, "usage: connect nspace-a nspace-b [nb]\n");
        return 2;
    }
    nb = 4 == argc && 0 == strcmp(argv[3], "nb");
    rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    PMIX_LOAD_PROCID(&procs[0], argv[1], PMIX_RANK_WILDCARD);
    PMIX_LOAD_PROCID(&procs[1], argv[2], PMIX_RANK_WILDCARD);
    reversed[0] = procs[1];
    reversed[1] = procs[0];

    printf("ready\n");
    fflush(stdout);
    rc = nb ? completed(PMIx_Connect_nb(procs, 2, NULL, 0, opcb, NULL)) : PMIx_Connect(procs, 2, NULL, 0);
    printf("connect %d\n", rc);
    if (PMIX_SUCCESS != rc) {
        return 1;
    }
    rc = PMIx_Get(&me, PMIXBUS_CONNECT_NSPACE, NULL, 0, &ns);
    if (PMIX_SUCCESS != rc || PMIX_STRING != ns->type) {
        printf("FAIL get of the new nspace: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    rc = PMIx_Get(&me, PMIXBUS_CONNECT_RANK, NULL, 0, &rank);
    if (PMIX_SUCCESS != rc || PMIX_PROC_RANK != rank->type) {
        printf("FAIL get of the new rank: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    printf("connected %s %u\n", ns->data.string, rank->data.rank);
    PMIX_VALUE_RELEASE(ns);
    PMIX_VALUE_RELEASE(rank);

    rc = nb ? completed(PMIx_Disconnect_nb(reversed, 2, NULL, 0, opcb, NULL))
            : PMIx_Disconnect(reversed, 2, NULL, 0);
    printf("disconnect %d\n", rc);
    printf("disconnect-again %d\n", PMIx_Disconnect(procs, 2, NULL, 0));
    rc = PMIx_Finalize(NULL, 0);
    printf("finalize %d\n", rc);
    return 0;
}
