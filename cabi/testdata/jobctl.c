/* jobctl.c: PMIx_Job_control as OpenPMIx's jctrl.c and simpjctrl.c use
 * it, in a job of four ranks over two agents. Every rank declares itself
 * preemptible with its checkpoint methods (informational: NULL targets,
 * _nb, must succeed) and fences. Then rank 0 signals rank 3 (SIGUSR1,
 * which rank 3 must see), kills rank 2 (PMIX_JOB_CTRL_KILL, blocking) and
 * terminates rank 1 (PMIX_JOB_CTRL_TERMINATE, _nb), and checks bad
 * requests: a checkpoint (PMIX_ERR_NOT_SUPPORTED), two actions at once
 * (PMIX_ERR_BAD_PARAM), a job it does not know (PMIX_ERR_NOT_FOUND).
 * Ranks 1 and 2 wait to be ended (FAIL after 30 s); 0 and 3 print
 * "controlled". Failures print FAIL lines and exit 1. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <pmix.h>

#include "check.h"
#include "waitcb.h"

static volatile sig_atomic_t usr1;

static void on_usr1(int sig)
{
    (void)sig;
    usr1 = 1;
}

static void infocb(pmix_status_t status, pmix_info_t *info, size_t ninfo, void *cbdata,
                   pmix_release_cbfunc_t release_fn, void *release_cbdata)
{
    (void)info, (void)ninfo, (void)cbdata;
    if (NULL != release_fn) {
        release_fn(release_cbdata);
    }
    signal_done(status);
}

static pmix_status_t control(pmix_proc_t *target, const char *key, int sig)
{
    pmix_info_t dir;
    pmix_status_t rc;
    bool yes = true;
    if (0 == strcmp(key, PMIX_JOB_CTRL_SIGNAL)) {
        PMIX_INFO_LOAD(&dir, key, &sig, PMIX_INT);
    } else {
        PMIX_INFO_LOAD(&dir, key, &yes, PMIX_BOOL);
    }
    rc = PMIx_Job_control(target, 1, &dir, 1, NULL, NULL);
    PMIX_INFO_DESTRUCT(&dir);
    return rc;
}

int main(void)
{
    pmix_proc_t me, all, target;
    pmix_info_t info[2], *method, two[2];
    pmix_data_array_t *darray;
    pmix_status_t rc;
    bool yes = true;
    int sig = SIGUSR2, i;

    (void)opcb;
    signal(SIGUSR1, on_usr1);
    rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    /* informational, as jctrl.c sends it */
    PMIX_INFO_LOAD(&info[0], PMIX_JOB_CTRL_PREEMPTIBLE, &yes, PMIX_BOOL);
    PMIX_LOAD_KEY(info[1].key, PMIX_JOB_CTRL_CHECKPOINT_METHOD);
    info[1].value.type = PMIX_DATA_ARRAY;
    PMIX_DATA_ARRAY_CREATE(darray, 2, PMIX_INFO);
    info[1].value.data.darray = darray;
    method = darray->array;
    PMIX_INFO_LOAD(&method[0], PMIX_JOB_CTRL_CHECKPOINT_SIGNAL, &sig, PMIX_INT);
    rc = PMIX_JCTRL_CHECKPOINT;
    PMIX_INFO_LOAD(&method[1], PMIX_JOB_CTRL_CHECKPOINT_EVENT, &rc, PMIX_STATUS);
    rc = completed(PMIx_Job_control_nb(NULL, 0, info, 2, infocb, NULL));
    CHECK(PMIX_SUCCESS == rc, "informational job control: %s", PMIx_Error_string(rc));
    PMIX_INFO_DESTRUCT(&info[0]);
    /* 4.2.2's header macros do not free a data array: free it here */
    PMIX_DATA_ARRAY_FREE(darray);
    info[1].value.type = PMIX_UNDEF;
    PMIX_INFO_DESTRUCT(&info[1]);

    PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
    rc = PMIx_Fence(&all, 1, NULL, 0);
    CHECK(PMIX_SUCCESS == rc, "PMIx_Fence: %s", PMIx_Error_string(rc));

    if (1 == me.rank || 2 == me.rank) {
        fflush(stdout);
        for (i = 0; i < 300; i++) {
            usleep(100000);
        }
        printf("FAIL rank %u was not ended\n", me.rank);
        return 1;
    }
    if (3 == me.rank) {
        for (i = 0; i < 300 && !usr1; i++) {
            usleep(100000);
        }
        CHECK(usr1, "rank 3 got no SIGUSR1");
    } else {
        PMIX_LOAD_PROCID(&target, me.nspace, 3);
        rc = control(&target, PMIX_JOB_CTRL_SIGNAL, SIGUSR1);
        CHECK(PMIX_SUCCESS == rc, "signalling rank 3: %s", PMIx_Error_string(rc));
        PMIX_LOAD_PROCID(&target, "", 2); /* an empty nspace is the caller's */
        rc = control(&target, PMIX_JOB_CTRL_KILL, 0);
        CHECK(PMIX_SUCCESS == rc, "killing rank 2: %s", PMIx_Error_string(rc));

        PMIX_LOAD_PROCID(&target, me.nspace, 1);
        PMIX_INFO_LOAD(&info[0], PMIX_JOB_CTRL_TERMINATE, &yes, PMIX_BOOL);
        rc = completed(PMIx_Job_control_nb(&target, 1, info, 1, infocb, NULL));
        CHECK(PMIX_SUCCESS == rc, "terminating rank 1: %s", PMIx_Error_string(rc));
        PMIX_INFO_DESTRUCT(&info[0]);

        rc = control(&target, PMIX_JOB_CTRL_CHECKPOINT, 0);
        CHECK(PMIX_ERR_NOT_SUPPORTED == rc, "a checkpoint: %s", PMIx_Error_string(rc));
        PMIX_INFO_LOAD(&two[0], PMIX_JOB_CTRL_KILL, &yes, PMIX_BOOL);
        PMIX_INFO_LOAD(&two[1], PMIX_JOB_CTRL_TERMINATE, &yes, PMIX_BOOL);
        rc = PMIx_Job_control(&target, 1, two, 2, NULL, NULL);
        CHECK(PMIX_ERR_BAD_PARAM == rc, "two actions: %s", PMIx_Error_string(rc));
        PMIX_LOAD_PROCID(&target, "no-such-job", 0);
        rc = PMIx_Job_control(&target, 1, two, 1, NULL, NULL);
        CHECK(PMIX_ERR_NOT_FOUND == rc, "an unknown job: %s", PMIx_Error_string(rc));
        PMIX_INFO_DESTRUCT(&two[0]);
        PMIX_INFO_DESTRUCT(&two[1]);
    }
    rc = PMIx_Finalize(NULL, 0);
    CHECK(PMIX_SUCCESS == rc, "PMIx_Finalize: %s", PMIx_Error_string(rc));
    if (!failed) {
        printf("controlled\n");
    }
    return failed;
}
