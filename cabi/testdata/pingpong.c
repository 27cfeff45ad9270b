/* pingpong.c measures notify→handler round trips between two processes:
 * "pong" answers every -3100 it receives with a -3101 from inside its
 * handler (non-blocking, as a handler must); "ping N" notifies -3100 N
 * times, each after the previous answer, and prints the mean round trip
 * in nanoseconds. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pmix.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static long answers;

static void ignore(pmix_status_t status, void *cbdata)
{
    (void)status;
    (void)cbdata;
}

static void pong(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                 pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id; (void)code; (void)src; (void)info; (void)ninfo; (void)results; (void)nresults;
    PMIx_Notify_event(-3101, NULL, PMIX_RANGE_NAMESPACE, NULL, 0, ignore, NULL);
    cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void answer(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                   pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id; (void)code; (void)src; (void)info; (void)ninfo; (void)results; (void)nresults;
    pthread_mutex_lock(&mu);
    answers++;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
    cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    pmix_proc_t me;
    pmix_status_t code;
    long i, n;
    double start;

    if (argc < 2 || PMIX_SUCCESS != PMIx_Init(&me, NULL, 0)) {
        fprintf(stderr, "usage: pingpong pong|ping N, launched by an agent\n");
        return 2;
    }
    if (0 == strcmp(argv[1], "pong")) {
        code = -3100;
        PMIx_Register_event_handler(&code, 1, NULL, 0, pong, NULL, NULL);
        printf("ready\n");
        fflush(stdout);
        getchar(); /* until the test closes standard input */
        PMIx_Finalize(NULL, 0);
        return 0;
    }
    n = argc > 2 ? atol(argv[2]) : 100;
    code = -3101;
    PMIx_Register_event_handler(&code, 1, NULL, 0, answer, NULL, NULL);
    start = now();
    for (i = 0; i < n; i++) {
        PMIx_Notify_event(-3100, NULL, PMIX_RANGE_NAMESPACE, NULL, 0, NULL, NULL);
        pthread_mutex_lock(&mu);
        while (answers <= i) {
            pthread_cond_wait(&cond, &mu);
        }
        pthread_mutex_unlock(&mu);
    }
    printf("rtt_ns %.0f\n", (now() - start) / n);
    PMIx_Finalize(NULL, 0);
    return 0;
}
