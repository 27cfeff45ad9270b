/* process.c: what the library does inside the application's process.
 *
 *   forkinit   fork before PMIx_Init: the child initialises, reads its job
 *              size, fences and finalizes; then the parent does the same
 *   signals    a SIGPROF handler without SA_ONSTACK on a 1 ms ITIMER_PROF
 *              and a SIGCHLD handler with children exiting continuously,
 *              while a second thread calls PMIx (Get from the agent,
 *              Put/Commit) for a while: nothing may crash
 *   idle       after Init and a Fence, the threads of the process, and the
 *              context switches of every thread but the caller's over one
 *              second of idleness (from /proc/self/task/N/status)
 *   forkafter  fork after PMIx_Init: what the child can do
 *   rss        after Init and a Fence: the threads and the peak RSS (for
 *              docs/PERFORMANCE.md's comparison with OpenPMIx)
 *   abort      a handler notifies PMIX_ERR_PROC_REQUESTED_ABORT PROC_LOCAL
 *              before it completes: the abort runs after its chain
 *   stall      a PROC_LOCAL chain whose first handler never completes,
 *              with PMIX_EVENT_ACTION_TIMEOUT 1: the next runs after it
 *   mask       the signal mask of the caller and of the library's thread
 *              are the caller's, and no handler is installed
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pmix.h>

static pmix_proc_t me;

static int job_size(void)
{
    pmix_proc_t wild;
    pmix_value_t *v = NULL;
    int n = -1;
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    if (PMIX_SUCCESS == PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v) && NULL != v) {
        n = (int)v->data.uint32;
        PMIX_VALUE_RELEASE(v);
    }
    return n;
}

static int init_use_finalize(const char *who)
{
    pmix_status_t rc = PMIx_Init(&me, NULL, 0), frc;
    int size;
    if (PMIX_SUCCESS != rc) {
        printf("%s init %d\n", who, rc);
        return 1;
    }
    size = job_size();
    frc = PMIx_Fence(NULL, 0, NULL, 0);
    rc = PMIx_Finalize(NULL, 0);
    printf("%s init 0 size %d fence %d finalize %d\n", who, size, frc, rc);
    return 0;
}

static int forkinit(void)
{
    int st;
    pid_t pid;
    fflush(stdout);
    pid = fork();
    if (0 == pid) {
        _exit(init_use_finalize("child"));
    }
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || 0 != WEXITSTATUS(st)) {
        printf("FAIL child %d\n", st);
        return 1;
    }
    return init_use_finalize("parent");
}

/* ---- signals ---- */

static volatile sig_atomic_t profs, chlds, stop;

static void on_prof(int sig)
{
    (void)sig;
    profs++;
}

static void on_chld(int sig)
{
    int saved = errno;
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
        chlds++;
    }
    errno = saved;
}

