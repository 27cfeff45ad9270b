/* lost.c: a default handler, registered without blocking, prints the
 * internal events the library raises when its connection ends; the
 * program ends when PMIX_ERR_LOST_CONNECTION came (or after 20 s). */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include <pmix.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int lost, registered;

static void handler(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                    pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id; (void)src; (void)info; (void)ninfo; (void)results; (void)nresults;
    pthread_mutex_lock(&mu);
    printf("event %d\n", code);
    lost = lost || PMIX_ERR_LOST_CONNECTION == code;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
    cbfunc(PMIX_SUCCESS, NULL, 0, NULL, NULL, cbdata);
}

static void regcb(pmix_status_t status, size_t ref, void *cbdata)
{
    (void)ref; (void)cbdata;
    pthread_mutex_lock(&mu);
    registered = PMIX_SUCCESS == status ? 1 : -1;
    printf("registered %d\n", registered); /* before any event: on the same thread */
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
}

int main(void)
{
    pmix_proc_t me;
    struct timespec dl;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("init %d\n", rc);
    rc = PMIx_Register_event_handler(NULL, 0, NULL, 0, handler, regcb, NULL);
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 20;
    pthread_mutex_lock(&mu);
    while (PMIX_SUCCESS == rc && !registered && 0 == pthread_cond_timedwait(&cond, &mu, &dl)) {
    }
    while (!lost && 0 == pthread_cond_timedwait(&cond, &mu, &dl)) {
    }
    pthread_mutex_unlock(&mu);
    /* the connection is gone: requests fail at once, Finalize succeeds */
    printf("fence %d\n", PMIx_Fence(NULL, 0, NULL, 0));
    printf("finalize %d\n", PMIx_Finalize(NULL, 0));
    return 0;
}
