/* getbench.c <threads> <calls>: each of the threads calls PMIx_Get of the
 * job-level pmix.job.size (PMIX_RANK_WILDCARD) calls/threads times and
 * releases each value; prints the wall-clock nanoseconds per call as
 * "get_ns N", or "FAIL ..." on a failed call. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <pmix.h>

static pmix_proc_t wildcard;
static long per_thread;
static volatile int failed;

static void *getter(void *arg)
{
    long i;
    pmix_value_t *v;
    (void)arg;
    for (i = 0; i < per_thread; i++) {
        if (PMIX_SUCCESS != PMIx_Get(&wildcard, PMIX_JOB_SIZE, NULL, 0, &v) || PMIX_UINT32 != v->type) {
            failed = 1;
            return NULL;
        }
        PMIX_VALUE_RELEASE(v);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    pmix_proc_t me;
    pthread_t tids[64];
    struct timespec t0, t1;
    int n, i;
    pmix_status_t rc;

    if (argc != 3 || (n = atoi(argv[1])) < 1 || n > 64) {
        fprintf(stderr, "usage: getbench threads(1-64) calls\n");
        return 2;
    }
    per_thread = (atol(argv[2]) + n - 1) / n;
    if (PMIX_SUCCESS != (rc = PMIx_Init(&me, NULL, 0))) {
        printf("FAIL init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    PMIX_LOAD_PROCID(&wildcard, me.nspace, PMIX_RANK_WILDCARD);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (i = 0; i < n; i++) {
        pthread_create(&tids[i], NULL, getter, NULL);
    }
    for (i = 0; i < n; i++) {
        pthread_join(tids[i], NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (failed) {
        printf("FAIL get\n");
        return 1;
    }
    printf("get_ns %.1f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (double)(per_thread * n));
    PMIx_Finalize(NULL, 0);
    return 0;
}
