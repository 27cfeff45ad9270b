/* query.c: PMIx_Query_info (+_nb) as OpenPMIx's abi_no_init.c, hello.c
 * and bad_exit.c ask it, in a job of four ranks. Before PMIx_Init the ABI
 * versions are answered ("0.0", as OpenPMIx 4.2.2), blocking and _nb;
 * after it, the process sets (none defined: PMIX_ERR_NOT_FOUND with no
 * values, as under mpirun), the running nspaces (the job's among them),
 * the job size of the job (4), its proc table (four entries) and local
 * proc table (two), an unknown key (PMIX_ERR_NOT_FOUND) and a mix of
 * known and unknown (PMIX_QUERY_PARTIAL_SUCCESS with the one answer).
 * Then the node info nodeinfo.c reads with PMIx_Get: PMIX_NODE_LIST,
 * PMIX_SERVER_URI, a peer's PMIX_NODEID and PMIX_HOSTNAME.
 * Prints "queried"; failures print FAIL lines and exit 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pmix.h>

#include "check.h"
#include "waitcb.h"

static pmix_status_t argrc; /* PMIX_ARGV_APPEND's */
static pmix_info_t *got;
static size_t ngot;

static void querycb(pmix_status_t status, pmix_info_t *info, size_t ninfo, void *cbdata,
                    pmix_release_cbfunc_t release_fn, void *release_cbdata)
{
    (void)cbdata;
    ngot = ninfo;
    if (ninfo > 0) {
        size_t i;
        got = calloc(ninfo, sizeof(*got));
        for (i = 0; NULL != got && i < ninfo; i++) {
            PMIx_Info_xfer(&got[i], &info[i]);
        }
    }
    if (NULL != release_fn) {
        release_fn(release_cbdata);
    }
    signal_done(status);
}

static void forget(void)
{
    PMIX_INFO_FREE(got, ngot);
    got = NULL;
    ngot = 0;
}

static pmix_status_t query1(const char *key, const char *nspace, pmix_info_t **out, size_t *n)
{
    pmix_query_t q;
    pmix_status_t rc;
    PMIX_QUERY_CONSTRUCT(&q);
    PMIX_ARGV_APPEND(argrc, q.keys, key);
    if (NULL != nspace) {
        PMIX_INFO_CREATE(q.qualifiers, 1);
        q.nqual = 1;
        PMIX_INFO_LOAD(&q.qualifiers[0], PMIX_NSPACE, nspace, PMIX_STRING);
    }
    rc = PMIx_Query_info(&q, 1, out, n);
    PMIX_QUERY_DESTRUCT(&q);
    return rc;
}

