/* groups.c: what OpenPMIx 4.2's examples group.c, group_dmodex.c and
 * group_lcl_cid.c do, on a job of 4 ranks or more. Ranks 0, 2 and 3
 * construct a group with a context id and destruct it; then every rank
 * constructs one sharing its local context id (PMIX_GROUP_INFO), puts and
 * commits a key after the construct, destructs, and reads every rank's key
 * (waiting for its commit, PMIX_TIMEOUT) and local context id. Prints
 * "name value" lines. */
#include <stdio.h>
#include <string.h>

#include <pmix.h>

static size_t cid_of(pmix_info_t *results, size_t n)
{
    size_t i, cid = 0;
    pmix_status_t rc;
    for (i = 0; i < n; i++) {
        if (PMIX_CHECK_KEY(&results[i], PMIX_GROUP_CONTEXT_ID)) {
            PMIX_VALUE_GET_NUMBER(rc, &results[i].value, cid, size_t);
            (void)rc;
        }
    }
    return cid;
}

int main(void)
{
    pmix_proc_t me, wild, procs[64];
    pmix_value_t *val = NULL, value;
    pmix_info_t info[2], *results = NULL, tinfo;
    pmix_data_array_t darray;
    size_t nresults = 0, n, lcid;
    uint32_t nprocs, timeout = 10;
    pmix_status_t rc;
    char key[64];
    int ok;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (PMIX_SUCCESS != (rc = PMIx_Init(&me, NULL, 0))) {
        printf("init %d\n", rc);
        return 1;
    }
    printf("ready\n");
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &val);
    if (PMIX_SUCCESS != rc || val->data.uint32 < 4 || val->data.uint32 > 64) {
        printf("size FAIL %d\n", rc);
        return 1;
    }
    nprocs = val->data.uint32;
    PMIX_VALUE_RELEASE(val);
    printf("fence %d\n", PMIx_Fence(&wild, 1, NULL, 0));

    if (0 == me.rank || 2 == me.rank || 3 == me.rank) {
        PMIX_LOAD_PROCID(&procs[0], me.nspace, 0);
        PMIX_LOAD_PROCID(&procs[1], me.nspace, 2);
        PMIX_LOAD_PROCID(&procs[2], me.nspace, 3);
        PMIX_INFO_LOAD(&info[0], PMIX_GROUP_ASSIGN_CONTEXT_ID, NULL, PMIX_BOOL);
        rc = PMIx_Group_construct("ourgroup", procs, 3, info, 1, &results, &nresults);
        printf("construct %d\n", rc);
        printf("cid %s\n", 0 != cid_of(results, nresults) ? "set" : "none");
        PMIX_INFO_FREE(results, nresults);
        printf("destruct %d\n", PMIx_Group_destruct("ourgroup", NULL, 0));
    }

    for (n = 0; n < nprocs; n++) {
        PMIX_LOAD_PROCID(&procs[n], me.nspace, n);
    }
    lcid = 1234 + me.rank;
    PMIX_INFO_LOAD(&info[0], PMIX_GROUP_ASSIGN_CONTEXT_ID, NULL, PMIX_BOOL);
    PMIX_DATA_ARRAY_CONSTRUCT(&darray, 1, PMIX_INFO);
    PMIX_INFO_LOAD((pmix_info_t *)darray.array, PMIX_GROUP_LOCAL_CID, &lcid, PMIX_SIZE);
    PMIX_INFO_LOAD(&info[1], PMIX_GROUP_INFO, &darray, PMIX_DATA_ARRAY);
    PMIX_DATA_ARRAY_DESTRUCT(&darray);
    rc = PMIx_Group_construct("all", procs, nprocs, info, 2, &results, &nresults);
    printf("construct-all %d\n", rc);
    PMIX_INFO_DESTRUCT(&info[1]);
    snprintf(key, sizeof(key), "k-%zu-%u", cid_of(results, nresults), me.rank);
    PMIX_INFO_FREE(results, nresults);
    value.type = PMIX_UINT64;
    value.data.uint64 = 1234 + me.rank;
    rc = PMIx_Put(PMIX_GLOBAL, key, &value);
    if (PMIX_SUCCESS == rc) {
        rc = PMIx_Commit();
    }
    printf("put %d\n", rc);
    printf("destruct-all %d\n", PMIx_Group_destruct("all", NULL, 0));

    PMIX_INFO_LOAD(&tinfo, PMIX_TIMEOUT, &timeout, PMIX_UINT32);
    ok = 1;
    for (n = 0; n < nprocs; n++) {
        pmix_proc_t p;
        char k2[64];
        PMIX_LOAD_PROCID(&p, me.nspace, n);
        memcpy(k2, key, sizeof(k2));
        snprintf(strrchr(k2, '-') + 1, 16, "%zu", n);
        rc = PMIx_Get(&p, k2, &tinfo, 1, &val);
        if (PMIX_SUCCESS != rc || PMIX_UINT64 != val->type || 1234 + n != val->data.uint64) {
            printf("dmodex FAIL rank %zu %d\n", n, rc);
            ok = 0;
        }
        if (PMIX_SUCCESS == rc) {
            PMIX_VALUE_RELEASE(val);
        }
        rc = PMIx_Get(&p, PMIX_GROUP_LOCAL_CID, &tinfo, 1, &val);
        if (PMIX_SUCCESS == rc) {
            size_t got = 0;
            PMIX_VALUE_GET_NUMBER(rc, val, got, size_t);
            if (got != 1234 + n) {
                rc = PMIX_ERROR;
            }
            PMIX_VALUE_RELEASE(val);
        }
        if (PMIX_SUCCESS != rc) {
            printf("lclcid FAIL rank %zu %d\n", n, rc);
            ok = 0;
        }
    }
    printf("gets %s\n", ok ? "ok" : "FAIL");
    printf("finalize %d\n", PMIx_Finalize(NULL, 0));
    return 0;
}
