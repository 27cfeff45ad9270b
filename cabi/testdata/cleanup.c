/* cleanup.c registers files and directories under argv[1] for removal
 * with PMIx_Job_control (+_nb), as Open MPI 4.1 registers its session
 * directory, and checks what the library refuses. It runs as a singleton
 * (the cleanup is the process's own affair) and prints "name value"
 * lines; the test checks what is left under argv[1] once it exited. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pmix.h>

#include "check.h"
#include "waitcb.h"

static void infocb(pmix_status_t status, pmix_info_t *info, size_t ninfo, void *cbdata,
                   pmix_release_cbfunc_t release_fn, void *release_cbdata)
{
    (void)info; (void)ninfo; (void)cbdata;
    if (NULL != release_fn) {
        release_fn(release_cbdata);
    }
    signal_done(status);
}

static void touch(const char *path)
{
    FILE *f = fopen(path, "w");
    CHECK(NULL != f, "create %s", path);
    if (NULL != f) {
        fclose(f);
    }
}

int main(int argc, char **argv)
{
    char dir[1024], sub[1100], file[1200], lone[1100], kept[1100];
    pmix_proc_t me;
    pmix_info_t info[2];

    (void)opcb; /* waitcb.h's op callback: no op call here */
    if (argc != 2) {
        return 2;
    }
    snprintf(dir, sizeof dir, "%s/session", argv[1]);
    snprintf(sub, sizeof sub, "%s/1/0", dir);
    snprintf(lone, sizeof lone, "%s/lone", argv[1]);
    snprintf(kept, sizeof kept, "%s/kept", argv[1]);
    mkdir(dir, 0700);
    snprintf(file, sizeof file, "%s/1", dir);
    mkdir(file, 0700);
    mkdir(sub, 0700);
    snprintf(file, sizeof file, "%s/segment", sub);
    touch(file);
    touch(lone);
    touch(kept);

    /* As Open MPI loads it: a flag given as NULL is true. */
    PMIX_INFO_LOAD(&info[1], PMIX_CLEANUP_RECURSIVE, NULL, PMIX_BOOL);
    printf("null_bool %d\n", info[1].value.type == PMIX_BOOL && info[1].value.data.flag);

    PMIX_INFO_LOAD(&info[0], PMIX_REGISTER_CLEANUP, lone, PMIX_STRING);
    printf("before_init %d\n", PMIx_Job_control_nb(NULL, 0, info, 1, NULL, NULL));
    printf("init %d\n", PMIx_Init(&me, NULL, 0));
    printf("job_scope %d\n", PMIx_Job_control_nb(NULL, 0, info, 1, NULL, NULL));
    printf("blocking %d\n", PMIx_Job_control(&me, 1, info, 1, NULL, NULL));
    PMIX_INFO_DESTRUCT(&info[0]);

    PMIX_INFO_LOAD(&info[0], PMIX_REGISTER_CLEANUP_DIR, dir, PMIX_STRING);
    printf("nb %d\n", completed(PMIx_Job_control_nb(&me, 1, info, 2, infocb, NULL)));
    /* Open MPI 4.1 passes no callback */
    printf("nb_nocb %d\n", PMIx_Job_control_nb(&me, 1, info, 2, NULL, NULL));
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);

    /* a kill goes to the agent: a singleton has none (PMIX_ERR_UNREACH) */
    PMIX_INFO_LOAD(&info[0], PMIX_JOB_CTRL_KILL, NULL, PMIX_BOOL);
    printf("kill %d\n", PMIx_Job_control_nb(&me, 1, info, 1, NULL, NULL));
    PMIX_INFO_DESTRUCT(&info[0]);

    printf("present %d\n", 0 == access(file, F_OK));
    printf("finalize %d\n", PMIx_Finalize(NULL, 0));
    return failed;
}
