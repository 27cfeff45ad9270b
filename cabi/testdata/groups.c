/* groups.c [invite]: what OpenPMIx 4.2's examples group.c, group_dmodex.c
 * and group_lcl_cid.c do, on a job of 4 ranks or more. Ranks 0, 2 and 3
 * construct a group with a context id and destruct it; then every rank
 * constructs one sharing its local context id (PMIX_GROUP_INFO), puts and
 * commits a key after the construct, destructs, and reads every rank's key
 * (waiting for its commit, PMIX_TIMEOUT) and local context id.
 *
 * Rank 2 uses PMIx_Group_construct_nb.
 *
 * With "invite", on 4 ranks: rank 0 invites 1 and 2 (the _nb form);
 * rank 1 accepts (_nb) and rank 2 declines once PMIX_GROUP_INVITED
 * reached them; rank 1 then leaves (_nb) and rank 0 sees PMIX_GROUP_LEFT
 * and destructs alone (_nb); ranks 0 and 3 construct a group with the absent rank 2 and a
 * timeout of 1 s, which fails at both.
 *
 * With "across NSA NSB" (two jobs, of two clusters: "cluster:nspace"):
 * every rank of both puts "ep" (100 + rank, +10 in NSB), constructs one
 * group of both with a context id, reads "ep" of every rank of the group
 * by the group's name, and destructs it. Prints "name value" lines. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <pmix.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int seen_invited, seen_left, seen_accepted, seen_declined;
static pmix_status_t invite_rc = 1;
static size_t invite_members;
static pmix_proc_t inviter;

static void on_event(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[], size_t ninfo,
                     pmix_info_t results[], size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id, (void)info, (void)ninfo, (void)results, (void)nresults;
    pthread_mutex_lock(&mu);
    if (PMIX_GROUP_INVITED == status && NULL != source) {
        inviter = *source; /* the leader, as OpenPMIx's asyncgroup.c joins it */
    }
    seen_invited += PMIX_GROUP_INVITED == status;
    seen_left += PMIX_GROUP_LEFT == status;
    seen_accepted += PMIX_GROUP_INVITE_ACCEPTED == status;
    seen_declined += PMIX_GROUP_INVITE_DECLINED == status;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
    if (NULL != cbfunc) {
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
    }
}

static void wait_for(int *counter)
{
    pthread_mutex_lock(&mu);
    while (0 == *counter) {
        pthread_cond_wait(&cond, &mu);
    }
    pthread_mutex_unlock(&mu);
}

static size_t cid_of(pmix_info_t *results, size_t n);

/* The _nb forms' completions. */
static int op_done;
static pmix_status_t op_rc;
static size_t nb_cid;

static void opcb(pmix_status_t status, void *cbdata)
{
    (void)cbdata;
    pthread_mutex_lock(&mu);
    op_rc = status;
    op_done = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
}

static void infocb(pmix_status_t status, pmix_info_t *info, size_t ninfo, void *cbdata,
                   pmix_release_cbfunc_t release_fn, void *release_cbdata)
{
    nb_cid = cid_of(info, ninfo);
    if (NULL != release_fn) {
        release_fn(release_cbdata);
    }
    opcb(status, cbdata);
}

static pmix_status_t op_wait(pmix_status_t rc)
{
    if (PMIX_SUCCESS != rc) {
        return rc;
    }
    pthread_mutex_lock(&mu);
    while (!op_done) {
        pthread_cond_wait(&cond, &mu);
    }
    op_done = 0;
    pthread_mutex_unlock(&mu);
    return op_rc;
}

static void invited(pmix_status_t status, pmix_info_t *info, size_t ninfo, void *cbdata,
                    pmix_release_cbfunc_t release_fn, void *release_cbdata)
{
    size_t i;
    (void)cbdata;
    pthread_mutex_lock(&mu);
    for (i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_GROUP_MEMBERSHIP)) {
            invite_members = info[i].value.data.darray->size;
        }
    }
    invite_rc = status;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
    if (NULL != release_fn) {
        release_fn(release_cbdata);
    }
}

