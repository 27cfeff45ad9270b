/* nodefence.c: fences of a job whose ranks all run on one node, which
 * the library runs on the node's barrier in shared memory.
 *
 *   loop N: N fences, in turn without procs, with the own nspace's
 *           PMIX_RANK_WILDCARD, and with PMIX_COLLECT_DATA false (the
 *           barrier's forms), one with PMIX_COLLECT_DATA true halfway
 *           (the agent's path) and a PMIx_Fence_nb at the end (the agent
 *           arrives for it); prints "mapped M" (1 when the barrier's
 *           segment is mapped) and "fences 0", or the first failure;
 *   wait:   prints "ready", fences ("fence RC"), fences again ("after
 *           RC");
 *   idle:   prints "ready" and waits for its stdin's end;
 *   one:    one fence ("fence RC"), then "mapped M".
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pmix.h>

static int mapped(void)
{
    char line[512];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (NULL == f) {
        return -1;
    }
    while (NULL != fgets(line, sizeof line, f)) {
        found = found || NULL != strstr(line, "pmixbus-fence");
    }
    fclose(f);
    return found;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int nb_done;
static pmix_status_t nb_rc;

static void fenced(pmix_status_t status, void *cbdata)
{
    (void)cbdata;
    pthread_mutex_lock(&mu);
    nb_rc = status;
    nb_done = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
}

static pmix_status_t loop(const pmix_proc_t *me, long n)
{
    pmix_proc_t wild;
    pmix_info_t info;
    pmix_status_t rc;
    bool no = false, yes = true;
    PMIX_LOAD_PROCID(&wild, me->nspace, PMIX_RANK_WILDCARD);
    for (long i = 0; i < n; i++) {
        if (i == n / 2) {
            PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
            if (PMIX_SUCCESS != (rc = PMIx_Fence(NULL, 0, &info, 1))) {
                printf("fence with data %d\n", rc);
                return rc;
            }
        }
        switch (i % 3) {
        case 0:
            rc = PMIx_Fence(NULL, 0, NULL, 0);
            break;
        case 1:
            rc = PMIx_Fence(&wild, 1, NULL, 0);
            break;
        default:
            PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &no, PMIX_BOOL);
            rc = PMIx_Fence(NULL, 0, &info, 1);
        }
        if (PMIX_SUCCESS != rc) {
            printf("fence %ld: %d\n", i, rc);
            return rc;
        }
    }
    if (PMIX_SUCCESS != (rc = PMIx_Fence_nb(NULL, 0, NULL, 0, fenced, NULL))) {
        return rc;
    }
    pthread_mutex_lock(&mu);
    while (!nb_done) {
        pthread_cond_wait(&cond, &mu);
    }
    pthread_mutex_unlock(&mu);
    if (PMIX_SUCCESS != nb_rc) {
        printf("fence_nb %d\n", nb_rc);
    }
    return nb_rc;
}

int main(int argc, char **argv)
{
    pmix_proc_t me;
    pmix_status_t rc;
    char buf[64];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: nodefence loop N | wait | idle | one\n");
        return 2;
    }
    rc = PMIx_Init(&me, NULL, 0);
    printf("init %d\n", rc);
    if (PMIX_SUCCESS != rc) {
        return 1;
    }
    if (0 == strcmp(argv[1], "loop") && argc > 2) {
        rc = loop(&me, atol(argv[2]));
        printf("mapped %d\n", mapped());
        printf("fences %d\n", rc);
    } else if (0 == strcmp(argv[1], "wait")) {
        printf("ready\n");
        printf("fence %d\n", PMIx_Fence(NULL, 0, NULL, 0));
        printf("after %d\n", PMIx_Fence(NULL, 0, NULL, 0));
    } else if (0 == strcmp(argv[1], "idle")) {
        printf("ready\n");
        while (NULL != fgets(buf, sizeof buf, stdin)) {
        }
    } else if (0 == strcmp(argv[1], "one")) {
        printf("fence %d\n", PMIx_Fence(NULL, 0, NULL, 0));
        printf("mapped %d\n", mapped());
    }
    rc = PMIx_Finalize(NULL, 0);
    printf("finalize %d\n", rc);
    return 0;
}
