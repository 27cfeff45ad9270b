/* events.c: "listen" registers three handlers for -3001..-3003 (LAST,
 * FIRST, and one prepended by default, the last without blocking) and
 * prints each invocation until it has seen three events; "notify" notifies
 * the three events to its namespace ("notify global": to every cluster).
 * "job" is for a launched job: rank 0 notifies and the others listen, a
 * fence between their registrations and the notifications. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <pmix.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int events_done, registered;
static size_t middle_ref;

static void say(const char *fmt, const char *name, pmix_status_t code, const pmix_proc_t *src)
{
    pthread_mutex_lock(&mu);
    printf(fmt, name, code, src->nspace, src->rank);
    fflush(stdout);
    pthread_mutex_unlock(&mu);
}

static void never(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                  pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id; (void)code; (void)src; (void)info; (void)ninfo; (void)results; (void)nresults;
    cbfunc(PMIX_EVENT_NO_ACTION_TAKEN, NULL, 0, NULL, NULL, cbdata);
}

/* blocking_in_handler makes every other blocking call from a handler:
 * each returns PMIX_ERR_WOULD_BLOCK at once. */
static void blocking_in_handler(const pmix_proc_t *src)
{
    pmix_pdata_t pd;
    char *keys[] = {"from-handler", NULL};
    pmix_status_t code = -3999, rc[7];
    PMIX_PDATA_CONSTRUCT(&pd);
    PMIX_LOAD_KEY(pd.key, "any.key");
    rc[0] = PMIx_Lookup(&pd, 1, NULL, 0);
    PMIX_PDATA_DESTRUCT(&pd);
    rc[1] = PMIx_Unpublish(keys, NULL, 0);
    rc[2] = PMIx_Connect(src, 1, NULL, 0);
    rc[3] = PMIx_Disconnect(src, 1, NULL, 0);
    rc[4] = PMIx_Register_event_handler(&code, 1, NULL, 0, never, NULL, NULL);
    rc[5] = PMIx_Deregister_event_handler(0, NULL, NULL);
    rc[6] = PMIx_Notify_event(code, NULL, PMIX_RANGE_PROC_LOCAL, NULL, 0, NULL, NULL);
    pthread_mutex_lock(&mu);
    printf("lookup-in-handler %d\n", rc[0]);
    printf("unpublish-in-handler %d\n", rc[1]);
    printf("connect-in-handler %d\n", rc[2]);
    printf("disconnect-in-handler %d\n", rc[3]);
    printf("register-in-handler %d\n", rc[4]);
    printf("deregister-in-handler %d\n", rc[5]);
    printf("notify-in-handler %d\n", rc[6]);
    pthread_mutex_unlock(&mu);
}

static void first(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                  pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    pmix_info_t pub;
    pmix_status_t rc, grc, frc;
    pmix_value_t *v = NULL;
    (void)id; (void)info; (void)ninfo; (void)results; (void)nresults;
    say("event %s %d %s.%u\n", "first", code, src);
    /* a blocking call from a handler must not deadlock */
    PMIX_INFO_LOAD(&pub, "from-handler", "x", PMIX_STRING);
    rc = PMIx_Publish(&pub, 1);
    PMIX_INFO_DESTRUCT(&pub);
    grc = PMIx_Get(src, "any.key", NULL, 0, &v);
    frc = PMIx_Fence(NULL, 0, NULL, 0);
    pthread_mutex_lock(&mu);
    printf("publish-in-handler %d\n", rc);
    printf("get-in-handler %d\n", grc);
    printf("fence-in-handler %d\n", frc);
    pthread_mutex_unlock(&mu);
    blocking_in_handler(src);
    /* nested Init/Finalize only count, so they are fine here */
    rc = PMIx_Init(NULL, NULL, 0);
    pthread_mutex_lock(&mu);
    printf("init-in-handler %d\n", rc);
    printf("finalize-in-handler %d\n", PMIx_Finalize(NULL, 0));
    pthread_mutex_unlock(&mu);
    cbfunc(PMIX_EVENT_NO_ACTION_TAKEN, NULL, 0, NULL, NULL, cbdata);
}

struct later {
    pmix_event_notification_cbfunc_fn_t cbfunc;
    void *cbdata;
    pmix_info_t *results;
};

static void released(pmix_status_t status, void *cbdata)
{
    struct later *l = cbdata;
    (void)status;
    PMIX_INFO_FREE(l->results, 1);
    free(l);
}

static void *complete_later(void *arg)
{
    struct later *l = arg;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    l->cbfunc(PMIX_EVENT_PARTIAL_ACTION_TAKEN, l->results, 1, released, l, l->cbdata);
    return NULL;
}

static void middle(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                   pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    pthread_t th;
    struct later *l = malloc(sizeof(*l));
    bool yes = true;
    (void)info; (void)ninfo; (void)results; (void)nresults;
    say("event %s %d %s.%u\n", "middle", code, src);
    if (id != middle_ref) {
        printf("FAIL middle called with ref %zu, registered as %zu\n", id, middle_ref);
    }
    l->cbfunc = cbfunc;
    l->cbdata = cbdata;
    PMIX_INFO_CREATE(l->results, 1);
    PMIX_INFO_LOAD(&l->results[0], "middle.saw", &yes, PMIX_BOOL);
    /* complete from another thread, after returning */
    pthread_create(&th, NULL, complete_later, l);
    pthread_detach(th);
}

