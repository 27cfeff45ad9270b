/*
 * resolve.c — PMIx_Resolve_peers and PMIx_Resolve_nodes, from the job
 * information PMIx_Get reads: PMIX_NODE_LIST (the job's nodes, in order
 * of their first rank) and each rank's PMIX_HOSTNAME (the name of the
 * agent's node that runs it). For the caller's own job every value is in
 * the job information the library holds since PMIx_Init, so neither call
 * talks to the agent; for another job (one connected to, a group's
 * member) each Get may ask the agent once.
 *
 * A NULL or empty nspace is the caller's own: the library knows no list
 * of every job of a node (OpenPMIx answers that one from its server's
 * tables).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"

/* job_of loads the nspace asked about, the caller's own when none is. */
static void job_of(const char *nspace, pmix_proc_t *job)
{
    PMIX_PROC_CONSTRUCT(job);
    snprintf(job->nspace, sizeof(job->nspace), "%s", (NULL == nspace || '\0' == nspace[0]) ? lib.proc.nspace : nspace);
    job->rank = PMIX_RANK_WILDCARD;
}

/* get_string reads key of p as a string the caller frees. */
static pmix_status_t get_string(const pmix_proc_t *p, const char *key, char **out)
{
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(p, key, NULL, 0, &v);
    *out = NULL;
    if (PMIX_SUCCESS != rc) {
        return rc;
    }
    if (PMIX_STRING != v->type || NULL == v->data.string) {
        PMIX_VALUE_RELEASE(v);
        return PMIX_ERR_TYPE_MISMATCH;
    }
    *out = v->data.string;
    v->data.string = NULL;
    PMIX_VALUE_RELEASE(v);
    return PMIX_SUCCESS;
}

PMIX_EXPORT pmix_status_t PMIx_Resolve_nodes(const pmix_nspace_t nspace, char **nodelist)
{
    pmix_proc_t job;
    if (NULL == nodelist) {
        return PMIX_ERR_BAD_PARAM;
    }
    *nodelist = NULL;
    if (!PMIx_Initialized()) {
        return PMIX_ERR_INIT;
    }
    job_of(nspace, &job);
    return get_string(&job, PMIX_NODE_LIST, nodelist);
}

PMIX_EXPORT pmix_status_t PMIx_Resolve_peers(const char *nodename, const pmix_nspace_t nspace,
                                             pmix_proc_t **procs, size_t *nprocs)
{
    pmix_proc_t job, p;
    pmix_value_t *v = NULL;
    pmix_status_t rc;
    char *here = NULL, *host;
    uint32_t size, r;
    size_t n = 0;

    if (NULL == procs || NULL == nprocs) {
        return PMIX_ERR_BAD_PARAM;
    }
    *procs = NULL;
    *nprocs = 0;
    if (!PMIx_Initialized()) {
        return PMIX_ERR_INIT;
    }
    job_of(nspace, &job);
    rc = PMIx_Get(&job, PMIX_JOB_SIZE, NULL, 0, &v);
    if (PMIX_SUCCESS != rc) {
        return rc; /* an nspace nobody knows: PMIX_ERR_NOT_FOUND, as OpenPMIx */
    }
    if (PMIX_UINT32 != v->type) {
        PMIX_VALUE_RELEASE(v);
        return PMIX_ERR_TYPE_MISMATCH;
    }
    size = v->data.uint32;
    PMIX_VALUE_RELEASE(v);
    if (NULL == nodename) {
        /* The caller's node, as its agent names it (PMIX_HOSTNAME). */
        if (PMIX_SUCCESS != (rc = get_string(&lib.proc, PMIX_HOSTNAME, &here))) {
            return rc;
        }
        nodename = here;
    }
    for (r = 0; r < size; r++) {
        p = job;
        p.rank = r;
        if (PMIX_SUCCESS != (rc = get_string(&p, PMIX_HOSTNAME, &host))) {
            goto fail;
        }
        if (0 == strcmp(host, nodename)) {
            if (NULL == *procs) {
                /* At most every rank left: one allocation. */
                PMIX_PROC_CREATE(*procs, size - r);
                if (NULL == *procs) {
                    free(host);
                    rc = PMIX_ERR_NOMEM;
                    goto fail;
                }
            }
            (*procs)[n] = p;
            n++;
        }
        free(host);
    }
    *nprocs = n;
    free(here);
    return PMIX_SUCCESS; /* none there: NULL and 0, as OpenPMIx */

fail:
    if (NULL != *procs) {
        PMIX_PROC_FREE(*procs, size);
        *procs = NULL;
    }
    free(here);
    return rc;
}