static int invite(pmix_proc_t *me)
{
    pmix_status_t codes[] = {PMIX_GROUP_INVITED, PMIX_GROUP_LEFT, PMIX_GROUP_INVITE_ACCEPTED, PMIX_GROUP_INVITE_DECLINED};
    pmix_proc_t procs[3], leader, wild;
    pmix_info_t tmo, *results = NULL;
    size_t nresults = 0;
    int timeout = 1;
    pmix_status_t rc;

    rc = PMIx_Register_event_handler(codes, 4, NULL, 0, on_event, NULL, NULL);
    printf("register %s\n", rc >= 0 ? "ok" : "FAIL");
    PMIX_LOAD_PROCID(&wild, me->nspace, PMIX_RANK_WILDCARD);
    printf("fence %d\n", PMIx_Fence(&wild, 1, NULL, 0));
    PMIX_LOAD_PROCID(&leader, me->nspace, 0);
    switch (me->rank) {
    case 0:
        PMIX_LOAD_PROCID(&procs[0], me->nspace, 1);
        PMIX_LOAD_PROCID(&procs[1], me->nspace, 2);
        rc = PMIx_Group_invite_nb("inv", procs, 2, NULL, 0, invited, NULL);
        printf("invite_nb %d\n", rc);
        pthread_mutex_lock(&mu);
        while (1 == invite_rc) {
            pthread_cond_wait(&cond, &mu);
        }
        pthread_mutex_unlock(&mu);
        printf("invite %d\n", invite_rc);
        printf("members %zu\n", invite_members);
        wait_for(&seen_accepted);
        wait_for(&seen_declined);
        wait_for(&seen_left);
        printf("left seen\n");
        printf("destruct %d\n", op_wait(PMIx_Group_destruct_nb("inv", NULL, 0, opcb, NULL)));
        break;
    case 1:
    case 2:
        wait_for(&seen_invited);
        if (1 == me->rank) {
            rc = op_wait(PMIx_Group_join_nb("inv", &inviter, PMIX_GROUP_ACCEPT, NULL, 0, infocb, NULL));
            printf("join %d\n", rc);
            printf("leave %d\n", op_wait(PMIx_Group_leave_nb("inv", NULL, 0, opcb, NULL)));
        } else {
            rc = PMIx_Group_join("inv", &inviter, PMIX_GROUP_DECLINE, NULL, 0, &results, &nresults);
            printf("join %d\n", rc);
            PMIX_INFO_FREE(results, nresults);
        }
        break;
    }
    if (0 == me->rank || 3 == me->rank) {
        PMIX_LOAD_PROCID(&procs[0], me->nspace, 0);
        PMIX_LOAD_PROCID(&procs[1], me->nspace, 2);
        PMIX_LOAD_PROCID(&procs[2], me->nspace, 3);
        PMIX_INFO_LOAD(&tmo, PMIX_TIMEOUT, &timeout, PMIX_INT);
        rc = PMIx_Group_construct("absent", procs, 3, &tmo, 1, &results, &nresults);
        printf("absent %d\n", rc);
    }
    printf("fence-end %d\n", PMIx_Fence(&wild, 1, NULL, 0));
    printf("finalize %d\n", PMIx_Finalize(NULL, 0));
    return 0;
}

static size_t cid_of(pmix_info_t *results, size_t n);

/* add: ranks 0 and 2 construct "grown" naming each other, rank 0 adding
 * ranks 1 and 3 (PMIX_GROUP_ADD_MEMBERS), which construct it with no
 * procs; all four get the group of four and a context id, then destruct
 * it. */
static int add(pmix_proc_t *me)
{
    pmix_proc_t procs[2];
    pmix_info_t info[2], *results = NULL;
    pmix_data_array_t darray;
    pmix_proc_t *added;
    size_t nresults = 0, members = 0, i, ninfo = 1;
    pmix_status_t rc;

    PMIX_INFO_LOAD(&info[0], PMIX_GROUP_ASSIGN_CONTEXT_ID, NULL, PMIX_BOOL);
    if (0 == me->rank || 2 == me->rank) {
        PMIX_LOAD_PROCID(&procs[0], me->nspace, 0);
        PMIX_LOAD_PROCID(&procs[1], me->nspace, 2);
        if (0 == me->rank) {
            PMIX_DATA_ARRAY_CONSTRUCT(&darray, 2, PMIX_PROC);
            added = (pmix_proc_t *)darray.array;
            PMIX_LOAD_PROCID(&added[0], me->nspace, 1);
            PMIX_LOAD_PROCID(&added[1], me->nspace, 3);
            PMIX_INFO_LOAD(&info[1], PMIX_GROUP_ADD_MEMBERS, &darray, PMIX_DATA_ARRAY);
            PMIX_DATA_ARRAY_DESTRUCT(&darray);
            ninfo = 2;
        }
        rc = PMIx_Group_construct("grown", procs, 2, info, ninfo, &results, &nresults);
    } else {
        rc = PMIx_Group_construct("grown", NULL, 0, info, 1, &results, &nresults);
    }
    printf("construct %d\n", rc);
    printf("cid %s\n", 0 != cid_of(results, nresults) ? "set" : "none");
    for (i = 0; i < nresults; i++) {
        if (PMIX_CHECK_KEY(&results[i], PMIX_GROUP_MEMBERSHIP)) {
            members = results[i].value.data.darray->size;
        }
    }
    printf("members %zu\n", members);
    PMIX_INFO_FREE(results, nresults);
    for (i = 0; i < ninfo; i++) {
        PMIX_INFO_DESTRUCT(&info[i]);
    }
    printf("destruct %d\n", PMIx_Group_destruct("grown", NULL, 0));
    printf("finalize %d\n", PMIx_Finalize(NULL, 0));
    return 0;
}

