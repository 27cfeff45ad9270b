/* abort.c: "watch" waits for PMIX_ERR_PROC_REQUESTED_ABORT and prints who
 * raised it and why; "abort" calls PMIx_Abort(3, "bye", NULL, 0), which
 * must not return; "tell" aborts rank 0 only, and goes on.
 * "job RANK STATUS self|all|exit" is for a launched job: every rank
 * registers for the abort event and fences; then RANK aborts itself only
 * (self), its whole job (all), or finalizes and exits with STATUS (exit),
 * while the others wait for the event (self, all) or just finalize. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pmix.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int seen;

static void onabort(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                    pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    size_t i;
    const char *text = "";
    (void)id; (void)results; (void)nresults;
    for (i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_TEXT_MESSAGE) && PMIX_STRING == info[i].value.type) {
            text = info[i].value.data.string;
        }
    }
    pthread_mutex_lock(&mu);
    printf("event %d from %s.%u text=%s\n", code, src->nspace, src->rank, text);
    fflush(stdout);
    seen = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
    cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static int wait_event(void)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 30;
    pthread_mutex_lock(&mu);
    while (!seen && 0 == pthread_cond_timedwait(&cond, &mu, &dl)) {
    }
    pthread_mutex_unlock(&mu);
    if (!seen) {
        printf("FAIL no abort event\n");
        return 1;
    }
    return 0;
}

/* job runs the "job" mode in a launched job. */
static int job(const pmix_proc_t *me, pmix_rank_t rank, int status, const char *how)
{
    pmix_status_t rc, code = PMIX_ERR_PROC_REQUESTED_ABORT;

    rc = PMIx_Register_event_handler(&code, 1, NULL, 0, onabort, NULL, NULL);
    if (rc < 0) {
        printf("FAIL register: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    if (0 == me->rank) {
        printf("library %s\n", PMIx_Get_version());
        fflush(stdout);
    }
    /* every handler is in place, and the line above out, before anyone aborts */
    rc = PMIx_Fence(NULL, 0, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL fence: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    if (me->rank == rank && 0 == strcmp(how, "exit")) {
        PMIx_Finalize(NULL, 0);
        return status;
    }
    if (me->rank == rank) {
        rc = 0 == strcmp(how, "self") ? PMIx_Abort(status, "bye", (pmix_proc_t *)me, 1)
                                      : PMIx_Abort(status, "bye", NULL, 0);
        printf("FAIL PMIx_Abort returned %d\n", rc);
        return 1;
    }
    if (0 != strcmp(how, "exit") && 0 != wait_event()) {
        return 1;
    }
    rc = PMIx_Finalize(NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL finalize: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    pmix_proc_t me;
    pmix_status_t rc, code = PMIX_ERR_PROC_REQUESTED_ABORT;

    if (!(argc == 2 || (argc == 5 && 0 == strcmp(argv[1], "job")))) {
        fprintf(stderr, "usage: abort watch|abort|tell|job RANK STATUS self|all|exit\n");
        return 2;
    }
    rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    if (0 == strcmp(argv[1], "job")) {
        return job(&me, (pmix_rank_t)atoi(argv[2]), atoi(argv[3]), argv[4]);
    }
    if (0 == strcmp(argv[1], "abort")) {
        rc = PMIx_Abort(3, "bye", NULL, 0);
        printf("FAIL PMIx_Abort returned %d\n", rc);
        return 1;
    }
    if (0 == strcmp(argv[1], "tell")) {
        /* an abort of rank 0 only: the caller goes on */
        pmix_proc_t other;
        PMIX_LOAD_PROCID(&other, me.nspace, 0);
        rc = PMIx_Abort(3, "you", &other, 1);
        printf("abort-returned %d\n", rc);
        PMIx_Finalize(NULL, 0);
        return 0;
    }
    rc = PMIx_Register_event_handler(&code, 1, NULL, 0, onabort, NULL, NULL);
    if (rc < 0) {
        printf("FAIL register: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    if (0 != wait_event()) {
        return 1;
    }
    PMIx_Finalize(NULL, 0);
    return 0;
}