int main(void)
{
    pmix_query_t q[2];
    pmix_info_t *info = NULL;
    size_t n = 0;
    pmix_proc_t me;
    pmix_status_t rc;

    (void)opcb;
    /* before Init */
    PMIX_QUERY_CONSTRUCT(&q[0]);
    PMIX_QUERY_CONSTRUCT(&q[1]);
    PMIX_ARGV_APPEND(argrc, q[0].keys, PMIX_QUERY_STABLE_ABI_VERSION);
    PMIX_ARGV_APPEND(argrc, q[1].keys, PMIX_QUERY_PROVISIONAL_ABI_VERSION);
    rc = PMIx_Query_info(q, 2, &info, &n);
    CHECK(PMIX_SUCCESS == rc && 2 == n, "ABI versions before Init: %s, %zu values", PMIx_Error_string(rc), n);
    CHECK(2 == n && PMIX_CHECK_KEY(&info[0], PMIX_QUERY_STABLE_ABI_VERSION) && PMIX_STRING == info[0].value.type &&
              0 == strcmp("0.0", info[0].value.data.string),
          "stable ABI version");
    PMIX_INFO_FREE(info, n);
    rc = completed(PMIx_Query_info_nb(q, 2, querycb, NULL));
    CHECK(PMIX_SUCCESS == rc && 2 == ngot, "ABI versions before Init, _nb: %s", PMIx_Error_string(rc));
    forget();
    PMIX_QUERY_DESTRUCT(&q[1]);

    rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    /* hello.c's query */
    PMIX_QUERY_DESTRUCT(&q[0]);
    PMIX_QUERY_CONSTRUCT(&q[0]);
    PMIX_ARGV_APPEND(argrc, q[0].keys, PMIX_QUERY_NUM_PSETS);
    PMIX_ARGV_APPEND(argrc, q[0].keys, PMIX_QUERY_PSET_NAMES);
    rc = completed(PMIx_Query_info_nb(q, 1, querycb, NULL));
    CHECK(PMIX_ERR_NOT_FOUND == rc && 0 == ngot, "psets: %s, %zu values", PMIx_Error_string(rc), ngot);
    forget();
    PMIX_QUERY_DESTRUCT(&q[0]);

    rc = query1(PMIX_QUERY_NAMESPACES, NULL, &info, &n);
    CHECK(PMIX_SUCCESS == rc && 1 == n && PMIX_STRING == info[0].value.type &&
              NULL != strstr(info[0].value.data.string, me.nspace),
          "namespaces: %s", PMIx_Error_string(rc));
    PMIX_INFO_FREE(info, n);
    rc = query1(PMIX_JOB_SIZE, me.nspace, &info, &n);
    CHECK(PMIX_SUCCESS == rc && 1 == n && PMIX_UINT32 == info[0].value.type && 4 == info[0].value.data.uint32,
          "job size: %s", PMIx_Error_string(rc));
    PMIX_INFO_FREE(info, n);
    rc = query1(PMIX_QUERY_PROC_TABLE, me.nspace, &info, &n);
    CHECK(PMIX_SUCCESS == rc && 1 == n && PMIX_DATA_ARRAY == info[0].value.type &&
              4 == info[0].value.data.darray->size,
          "proc table: %s", PMIx_Error_string(rc));
    PMIX_INFO_FREE(info, n);
    rc = query1(PMIX_QUERY_LOCAL_PROC_TABLE, NULL, &info, &n);
    CHECK(PMIX_SUCCESS == rc && 1 == n && PMIX_DATA_ARRAY == info[0].value.type &&
              2 == info[0].value.data.darray->size,
          "local proc table: %s", PMIx_Error_string(rc));
    PMIX_INFO_FREE(info, n);
    rc = query1("pmix.qry.nosuch", NULL, &info, &n);
    CHECK(PMIX_ERR_NOT_FOUND == rc && 0 == n, "an unknown key: %s", PMIx_Error_string(rc));
    PMIX_QUERY_CONSTRUCT(&q[0]);
    PMIX_ARGV_APPEND(argrc, q[0].keys, "pmix.qry.nosuch");
    PMIX_ARGV_APPEND(argrc, q[0].keys, PMIX_QUERY_NAMESPACES);
    rc = PMIx_Query_info(q, 1, &info, &n);
    CHECK(PMIX_QUERY_PARTIAL_SUCCESS == rc && 1 == n && PMIX_CHECK_KEY(&info[0], PMIX_QUERY_NAMESPACES),
          "a known and an unknown key: %s, %zu values", PMIx_Error_string(rc), n);
    PMIX_INFO_FREE(info, n);
    PMIX_QUERY_DESTRUCT(&q[0]);

    /* node info (nodeinfo.c, simpclient.c): the job's node list, a
     * peer's node id and hostname, the server's URI */
    {
        pmix_proc_t p;
        pmix_value_t *v = NULL;
        PMIX_LOAD_PROCID(&p, me.nspace, PMIX_RANK_WILDCARD);
        rc = PMIx_Get(&p, PMIX_NODE_LIST, NULL, 0, &v);
        CHECK(PMIX_SUCCESS == rc && PMIX_STRING == v->type && 0 == strcmp("a1,a2", v->data.string), "node list: %s",
              PMIx_Error_string(rc));
        PMIX_VALUE_RELEASE(v);
        rc = PMIx_Get(&p, PMIX_SERVER_URI, NULL, 0, &v);
        CHECK(PMIX_SUCCESS == rc && PMIX_STRING == v->type && NULL != strstr(v->data.string, "unix:"),
              "server URI: %s", PMIx_Error_string(rc));
        PMIX_VALUE_RELEASE(v);
        PMIX_LOAD_PROCID(&p, me.nspace, 3);
        rc = PMIx_Get(&p, PMIX_NODEID, NULL, 0, &v);
        CHECK(PMIX_SUCCESS == rc && PMIX_UINT32 == v->type && 1 == v->data.uint32, "rank 3's node id: %s",
              PMIx_Error_string(rc));
        PMIX_VALUE_RELEASE(v);
        rc = PMIx_Get(&p, PMIX_HOSTNAME, NULL, 0, &v);
        CHECK(PMIX_SUCCESS == rc && PMIX_STRING == v->type && 0 == strcmp("a2", v->data.string),
              "rank 3's hostname: %s", PMIx_Error_string(rc));
        PMIX_VALUE_RELEASE(v);
    }

    rc = PMIx_Finalize(NULL, 0);
    CHECK(PMIX_SUCCESS == rc, "PMIx_Finalize: %s", PMIx_Error_string(rc));
    if (!failed) {
        printf("queried\n");
    }
    return failed;
}
