/* dmodex.c: PMIx_Get of a peer's key that is not committed yet waits for
 * its commit (direct modex), as OpenPMIx's test/simple/simpdmodex.c
 * expects. Three ranks, 0 and 1 on one node, 2 on another; no fence.
 *
 * Rank 0 asks (PMIx_Get_nb) for "dm.late" of ranks 1 and 2, then commits
 * "dm.ready"; ranks 1 and 2 wait for it (a blocking PMIx_Get) and only
 * then commit "dm.late": rank 0's gets complete with their values. Rank 0
 * then gets a key rank 1 never commits with PMIX_TIMEOUT 1
 * (PMIX_ERR_TIMEOUT) and with PMIX_OPTIONAL (PMIX_ERR_NOT_FOUND at once),
 * and one of rank 2, which exits without finalizing once it saw rank 0's
 * "dm.dying": that get ends with PMIX_ERR_NOT_FOUND. Rank 1 finalizes
 * while a get of its own is waiting: PMIx_Finalize returns.
 *
 * It prints "name value" lines and exits 0, or "FAIL ..." and exits 1. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include <pmix.h>

#include "check.h"

static pmix_proc_t me;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int answered;

static void put_commit(const char *key, uint32_t u)
{
    pmix_value_t v;
    pmix_status_t rc;
    PMIX_VALUE_LOAD(&v, &u, PMIX_UINT32);
    rc = PMIx_Put(PMIX_GLOBAL, key, &v);
    PMIX_VALUE_DESTRUCT(&v);
    CHECK(PMIX_SUCCESS == rc, "put %s: %s", key, PMIx_Error_string(rc));
    rc = PMIx_Commit();
    CHECK(PMIX_SUCCESS == rc, "commit %s: %s", key, PMIx_Error_string(rc));
}

/* get gets key of rank, with one directive when dkey is not NULL, and
 * returns the status; a value must be uint32 want. */
static pmix_status_t get(pmix_rank_t rank, const char *key, const char *dkey, const void *dval, pmix_data_type_t dtype,
                         uint32_t want)
{
    pmix_proc_t p;
    pmix_info_t info;
    pmix_value_t *v = NULL;
    pmix_status_t rc;
    PMIX_LOAD_PROCID(&p, me.nspace, rank);
    if (NULL != dkey) {
        PMIX_INFO_LOAD(&info, dkey, dval, dtype);
    }
    rc = PMIx_Get(&p, key, NULL != dkey ? &info : NULL, NULL != dkey ? 1 : 0, &v);
    if (NULL != dkey) {
        PMIX_INFO_DESTRUCT(&info);
    }
    if (PMIX_SUCCESS == rc) {
        CHECK(NULL != v && PMIX_UINT32 == v->type && want == v->data.uint32, "%s of %u: wrong value", key, rank);
        PMIX_VALUE_RELEASE(v);
    }
    return rc;
}

struct late {
    pmix_rank_t rank;
    pmix_status_t status;
};

static void latecb(pmix_status_t status, pmix_value_t *v, void *cbdata)
{
    struct late *l = cbdata;
    if (PMIX_SUCCESS == status) {
        CHECK(NULL != v && PMIX_UINT32 == v->type && 1000 + l->rank == v->data.uint32, "dm.late of %u: wrong value",
              l->rank);
    }
    pthread_mutex_lock(&mu);
    l->status = status;
    answered++;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
}

static void ignorecb(pmix_status_t status, pmix_value_t *v, void *cbdata)
{
    (void)status; (void)v; (void)cbdata;
}

static void rank0(void)
{
    struct late l[2] = {{.rank = 1}, {.rank = 2}};
    pmix_proc_t p;
    pmix_status_t rc;
    int32_t one = 1;
    int i;
    for (i = 0; i < 2; i++) {
        PMIX_LOAD_PROCID(&p, me.nspace, l[i].rank);
        rc = PMIx_Get_nb(&p, "dm.late", NULL, 0, latecb, &l[i]);
        CHECK(PMIX_SUCCESS == rc, "get_nb dm.late of %u: %s", l[i].rank, PMIx_Error_string(rc));
    }
    put_commit("dm.ready", 0);
    printf("waiting\n");
    fflush(stdout);
    pthread_mutex_lock(&mu);
    while (answered < 2) {
        pthread_cond_wait(&cond, &mu);
    }
    pthread_mutex_unlock(&mu);
    for (i = 0; i < 2; i++) {
        printf("late %u %d\n", l[i].rank, l[i].status);
    }
    printf("timeout %d\n", get(1, "dm.never", PMIX_TIMEOUT, &one, PMIX_INT32, 0));
    printf("optional %d\n", get(1, "dm.never", PMIX_OPTIONAL, NULL, PMIX_BOOL, 0));
    put_commit("dm.dying", 0);
    printf("dead %d\n", get(2, "dm.never", NULL, NULL, PMIX_BOOL, 0));
}

int main(int argc, char **argv)
{
    pmix_status_t rc;
    pmix_proc_t p;
    (void)argc; (void)argv;
    rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    printf("init\n");
    fflush(stdout);
    switch (me.rank) {
    case 0:
        rank0();
        break;
    case 1:
    case 2:
        rc = get(0, "dm.ready", NULL, NULL, PMIX_BOOL, 0);
        CHECK(PMIX_SUCCESS == rc, "waiting for dm.ready: %s", PMIx_Error_string(rc));
        put_commit("dm.late", 1000 + me.rank);
        if (2 == me.rank) {
            rc = get(0, "dm.dying", NULL, NULL, PMIX_BOOL, 0);
            CHECK(PMIX_SUCCESS == rc, "waiting for dm.dying: %s", PMIx_Error_string(rc));
            printf("dying\n");
            fflush(stdout);
            _exit(failed);
        }
        /* A get waiting while this process finalizes. */
        PMIX_LOAD_PROCID(&p, me.nspace, 0);
        rc = PMIx_Get_nb(&p, "dm.never", NULL, 0, ignorecb, NULL);
        CHECK(PMIX_SUCCESS == rc, "get_nb dm.never: %s", PMIx_Error_string(rc));
        break;
    }
    rc = PMIx_Finalize(NULL, 0);
    printf("finalize %d\n", rc);
    return failed;
}