static void *forker(void *arg)
{
    (void)arg;
    while (!stop) {
        pid_t pid = fork();
        if (0 == pid) {
            _exit(0);
        }
        if (pid < 0) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

static int calls, failures;

static void *caller(void *arg)
{
    pmix_proc_t peer = me;
    pmix_value_t val, *got;
    int32_t i = 0;
    (void)arg;
    peer.rank = me.rank;
    while (!stop) {
        char key[32];
        pmix_status_t rc;
        snprintf(key, sizeof(key), "sig.%d", (int)(i % 8));
        PMIX_VALUE_LOAD(&val, &i, PMIX_INT32);
        rc = PMIx_Put(PMIX_GLOBAL, key, &val);
        PMIX_VALUE_DESTRUCT(&val);
        if (PMIX_SUCCESS == rc) {
            rc = PMIx_Commit();
        }
        if (PMIX_SUCCESS != rc) {
            failures++;
        }
        got = NULL;
        /* a key the agent is asked for: a round trip on the socket */
        rc = PMIx_Get(&peer, "sig.none", NULL, 0, &got);
        if (PMIX_ERR_NOT_FOUND != rc) {
            failures++;
        }
        if (NULL != got) {
            PMIX_VALUE_RELEASE(got);
        }
        if (job_size() < 1) {
            failures++;
        }
        calls++;
        i++;
    }
    return NULL;
}

static int signals(int ms)
{
    struct sigaction sa;
    struct itimerval it = {{0, 1000}, {0, 1000}};
    pthread_t ct, ft;
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    pmix_status_t rc;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_prof;
    sa.sa_flags = SA_RESTART; /* no SA_ONSTACK, as many profilers */
    sigaction(SIGPROF, &sa, NULL);
    sa.sa_handler = on_chld;
    sa.sa_flags = 0; /* no SA_RESTART either: every call sees EINTR */
    sigaction(SIGCHLD, &sa, NULL);
    setitimer(ITIMER_PROF, &it, NULL);
    rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL init %d\n", rc);
        return 1;
    }
    pthread_create(&ct, NULL, caller, NULL);
    pthread_create(&ft, NULL, forker, NULL);
    while (0 != nanosleep(&ts, &ts)) {
    }
    stop = 1;
    pthread_join(ct, NULL);
    pthread_join(ft, NULL);
    rc = PMIx_Finalize(NULL, 0);
    memset(&it, 0, sizeof(it));
    setitimer(ITIMER_PROF, &it, NULL);
    printf("signals calls %d failures %d finalize %d (SIGPROF %d, SIGCHLD %d)\n", calls, failures, rc, (int)profs,
           (int)chlds);
    return failures > 0 || PMIX_SUCCESS != rc;
}

/* ---- idle ---- */

struct task {
    long tid;
    long switches;
};

static int tasks(struct task *t, int max)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    if (NULL == d) {
        return -1;
    }
    while (NULL != (e = readdir(d)) && n < max) {
        char path[300], line[256];
        FILE *f;
        if ('.' == e->d_name[0]) {
            continue;
        }
        t[n].tid = atol(e->d_name);
        t[n].switches = 0;
        snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
        f = fopen(path, "r");
        while (NULL != f && NULL != fgets(line, sizeof(line), f)) {
            long v;
            if (1 == sscanf(line, "voluntary_ctxt_switches: %ld", &v) ||
                1 == sscanf(line, "nonvoluntary_ctxt_switches: %ld", &v)) {
                t[n].switches += v;
            }
        }
        if (NULL != f) {
            fclose(f);
        }
        n++;
    }
    closedir(d);
    return n;
}

static int idle(int ms)
{
    struct task before[64], after[64];
    int nb, na, i, j;
    long others = 0;
    long self = (long)gettid();
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc || PMIX_SUCCESS != (rc = PMIx_Fence(NULL, 0, NULL, 0))) {
        printf("FAIL init/fence %d\n", rc);
        return 1;
    }
    {
        /* let the fence's reply settle: the library's thread goes back
         * to its poll after waking the caller */
        struct timespec settle = {0, 100000000L};
        nanosleep(&settle, NULL);
    }
    nb = tasks(before, 64);
    while (0 != nanosleep(&ts, &ts)) {
    }
    na = tasks(after, 64);
    for (i = 0; i < na; i++) {
        if (after[i].tid == self) {
            continue;
        }
        for (j = 0; j < nb; j++) {
            if (before[j].tid == after[i].tid) {
                others += after[i].switches - before[j].switches;
            }
        }
    }
    printf("threads %d idle-switches %ld\n", na, others);
    rc = PMIx_Finalize(NULL, 0);
    printf("threads-after-finalize %d finalize %d\n", tasks(after, 64), rc);
    return 0;
}

static int rss(void)
{
    struct task t[64];
    struct rusage ru;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc || PMIX_SUCCESS != (rc = PMIx_Fence(NULL, 0, NULL, 0))) {
        printf("FAIL init/fence %d\n", rc);
        return 1;
    }
    /* VmHWM, the peak of this image: getrusage's ru_maxrss keeps the
     * launcher's across fork and exec */
    {
        FILE *f = fopen("/proc/self/status", "r");
        char line[256];
        long hwm = -1;
        while (NULL != f && NULL != fgets(line, sizeof(line), f)) {
            sscanf(line, "VmHWM: %ld", &hwm);
        }
        if (NULL != f) {
            fclose(f);
        }
        getrusage(RUSAGE_SELF, &ru);
        printf("rank %u threads %d peak-rss-kb %ld\n", me.rank, tasks(t, 64), hwm);
    }
    return PMIX_SUCCESS != PMIx_Finalize(NULL, 0);
}