static int across(pmix_proc_t *me, const char *nsa, const char *nsb)
{
    pmix_proc_t procs[2], p;
    pmix_info_t info, *results = NULL;
    pmix_value_t v, *got = NULL;
    size_t nresults = 0, members = 0, i;
    pmix_status_t rc;
    char eps[256] = "";

    v.type = PMIX_UINT32;
    v.data.uint32 = 100 + me->rank + (NULL != strstr(nsb, me->nspace) ? 10 : 0);
    rc = PMIx_Put(PMIX_GLOBAL, "ep", &v);
    if (PMIX_SUCCESS == rc) {
        rc = PMIx_Commit();
    }
    printf("put %d\n", rc);
    PMIX_LOAD_PROCID(&procs[0], nsa, PMIX_RANK_WILDCARD);
    PMIX_LOAD_PROCID(&procs[1], nsb, PMIX_RANK_WILDCARD);
    PMIX_INFO_LOAD(&info, PMIX_GROUP_ASSIGN_CONTEXT_ID, NULL, PMIX_BOOL);
    rc = PMIx_Group_construct("xgrp", procs, 2, &info, 1, &results, &nresults);
    printf("construct %d\n", rc);
    printf("cid %zu\n", cid_of(results, nresults));
    for (i = 0; i < nresults; i++) {
        if (PMIX_CHECK_KEY(&results[i], PMIX_GROUP_MEMBERSHIP)) {
            members = results[i].value.data.darray->size;
        }
    }
    printf("members %zu\n", members);
    PMIX_INFO_FREE(results, nresults);
    for (i = 0; i < members; i++) {
        PMIX_LOAD_PROCID(&p, "xgrp", i);
        rc = PMIx_Get(&p, "ep", NULL, 0, &got);
        snprintf(eps + strlen(eps), sizeof(eps) - strlen(eps), "%s%u", 0 == i ? "" : ",",
                 PMIX_SUCCESS == rc ? got->data.uint32 : 0);
        if (PMIX_SUCCESS == rc) {
            PMIX_VALUE_RELEASE(got);
        }
    }
    printf("eps %s\n", eps);
    printf("destruct %d\n", PMIx_Group_destruct("xgrp", NULL, 0));
    printf("finalize %d\n", PMIx_Finalize(NULL, 0));
    return 0;
}

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

int main(int argc, char **argv)
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
    if (2 == argc && 0 == strcmp(argv[1], "invite")) {
        return invite(&me);
    }
    if (2 == argc && 0 == strcmp(argv[1], "add")) {
        return add(&me);
    }
    if (4 == argc && 0 == strcmp(argv[1], "across")) {
        return across(&me, argv[2], argv[3]);
    }
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
        if (2 == me.rank) {
            /* the _nb form */
            rc = op_wait(PMIx_Group_construct_nb("ourgroup", procs, 3, info, 1, infocb, NULL));
            printf("construct %d\n", rc);
            printf("cid %s\n", 0 != nb_cid ? "set" : "none");
        } else {
            rc = PMIx_Group_construct("ourgroup", procs, 3, info, 1, &results, &nresults);
            printf("construct %d\n", rc);
            printf("cid %s\n", 0 != cid_of(results, nresults) ? "set" : "none");
            PMIX_INFO_FREE(results, nresults);
        }
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
