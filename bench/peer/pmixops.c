/* pmixops.c: the PMIx side of "pmixbus bench peer". The same binary runs
 * under mpirun (OpenPMIx) and under pmixbus run (pmixbus's libpmix.so.2,
 * first on LD_LIBRARY_PATH); rank 0 prints what it measured as
 * "<name> <nanoseconds>" lines.
 *
 *   fence K    a put of 64 bytes, commit, the first fence with
 *              PMIX_COLLECT_DATA (timed: fence_data; and every rank's
 *              realtime call and return: fence_data_in.R, fence_data_out.R), a get of the next
 *              rank's value, one warm-up fence, then K fences without data
 *              (the median: fence; every rank's own median: fence.R)
 *   notify K   two ranks on one node (range LOCAL: mpirun delivers no
 *              client event of a wider range): rank 1 answers every ping
 *              with a pong from its handler; rank 0 sends a ping K times,
 *              each after the last answer (the median round trip:
 *              notify_rtt). Both codes are the job's own (jobcode).
 *              "notify K nocache": both events PMIX_EVENT_DO_NOT_CACHE.
 *   fanout K   rank 0 sends K events of range LOCAL back to back; every
 *              other rank counts them and joins a closing fence once it
 *              has all (fanout_took: rank 0's first send to the fence's
 *              end; fanout_got.R: what rank R received)
 *   group K    after a fence, K PMIx_Group_construct of every rank with
 *              PMIX_GROUP_ASSIGN_CONTEXT_ID, each followed by its destruct
 *              (the median construct, rank 0's view: group); where the
 *              host has no groups (mpirun of Open MPI 4.1: ORTE), rank 0
 *              prints "group_unsupported 1" instead
 *   lines K    rank 0 writes K lines "t <realtime ns>", 5 ms apart
 *   idle K     after Init and a fence, rank 0 prints its threads, its peak
 *              RSS (VmHWM, kB) and the context switches of its threads
 *              other than the main one while it sleeps K ms, scaled to 10 s:
 *              "threads N", "rss_kb N", "idle_switches N" (not times)
 */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pmix.h>

