/* threads.c: eight threads at once each initialise (nested), register a
 * handler for a code of their own, notify it PROC_LOCAL, check their
 * handler ran once, deregister and finalize — many times over. */
#include <pthread.h>
#include <stdio.h>

#include <pmix.h>

#define THREADS 8
#define ROUNDS 50

static int calls[THREADS];

static void handler(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                    pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id; (void)src; (void)info; (void)ninfo; (void)results; (void)nresults;
    __atomic_fetch_add(&calls[-4000 - code], 1, __ATOMIC_SEQ_CST);
    cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void *work(void *arg)
{
    int me = (int)(long)arg, r;
    pmix_status_t code = -4000 - me;
    pmix_proc_t proc;
    for (r = 0; r < ROUNDS; r++) {
        pmix_status_t rc = PMIx_Init(&proc, NULL, 0);
        pmix_status_t ref;
        if (PMIX_SUCCESS != rc) {
            printf("FAIL thread %d init: %d\n", me, rc);
            return NULL;
        }
        ref = PMIx_Register_event_handler(&code, 1, NULL, 0, handler, NULL, NULL);
        if (ref < 0) {
            printf("FAIL thread %d register: %d\n", me, ref);
            return NULL;
        }
        rc = PMIx_Notify_event(code, NULL, PMIX_RANGE_PROC_LOCAL, NULL, 0, NULL, NULL);
        if (PMIX_SUCCESS != rc) {
            printf("FAIL thread %d notify: %d\n", me, rc);
        }
        rc = PMIx_Deregister_event_handler((size_t)ref, NULL, NULL);
        if (PMIX_SUCCESS != rc) {
            printf("FAIL thread %d deregister: %d\n", me, rc);
        }
        if (r + 1 != __atomic_load_n(&calls[me], __ATOMIC_SEQ_CST)) {
            printf("FAIL thread %d: handler ran %d times after %d rounds\n", me, calls[me], r + 1);
        }
        PMIx_Finalize(NULL, 0);
    }
    return NULL;
}

int main(void)
{
    pthread_t th[THREADS];
    pmix_proc_t proc;
    long i;
    if (PMIX_SUCCESS != PMIx_Init(&proc, NULL, 0)) {
        printf("FAIL init\n");
        return 1;
    }
    for (i = 0; i < THREADS; i++) {
        pthread_create(&th[i], NULL, work, (void *)i);
    }
    for (i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    printf("finalize %d\n", PMIx_Finalize(NULL, 0));
    printf("initialized %d\n", PMIx_Initialized());
    return 0;
}