/* ---- an abort asked for by a handler ---- */

static pthread_mutex_t amu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t acond = PTHREAD_COND_INITIALIZER;
static int aborted;

static void asking(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                   pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    pmix_status_t rc;
    (void)id; (void)src; (void)info; (void)ninfo; (void)results; (void)nresults;
    rc = PMIx_Notify_event(PMIX_ERR_PROC_REQUESTED_ABORT, NULL, PMIX_RANGE_PROC_LOCAL, NULL, 0, NULL, NULL);
    printf("first %d asks: %d\n", code, rc);
    cbfunc(PMIX_EVENT_NO_ACTION_TAKEN, NULL, 0, NULL, NULL, cbdata);
}

static void second(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                   pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    size_t i;
    int asked = 0;
    (void)id; (void)src; (void)info; (void)ninfo;
    for (i = 0; i < nresults; i++) {
        asked = asked || 0 == strcmp(results[i].key, "pmixbus.evabort");
    }
    printf("second %d (abort in results %d)\n", code, asked);
    cbfunc(PMIX_EVENT_NO_ACTION_TAKEN, NULL, 0, NULL, NULL, cbdata);
}

static void on_abort(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                     pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id; (void)src; (void)info; (void)ninfo; (void)results; (void)nresults;
    pthread_mutex_lock(&amu);
    printf("abort event %d\n", code);
    aborted++;
    pthread_cond_broadcast(&acond);
    pthread_mutex_unlock(&amu);
    cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static int abort_mode(void)
{
    pmix_status_t code = -3300, ab = PMIX_ERR_PROC_REQUESTED_ABORT, rc;
    pmix_info_t first;
    bool yes = true;
    rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL init %d\n", rc);
        return 1;
    }
    PMIX_INFO_LOAD(&first, PMIX_EVENT_HDLR_FIRST, &yes, PMIX_BOOL);
    PMIx_Register_event_handler(&code, 1, &first, 1, asking, NULL, NULL);
    PMIX_INFO_DESTRUCT(&first);
    PMIx_Register_event_handler(&code, 1, NULL, 0, second, NULL, NULL);
    PMIx_Register_event_handler(&ab, 1, NULL, 0, on_abort, NULL, NULL);
    /* the library's own chain */
    rc = PMIx_Notify_event(code, NULL, PMIX_RANGE_PROC_LOCAL, NULL, 0, NULL, NULL);
    pthread_mutex_lock(&amu);
    while (aborted < 1) {
        pthread_cond_wait(&acond, &amu);
    }
    pthread_mutex_unlock(&amu);
    printf("notified %d\n", rc);
    printf("finalize %d\n", PMIx_Finalize(NULL, 0));
    return 0;
}

/* ---- a handler that never completes ---- */

static void stalls(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                   pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id; (void)src; (void)info; (void)ninfo; (void)results; (void)nresults; (void)cbfunc; (void)cbdata;
    printf("stalling %d\n", code);
}