static long long now(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

static long long median(long long *v, long n)
{
    qsort(v, n, sizeof *v, cmp);
    return v[(n - 1) / 2];
}

static void die(const char *what, pmix_status_t rc)
{
    fprintf(stderr, "pmixops: %s: %s\n", what, PMIx_Error_string(rc));
    exit(1);
}

static pmix_proc_t me;

static void fence(long k)
{
    pmix_proc_t wild, peer;
    pmix_info_t info;
    pmix_value_t val, *got = NULL;
    pmix_status_t rc;
    char buf[64];
    uint32_t size;
    long long t, in, out, *took = calloc(k, sizeof *took);
    bool collect = true;

    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    if (PMIX_SUCCESS != (rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &got)))
        die("get PMIX_JOB_SIZE", rc);
    size = got->data.uint32;
    PMIX_VALUE_RELEASE(got);
    memset(buf, 'x', sizeof buf - 1);
    buf[sizeof buf - 1] = '\0';
    val.type = PMIX_STRING;
    val.data.string = buf;
    if (PMIX_SUCCESS != (rc = PMIx_Put(PMIX_GLOBAL, "peer.bench", &val)))
        die("put", rc);
    if (PMIX_SUCCESS != (rc = PMIx_Commit()))
        die("commit", rc);
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    in = now(CLOCK_REALTIME);
    t = now(CLOCK_MONOTONIC);
    if (PMIX_SUCCESS != (rc = PMIx_Fence(&wild, 1, &info, 1)))
        die("fence with data", rc);
    t = now(CLOCK_MONOTONIC) - t;
    out = now(CLOCK_REALTIME);
    /* Every rank: when it called and when it returned (the realtime
     * clock, one machine), so that the fence is also timed from the last
     * rank's call, without the launch's spread. */
    printf("fence_data_in.%u %lld\nfence_data_out.%u %lld\n", me.rank, in, me.rank, out);
    PMIX_LOAD_PROCID(&peer, me.nspace, (me.rank + 1) % size);
    if (PMIX_SUCCESS != (rc = PMIx_Get(&peer, "peer.bench", NULL, 0, &got)))
        die("get of the next rank's value", rc);
    PMIX_VALUE_RELEASE(got);
    if (0 == me.rank)
        printf("fence_data %lld\n", t);
    if (PMIX_SUCCESS != (rc = PMIx_Fence(NULL, 0, NULL, 0)))
        die("warm-up fence", rc);
    for (long i = 0; i < k; i++) {
        t = now(CLOCK_MONOTONIC);
        if (PMIX_SUCCESS != (rc = PMIx_Fence(NULL, 0, NULL, 0)))
            die("fence", rc);
        took[i] = now(CLOCK_MONOTONIC) - t;
    }
    t = median(took, k);
    if (0 == me.rank)
        printf("fence %lld\n", t);
    printf("fence.%u %lld\n", me.rank, t);
    free(took);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static long answers;

static void ignore(pmix_status_t status, void *cbdata)
{
    (void)status;
    (void)cbdata;
}

/* jobcode is a code of this job's own, from its nspace, counted down from
 * base: an agent that runs job after job replays the events of earlier
 * runs still in the node's cache to a new registration of their code (as
 * a long-lived OpenPMIx server would), which no measurement here must
 * take for its own. */
static pmix_status_t jobcode(pmix_status_t base)
{
    unsigned h = 5381;
    for (const char *c = me.nspace; *c; c++)
        h = h * 33 + (unsigned char)*c;
    return base - (pmix_status_t)(h % 1000);
}

static pmix_status_t ping_code, pong_code;
/* nocache: notify's events carry PMIX_EVENT_DO_NOT_CACHE ("notify K
 * nocache"), so no store is on their path. */
static pmix_info_t nocache_info[1];
static size_t nnocache;

static void pong(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                 pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id; (void)code; (void)src; (void)info; (void)ninfo; (void)results; (void)nresults;
    PMIx_Notify_event(pong_code, NULL, PMIX_RANGE_LOCAL, nnocache ? nocache_info : NULL, nnocache, ignore, NULL);
    cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void answer(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                   pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id; (void)code; (void)info; (void)ninfo; (void)results; (void)nresults;
    pthread_mutex_lock(&mu);
    if (NULL != src && PMIX_CHECK_NSPACE(src->nspace, me.nspace))
        answers++;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
    cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void notify(long k)
{
    pmix_status_t code, rc;
    long long t, *took = calloc(k, sizeof *took);

    ping_code = jobcode(-5000);
    pong_code = ping_code - 1000;
    code = 0 == me.rank ? pong_code : ping_code;
    if (PMIX_SUCCESS != (rc = PMIx_Register_event_handler(&code, 1, NULL, 0, 0 == me.rank ? answer : pong, NULL, NULL)))
        die("register", rc);
    /* Both handlers are in place before the first event. */
    if (PMIX_SUCCESS != (rc = PMIx_Fence(NULL, 0, NULL, 0)))
        die("fence", rc);
    if (0 == me.rank) {
        for (long i = 0; i < k; i++) {
            t = now(CLOCK_MONOTONIC);
            if (PMIX_SUCCESS != (rc = PMIx_Notify_event(ping_code, NULL, PMIX_RANGE_LOCAL, nnocache ? nocache_info : NULL, nnocache, NULL, NULL)))
                die("notify", rc);
            pthread_mutex_lock(&mu);
            while (answers <= i)
                pthread_cond_wait(&cond, &mu);
            pthread_mutex_unlock(&mu);
            took[i] = now(CLOCK_MONOTONIC) - t;
        }
        printf("notify_rtt %lld\n", median(took, k));
    }
    if (PMIX_SUCCESS != (rc = PMIx_Fence(NULL, 0, NULL, 0)))
        die("closing fence", rc);
    free(took);
}

static long received;

static void count(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                  pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id; (void)code; (void)info; (void)ninfo; (void)results; (void)nresults;
    pthread_mutex_lock(&mu);
    if (NULL != src && PMIX_CHECK_NSPACE(src->nspace, me.nspace))
        received++;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
    cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

/* fanout: rank 0 sends K events of range LOCAL as fast as the library
 * takes them; every other rank counts them in its handler and, once it
 * has all K (or after 30 s without a new one), joins a closing fence.
 * Rank 0 prints the time from its first send to the fence's end
 * (fanout_took) and each rank what it received (fanout_got.R). */
static void fanout(long k)
{
    pmix_status_t code = jobcode(-4000), rc;
    long long t = 0;
    struct timespec until;

    if (0 != me.rank && PMIX_SUCCESS != (rc = PMIx_Register_event_handler(&code, 1, NULL, 0, count, NULL, NULL)))
        die("register", rc);
    /* Every handler is in place before the first event. */
    if (PMIX_SUCCESS != (rc = PMIx_Fence(NULL, 0, NULL, 0)))
        die("fence", rc);
    if (0 == me.rank) {
        t = now(CLOCK_MONOTONIC);
        for (long i = 0; i < k; i++)
            if (PMIX_SUCCESS != (rc = PMIx_Notify_event(code, NULL, PMIX_RANGE_LOCAL, NULL, 0, NULL, NULL)))
                die("notify", rc);
    } else {
        pthread_mutex_lock(&mu);
        while (received < k) {
            long seen = received;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 30;
            while (received == seen && 0 == pthread_cond_timedwait(&cond, &mu, &until))
                ;
            if (received == seen)
                break; /* 30 s and nothing new: the rest was lost */
        }
        pthread_mutex_unlock(&mu);
    }
    if (PMIX_SUCCESS != (rc = PMIx_Fence(NULL, 0, NULL, 0)))
        die("closing fence", rc);
    if (0 == me.rank)
        printf("fanout_took %lld\n", now(CLOCK_MONOTONIC) - t);
    else
        printf("fanout_got.%u %ld\n", me.rank, received);
}

/* status reads a "Name:  value" line of a /proc status file, or -1. */
static long status(const char *path, const char *name)
{
    char line[256];
    size_t n = strlen(name);
    long v = -1;
    FILE *f = fopen(path, "r");

    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (0 == strncmp(line, name, n) && ':' == line[n]) {
            v = atol(line + n + 1);
            break;
        }
    fclose(f);
    return v;
}

/* switches sums the context switches of the process's threads but the
 * main one. */
static long switches(void)
{
    char path[300];
    long sum = 0;
    struct dirent *e;
    DIR *d = opendir("/proc/self/task");

    if (!d)
        return -1;
    while ((e = readdir(d))) {
        if ('.' == e->d_name[0] || atol(e->d_name) == (long)getpid())
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        sum += status(path, "voluntary_ctxt_switches") + status(path, "nonvoluntary_ctxt_switches");
    }
    closedir(d);
    return sum;
}

static void idle(long ms)
{
    pmix_status_t rc;
    long before;

    if (PMIX_SUCCESS != (rc = PMIx_Fence(NULL, 0, NULL, 0)))
        die("fence", rc);
    if (0 != me.rank)
        return;
    before = switches();
    usleep(ms * 1000);
    printf("idle_switches %ld\n", (switches() - before) * 10000 / ms);
    printf("threads %ld\nrss_kb %ld\n", status("/proc/self/status", "Threads"), status("/proc/self/status", "VmHWM"));
}

static void group(long k)
{
    pmix_proc_t wild;
    pmix_info_t info, *results = NULL;
    pmix_status_t rc;
    size_t nresults = 0;
    char name[32];
    long long t, *took = calloc(k, sizeof *took);

    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    if (PMIX_SUCCESS != (rc = PMIx_Fence(NULL, 0, NULL, 0)))
        die("fence", rc);
    PMIX_INFO_LOAD(&info, PMIX_GROUP_ASSIGN_CONTEXT_ID, NULL, PMIX_BOOL);
    for (long i = 0; i < k; i++) {
        snprintf(name, sizeof name, "bench.%ld", i);
        t = now(CLOCK_MONOTONIC);
        rc = PMIx_Group_construct(name, &wild, 1, &info, 1, &results, &nresults);
        took[i] = now(CLOCK_MONOTONIC) - t;
        if (PMIX_ERR_NOT_SUPPORTED == rc && 0 == i) {
            if (0 == me.rank)
                printf("group_unsupported 1\n");
            free(took);
            return;
        }
        if (PMIX_SUCCESS != rc)
            die("group construct", rc);
        PMIX_INFO_FREE(results, nresults);
        if (PMIX_SUCCESS != (rc = PMIx_Group_destruct(name, NULL, 0)))
            die("group destruct", rc);
    }
    if (0 == me.rank)
        printf("group %lld\n", median(took, k));
    free(took);
}

static void lines(long k)
{
    if (0 != me.rank)
        return;
    for (long i = 0; i < k; i++) {
        printf("t %lld\n", now(CLOCK_REALTIME));
        fflush(stdout);
        usleep(5000);
    }
}

int main(int argc, char **argv)
{
    pmix_status_t rc;
    long k;

    if (argc < 3) {
        fprintf(stderr, "usage: pmixops fence|notify|fanout|lines|idle|group K\n");
        return 2;
    }
    k = atol(argv[2]);
    if (k < 1) {
        fprintf(stderr, "pmixops: K must be at least 1\n");
        return 2;
    }
    if (PMIX_SUCCESS != (rc = PMIx_Init(&me, NULL, 0)))
        die("init", rc);
    if (0 == strcmp(argv[1], "fence"))
        fence(k);
    else if (0 == strcmp(argv[1], "notify")) {
        if (argc > 3 && 0 == strcmp(argv[3], "nocache")) {
            bool yes = true;
            PMIX_INFO_LOAD(&nocache_info[0], PMIX_EVENT_DO_NOT_CACHE, &yes, PMIX_BOOL);
            nnocache = 1;
        }
        notify(k);
    }
    else if (0 == strcmp(argv[1], "fanout"))
        fanout(k);
    else if (0 == strcmp(argv[1], "lines"))
        lines(k);
    else if (0 == strcmp(argv[1], "group"))
        group(k);
    else if (0 == strcmp(argv[1], "idle"))
        idle(k);
    else {
        fprintf(stderr, "pmixops: unknown mode %s\n", argv[1]);
        return 2;
    }
    fflush(stdout);
    if (PMIX_SUCCESS != (rc = PMIx_Finalize(NULL, 0)))
        die("finalize", rc);
    return 0;
}