static void last(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                 pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    size_t i;
    const char *text = "";
    int saw = 0;
    (void)id;
    for (i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_TEXT_MESSAGE) && PMIX_STRING == info[i].value.type) {
            text = info[i].value.data.string;
        }
    }
    for (i = 0; i < nresults; i++) {
        if (PMIX_CHECK_KEY(&results[i], "middle.saw")) {
            saw = 1;
        }
    }
    say("event %s %d %s.%u", "last", code, src);
    pthread_mutex_lock(&mu);
    printf(" text=%s middle.saw=%d\n", text, saw);
    fflush(stdout);
    pthread_mutex_unlock(&mu);
    cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
    pthread_mutex_lock(&mu);
    events_done++;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
}

static void regcb(pmix_status_t status, size_t ref, void *cbdata)
{
    (void)cbdata;
    pthread_mutex_lock(&mu);
    if (PMIX_SUCCESS != status) {
        printf("FAIL register middle: %s\n", PMIx_Error_string(status));
    }
    middle_ref = ref;
    registered = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
}

static int wait_for(int *what, int n)
{
    struct timespec dl;
    int rc = 0;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 30;
    pthread_mutex_lock(&mu);
    while (*what < n && 0 == rc) {
        rc = pthread_cond_timedwait(&cond, &mu, &dl);
    }
    pthread_mutex_unlock(&mu);
    return *what >= n;
}

/* register_handlers registers the three handlers and waits until the
 * last has been. */
static int register_handlers(void)
{
    pmix_status_t codes[] = {-3001, -3002, -3003};
    pmix_info_t *info;
    pmix_status_t rc;
    bool yes = true;

    PMIX_INFO_CREATE(info, 2);
    PMIX_INFO_LOAD(&info[0], PMIX_EVENT_HDLR_NAME, "last", PMIX_STRING);
    PMIX_INFO_LOAD(&info[1], PMIX_EVENT_HDLR_LAST, &yes, PMIX_BOOL);
    rc = PMIx_Register_event_handler(codes, 3, info, 2, last, NULL, NULL);
    if (rc < 0) {
        printf("FAIL register last: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    PMIX_INFO_FREE(info, 2);

    PMIX_INFO_CREATE(info, 2);
    PMIX_INFO_LOAD(&info[0], PMIX_EVENT_HDLR_NAME, "first", PMIX_STRING);
    PMIX_INFO_LOAD(&info[1], PMIX_EVENT_HDLR_FIRST, &yes, PMIX_BOOL);
    rc = PMIx_Register_event_handler(codes, 3, info, 2, first, NULL, NULL);
    if (rc < 0) {
        printf("FAIL register first: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    PMIX_INFO_FREE(info, 2);

    PMIX_INFO_CREATE(info, 1);
    PMIX_INFO_LOAD(&info[0], PMIX_EVENT_HDLR_NAME, "middle", PMIX_STRING);
    rc = PMIx_Register_event_handler(codes, 3, info, 1, middle, regcb, NULL);
    PMIX_INFO_FREE(info, 1);
    if (PMIX_SUCCESS != rc || !wait_for(&registered, 1)) {
        printf("FAIL register middle: %d\n", rc);
        return 1;
    }
    return 0;
}

static int wait_events(void)
{
    if (!wait_for(&events_done, 3)) {
        printf("FAIL timed out with %d events\n", events_done);
        return 1;
    }
    return 0;
}

static int listen_events(void)
{
    if (0 != register_handlers()) {
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    return wait_events();
}

static int notify_events(pmix_data_range_t range);

/* job_events: the others' handlers are in place once the fence is done. */
static int job_events(const pmix_proc_t *me)
{
    pmix_status_t rc;
    if (0 != me->rank && 0 != register_handlers()) {
        return 1;
    }
    rc = PMIx_Fence(NULL, 0, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL fence: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    return 0 == me->rank ? notify_events(PMIX_RANGE_NAMESPACE) : wait_events();
}

static int notify_events(pmix_data_range_t range)
{
    pmix_status_t code;
    char text[16];
    pmix_info_t info;
    for (code = -3001; code >= -3003; code--) {
        pmix_status_t rc;
        snprintf(text, sizeof(text), "n%d", -code);
        PMIX_INFO_LOAD(&info, PMIX_EVENT_TEXT_MESSAGE, text, PMIX_STRING);
        rc = PMIx_Notify_event(code, NULL, range, &info, 1, NULL, NULL);
        PMIX_INFO_DESTRUCT(&info);
        if (PMIX_SUCCESS != rc) {
            printf("FAIL notify %d: %s\n", code, PMIx_Error_string(rc));
            return 1;
        }
    }
    printf("notified\n");
    return 0;
}

int main(int argc, char **argv)
{
    pmix_proc_t me;
    pmix_status_t rc;
    int failed;

    if (argc < 2) {
        fprintf(stderr, "usage: events listen|notify [global]|job\n");
        return 2;
    }
    rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    if (0 == strcmp(argv[1], "listen")) {
        failed = listen_events();
    } else if (0 == strcmp(argv[1], "job")) {
        failed = job_events(&me);
    } else {
        failed = notify_events(argc > 2 && 0 == strcmp(argv[2], "global") ? PMIX_RANGE_GLOBAL
                                                                          : PMIX_RANGE_NAMESPACE);
    }
    rc = PMIx_Finalize(NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL finalize: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    return failed;
}