static int stall(void)
{
    pmix_status_t code = -3301, rc;
    pmix_info_t attrs[2];
    bool yes = true;
    int secs = 1;
    struct timespec t0, t1;
    rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL init %d\n", rc);
        return 1;
    }
    PMIX_INFO_LOAD(&attrs[0], PMIX_EVENT_HDLR_FIRST, &yes, PMIX_BOOL);
    PMIX_INFO_LOAD(&attrs[1], PMIX_EVENT_ACTION_TIMEOUT, &secs, PMIX_INT);
    PMIx_Register_event_handler(&code, 1, attrs, 2, stalls, NULL, NULL);
    PMIx_Register_event_handler(&code, 1, NULL, 0, second, NULL, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = PMIx_Notify_event(code, NULL, PMIX_RANGE_PROC_LOCAL, NULL, 0, NULL, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("notified %d after the timeout %d\n", rc, (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 >= 1000);
    printf("finalize %d\n", PMIx_Finalize(NULL, 0));
    return 0;
}

/* ---- fork after Init ---- */

static int forkafter(void)
{
    int st;
    pid_t pid;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL init %d\n", rc);
        return 1;
    }
    fflush(stdout);
    pid = fork();
    if (0 == pid) {
        pmix_value_t val, *got = NULL;
        int32_t one = 1;
        pmix_status_t grc, prc, frc;
        int size = job_size(); /* answered from what Init cached */
        PMIX_VALUE_LOAD(&val, &one, PMIX_INT32);
        prc = PMIx_Put(PMIX_GLOBAL, "fork.key", &val);
        PMIX_VALUE_DESTRUCT(&val);
        grc = PMIx_Get(&me, "fork.key", NULL, 0, &got);
        if (NULL != got) {
            PMIX_VALUE_RELEASE(got);
        }
        frc = PMIx_Fence(NULL, 0, NULL, 0);
        {
            int initialized = PMIx_Initialized();
            pmix_status_t crc = PMIx_Commit();
            pmix_status_t finrc = PMIx_Finalize(NULL, 0);
            printf("child initialized %d size %d put %d get %d fence %d commit %d finalize %d\n", initialized,
                   size, prc, grc, frc, crc, finrc);
        }
        fflush(stdout);
        _exit(0);
    }
    waitpid(pid, &st, 0);
    rc = PMIx_Fence(NULL, 0, NULL, 0);
    st = job_size();
    printf("parent fence %d size %d finalize %d\n", rc, st, PMIx_Finalize(NULL, 0));
    return 0;
}

/* ---- the signal state ---- */

static int handlers_installed(void)
{
    int sig, n = 0;
    for (sig = 1; sig < NSIG; sig++) {
        struct sigaction sa;
        if (SIGKILL == sig || SIGSTOP == sig || 0 != sigaction(sig, NULL, &sa)) {
            continue;
        }
        n += SIG_DFL != sa.sa_handler && SIG_IGN != sa.sa_handler;
    }
    return n;
}

static int same_mask(const sigset_t *a, const sigset_t *b)
{
    int sig;
    for (sig = 1; sig < NSIG; sig++) {
        if (sigismember(a, sig) != sigismember(b, sig)) {
            return 0;
        }
    }
    return 1;
}

static void *mask_of_thread(void *arg)
{
    sigset_t *out = arg;
    pthread_sigmask(SIG_SETMASK, NULL, out);
    return NULL;
}

static int mask(void)
{
    sigset_t before, after, block;
    pmix_status_t rc;
    int handlers;
    sigemptyset(&before);
    sigemptyset(&after);
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &block, NULL);
    pthread_sigmask(SIG_SETMASK, NULL, &before);
    handlers = handlers_installed(); /* the sanitizers' own, if any */
    rc = PMIx_Init(&me, NULL, 0);
    pthread_sigmask(SIG_SETMASK, NULL, &after);
    printf("init %d handlers-added %d mask-same %d\n", rc, handlers_installed() - handlers, same_mask(&before, &after));
    {
        pthread_t t;
        sigset_t m;
        sigemptyset(&m);
        pthread_create(&t, NULL, mask_of_thread, &m);
        pthread_join(t, NULL);
        printf("new-thread-mask-same %d\n", same_mask(&before, &m));
    }
    printf("finalize %d\n", PMIx_Finalize(NULL, 0));
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int ms = argc > 2 ? atoi(argv[2]) : 200;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (0 == strcmp(mode, "forkinit")) return forkinit();
    if (0 == strcmp(mode, "signals")) return signals(ms);
    if (0 == strcmp(mode, "idle")) return idle(ms);
    if (0 == strcmp(mode, "forkafter")) return forkafter();
    if (0 == strcmp(mode, "mask")) return mask();
    if (0 == strcmp(mode, "rss")) return rss();
    if (0 == strcmp(mode, "abort")) return abort_mode();
    if (0 == strcmp(mode, "stall")) return stall();
    fprintf(stderr, "usage: process forkinit|signals [ms]|idle [ms]|forkafter|mask\n");
    return 2;
}
