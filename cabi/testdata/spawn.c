/* spawn.c — PMIx_Spawn and PMIx_Spawn_nb from C. As a parent (no
 * PMIX_SPAWNED): rank 0 spawns argv[1] children of this program (on the
 * cluster argv[2] names, if any) and prints their nspace and size; then
 * PMIx_Spawn_nb of a program that does not exist, whose callback gets
 * PMIX_ERR_JOB_FAILED_TO_LAUNCH; then bad arguments. As a child: prints
 * its parent (PMIX_PARENT_ID) and PMIX_SPAWNED. */
#include <pmix.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#ifndef PMIXBUS_SPAWN_CLUSTER /* built against OpenPMIx's headers */
#define PMIXBUS_SPAWN_CLUSTER "pmixbus.spawn.cluster"
#endif

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int cb_done;

static void spawned(pmix_status_t status, pmix_nspace_t nspace, void *cbdata)
{
    (void)cbdata;
    pthread_mutex_lock(&mu);
    cb_done = 1;
    printf("spawn_nb %d nspace \"%s\"\n", status, nspace);
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

int main(int argc, char **argv)
{
    pmix_proc_t me, wild;
    pmix_value_t *v = NULL;
    pmix_status_t rc;
    CHECK(PMIX_SUCCESS == PMIx_Init(&me, NULL, 0), "init");
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    if (PMIX_SUCCESS == PMIx_Get(&wild, PMIX_SPAWNED, NULL, 0, &v) && v->data.flag) {
        pmix_value_t *p = NULL;
        PMIX_VALUE_RELEASE(v);
        rc = PMIx_Get(&wild, PMIX_PARENT_ID, NULL, 0, &p);
        CHECK(PMIX_SUCCESS == rc && PMIX_PROC == p->type, "get parent: %d", rc);
        if (PMIX_SUCCESS != rc) {
            return 1;
        }
        printf("child %u: spawned 1 parent %s.%u\n", me.rank, p->data.proc->nspace, p->data.proc->rank);
        PMIX_VALUE_RELEASE(p);
        CHECK(PMIX_SUCCESS == PMIx_Finalize(NULL, 0), "finalize");
        return failed;
    }
    if (0 == me.rank) {
        pmix_app_t app, bad;
        pmix_info_t info;
        pmix_nspace_t ns;
        char *cargv[] = {argv[0], NULL};
        int n = argc > 1 ? atoi(argv[1]) : 2;
        memset(&app, 0, sizeof(app));
        app.cmd = argv[0];
        app.argv = cargv;
        app.maxprocs = n;
        if (argc > 2) {
            PMIX_INFO_LOAD(&info, PMIXBUS_SPAWN_CLUSTER, argv[2], PMIX_STRING);
        }
        rc = PMIx_Spawn(argc > 2 ? &info : NULL, argc > 2 ? 1 : 0, &app, 1, ns);
        if (argc > 2) {
            PMIX_INFO_DESTRUCT(&info);
        }
        printf("spawn %d\n", rc);
        if (PMIX_SUCCESS == rc) {
            pmix_proc_t cw;
            printf("spawned %s\n", ns);
            PMIX_LOAD_PROCID(&cw, ns, PMIX_RANK_WILDCARD);
            rc = PMIx_Get(&cw, PMIX_JOB_SIZE, NULL, 0, &v);
            printf("child job size: %d %u\n", rc, PMIX_SUCCESS == rc ? v->data.uint32 : 0);
            if (PMIX_SUCCESS == rc) {
                PMIX_VALUE_RELEASE(v);
            }
            rc = PMIX_SUCCESS;
        }
        bad = app;
        bad.cmd = "/nonexistent/spawn-child";
        rc = PMIx_Spawn_nb(NULL, 0, &bad, 1, spawned, NULL);
        CHECK(PMIX_SUCCESS == rc, "spawn_nb: %d", rc);
        pthread_mutex_lock(&mu);
        while (PMIX_SUCCESS == rc && !cb_done) {
            pthread_cond_wait(&cv, &mu);
        }
        pthread_mutex_unlock(&mu);
        bad.maxprocs = 0;
        printf("maxprocs 0: %d\n", PMIx_Spawn(NULL, 0, &bad, 1, ns));
        printf("no apps: %d\n", PMIx_Spawn(NULL, 0, NULL, 0, ns));
        printf("nb without callback: %d\n", PMIx_Spawn_nb(NULL, 0, &app, 1, NULL, NULL));
    }
    CHECK(PMIX_SUCCESS == PMIx_Finalize(NULL, 0), "finalize");
    return failed;
}
