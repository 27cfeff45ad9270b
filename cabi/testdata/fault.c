/* fault.c: what OpenPMIx's examples/fault.c and hybrid.c ask of events.
 * Every rank Inits declaring a programming model and registers for
 * PMIX_MODEL_DECLARED after Init (it must still hear of its own
 * declaration, once), deregisters a reference never handed out (the
 * callback must still come, with PMIX_ERR_NOT_FOUND), registers for
 * PMIX_ERR_PROC_ABORTED and PMIX_EVENT_JOB_END and fences. Then rank 0
 * exits with status 1 without finalizing; in a job run with
 * --continuous the others must hear of it under PMIX_ERR_PROC_ABORTED
 * (bounded wait: FAIL after 30 s) and finalize, printing "survived".
 * Failures print FAIL lines and exit 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pmix.h>

#include "check.h"
#include "waitcb.h"

static pthread_mutex_t evmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t evcond = PTHREAD_COND_INITIALIZER;
static int models, aborted;
static char model_name[64];
static pmix_rank_t affected = PMIX_RANK_UNDEF;

static void model_cb(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[], size_t ninfo,
                     pmix_info_t results[], size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    size_t i;
    (void)id, (void)source, (void)results, (void)nresults;
    pthread_mutex_lock(&evmu);
    if (PMIX_MODEL_DECLARED == status) {
        models++;
        for (i = 0; i < ninfo; i++) {
            if (PMIX_CHECK_KEY(&info[i], PMIX_PROGRAMMING_MODEL) && PMIX_STRING == info[i].value.type) {
                snprintf(model_name, sizeof(model_name), "%s", info[i].value.data.string);
            }
        }
    }
    pthread_cond_broadcast(&evcond);
    pthread_mutex_unlock(&evmu);
    if (NULL != cbfunc) {
        cbfunc(PMIX_SUCCESS, NULL, 0, NULL, NULL, cbdata);
    }
}

static void fault_cb(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[], size_t ninfo,
                     pmix_info_t results[], size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    size_t i;
    (void)id, (void)source, (void)results, (void)nresults;
    pthread_mutex_lock(&evmu);
    if (PMIX_ERR_PROC_ABORTED == status) {
        aborted++;
        for (i = 0; i < ninfo; i++) {
            if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC) && PMIX_PROC == info[i].value.type) {
                affected = info[i].value.data.proc->rank;
            }
        }
    }
    pthread_cond_broadcast(&evcond);
    pthread_mutex_unlock(&evmu);
    if (NULL != cbfunc) {
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
    }
}

/* await waits up to secs for *n to be at least want. */
static int await(int *n, int want, int secs)
{
    struct timespec until;
    int ok;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += secs;
    pthread_mutex_lock(&evmu);
    while (*n < want && 0 == pthread_cond_timedwait(&evcond, &evmu, &until)) {
    }
    ok = *n >= want;
    pthread_mutex_unlock(&evmu);
    return ok;
}

int main(void)
{
    pmix_proc_t me, all;
    pmix_info_t init[4], reg;
    pmix_status_t rc, model = PMIX_MODEL_DECLARED, codes[2] = {PMIX_ERR_PROC_ABORTED, PMIX_EVENT_JOB_END};

    PMIX_INFO_LOAD(&init[0], PMIX_PROGRAMMING_MODEL, "cabi-test-model", PMIX_STRING);
    PMIX_INFO_LOAD(&init[1], PMIX_MODEL_LIBRARY_NAME, "cabi-test", PMIX_STRING);
    PMIX_INFO_LOAD(&init[2], PMIX_MODEL_LIBRARY_VERSION, "1.0", PMIX_STRING);
    PMIX_INFO_LOAD(&init[3], PMIX_THREADING_MODEL, "pthreads", PMIX_STRING);
    rc = PMIx_Init(&me, init, 4);
    for (int i = 0; i < 4; i++) {
        PMIX_INFO_DESTRUCT(&init[i]);
    }
    if (PMIX_SUCCESS != rc) {
        printf("FAIL PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    rc = PMIx_Register_event_handler(&model, 1, NULL, 0, model_cb, NULL, NULL);
    CHECK(rc >= 0, "registering for PMIX_MODEL_DECLARED: %s", PMIx_Error_string(rc));
    CHECK(await(&models, 1, 10), "no PMIX_MODEL_DECLARED");
    CHECK(0 == strcmp(model_name, "cabi-test-model"), "PMIX_MODEL_DECLARED's model: %s", model_name);

    /* A reference never handed out: the callback comes all the same. */
    rc = completed(PMIx_Deregister_event_handler(12345, opcb, NULL));
    CHECK(PMIX_ERR_NOT_FOUND == rc, "deregistering an unknown reference: %s", PMIx_Error_string(rc));
    rc = PMIx_Deregister_event_handler(12345, NULL, NULL);
    CHECK(PMIX_ERR_NOT_FOUND == rc, "deregistering an unknown reference, blocking: %s", PMIx_Error_string(rc));

    PMIX_INFO_LOAD(&reg, PMIX_NSPACE, me.nspace, PMIX_STRING);
    rc = PMIx_Register_event_handler(codes, 2, &reg, 1, fault_cb, NULL, NULL);
    CHECK(rc >= 0, "registering for the faults: %s", PMIx_Error_string(rc));
    PMIX_INFO_DESTRUCT(&reg);
    PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
    rc = PMIx_Fence(&all, 1, NULL, 0);
    CHECK(PMIX_SUCCESS == rc, "PMIx_Fence: %s", PMIx_Error_string(rc));
    pthread_mutex_lock(&evmu);
    CHECK(1 == models, "PMIX_MODEL_DECLARED heard %d times", models);
    pthread_mutex_unlock(&evmu);
    if (0 == me.rank) {
        fflush(stdout);
        _exit(failed ? 2 : 1);
    }
    CHECK(await(&aborted, 1, 30), "rank %u: no PMIX_ERR_PROC_ABORTED", me.rank);
    CHECK(0 == affected, "PMIX_ERR_PROC_ABORTED's affected rank: %u", affected);
    rc = PMIx_Finalize(NULL, 0);
    CHECK(PMIX_SUCCESS == rc, "PMIx_Finalize: %s", PMIx_Error_string(rc));
    if (!failed) {
        printf("survived\n");
    }
    return failed;
}
