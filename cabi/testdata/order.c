/* order.c registers seven handlers for -3200 with every placement
 * attribute, notifies the event to its own namespace (the agent runs the
 * chain), deregisters one and notifies again; it prints each chain's
 * order as "chain N: names". With the argument "local" the events are
 * PROC_LOCAL: the library runs the chain itself, in the same order. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <pmix.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static char chain[256];
static int ended;
static pmix_data_range_t range = PMIX_RANGE_NAMESPACE;

static void handler(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                    pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    static const char names[] = "abcdefg";
    (void)code; (void)src; (void)info; (void)ninfo; (void)results; (void)nresults;
    pthread_mutex_lock(&mu);
    strncat(chain, &names[id], 1);
    pthread_mutex_unlock(&mu);
    cbfunc(PMIX_EVENT_NO_ACTION_TAKEN, NULL, 0, NULL, NULL, cbdata);
}

/* the last handler of every chain, registered first and LAST */
static void last(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                 pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    handler(id, code, src, info, ninfo, results, nresults, cbfunc, cbdata);
    pthread_mutex_lock(&mu);
    ended++;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
}

static size_t reg(const char *name, const char *attr, const char *target, pmix_notification_fn_t fn)
{
    pmix_status_t code = -3200, rc;
    pmix_info_t *info;
    bool yes = true;
    size_t n = NULL == attr ? 1 : 2;
    PMIX_INFO_CREATE(info, n);
    PMIX_INFO_LOAD(&info[0], PMIX_EVENT_HDLR_NAME, name, PMIX_STRING);
    if (NULL != attr && NULL != target) {
        PMIX_INFO_LOAD(&info[1], attr, target, PMIX_STRING);
    } else if (NULL != attr) {
        PMIX_INFO_LOAD(&info[1], attr, &yes, PMIX_BOOL);
    }
    rc = PMIx_Register_event_handler(&code, 1, info, n, fn, NULL, NULL);
    PMIX_INFO_FREE(info, n);
    if (rc < 0) {
        printf("FAIL register %s: %s\n", name, PMIx_Error_string(rc));
    }
    return (size_t)rc;
}

static void run_chain(int n)
{
    pthread_mutex_lock(&mu);
    chain[0] = '\0';
    pthread_mutex_unlock(&mu);
    PMIx_Notify_event(-3200, NULL, range, NULL, 0, NULL, NULL);
    pthread_mutex_lock(&mu);
    while (ended < n) {
        pthread_cond_wait(&cond, &mu);
    }
    printf("chain %d: %s\n", n, chain);
    pthread_mutex_unlock(&mu);
}

int main(int argc, char **argv)
{
    pmix_proc_t me;
    size_t g;
    if (argc > 1 && 0 == strcmp(argv[1], "local")) {
        range = PMIX_RANGE_PROC_LOCAL;
    }
    if (PMIX_SUCCESS != PMIx_Init(&me, NULL, 0)) {
        printf("FAIL init\n");
        return 1;
    }
    /* references count from 0 in registration order: the handler's
     * reference is its letter's index */
    reg("a", PMIX_EVENT_HDLR_LAST, NULL, last);
    reg("b", NULL, NULL, handler);
    reg("c", NULL, NULL, handler);
    reg("d", PMIX_EVENT_HDLR_FIRST, NULL, handler);
    reg("e", PMIX_EVENT_HDLR_BEFORE, "b", handler);
    reg("f", PMIX_EVENT_HDLR_AFTER, "c", handler);
    g = reg("g", PMIX_EVENT_HDLR_APPEND, NULL, handler);
    run_chain(1);
    PMIx_Deregister_event_handler(g, NULL, NULL);
    run_chain(2);
    PMIx_Finalize(NULL, 0);
    return 0;
}
