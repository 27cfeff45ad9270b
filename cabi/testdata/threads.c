/* threads.c: eight threads at once each initialise (nested), register a
 * handler for a code of their own, notify it PROC_LOCAL, check their
 * handler ran once, put, commit and get back a key of their own,
 * deregister and finalize — many times over; in the first rounds each
 * also publishes, looks up and unpublishes a key of its own. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include <pmix.h>

#define THREADS 8
#define ROUNDS 50
#define PUBLISH_ROUNDS 5

static int calls[THREADS];

static void handler(size_t id, pmix_status_t code, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
                    pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id; (void)src; (void)info; (void)ninfo; (void)results; (void)nresults;
    __atomic_fetch_add(&calls[-4000 - code], 1, __ATOMIC_SEQ_CST);
    cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

/* put_get puts round as the thread's key, commits, and reads it back. */
static int put_get(int me, int32_t round)
{
    char key[PMIX_MAX_KEYLEN + 1];
    pmix_value_t val, *got = NULL;
    pmix_proc_t self;
    pmix_status_t rc;
    int ok;
    snprintf(key, sizeof(key), "thr.key%d", me);
    PMIX_VALUE_LOAD(&val, &round, PMIX_INT32);
    rc = PMIx_Put(PMIX_GLOBAL, key, &val);
    PMIX_VALUE_DESTRUCT(&val);
    if (PMIX_SUCCESS == rc) {
        rc = PMIx_Commit();
    }
    if (PMIX_SUCCESS != rc) {
        printf("FAIL thread %d put/commit: %d\n", me, rc);
        return 1;
    }
    PMIx_Init(&self, NULL, 0); /* our own name */
    rc = PMIx_Get(&self, key, NULL, 0, &got);
    PMIx_Finalize(NULL, 0);
    ok = PMIX_SUCCESS == rc && NULL != got && PMIX_INT32 == got->type && round == got->data.int32;
    if (!ok) {
        printf("FAIL thread %d get %s: %d\n", me, key, rc);
    }
    if (NULL != got) {
        PMIX_VALUE_RELEASE(got);
    }
    return !ok;
}

/* publish_lookup publishes a key of the thread's, looks it up and
 * unpublishes it. */
static int publish_lookup(int me, int32_t round)
{
    char key[PMIX_MAX_KEYLEN + 1];
    char *keys[] = {key, NULL};
    pmix_info_t info;
    pmix_pdata_t pd;
    pmix_status_t rc;
    int ok;
    snprintf(key, sizeof(key), "thr.pub%d.%d", me, round);
    PMIX_INFO_LOAD(&info, key, &round, PMIX_INT32);
    rc = PMIx_Publish(&info, 1);
    PMIX_INFO_DESTRUCT(&info);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL thread %d publish: %d\n", me, rc);
        return 1;
    }
    PMIX_PDATA_CONSTRUCT(&pd);
    PMIX_LOAD_KEY(pd.key, key);
    rc = PMIx_Lookup(&pd, 1, NULL, 0);
    ok = PMIX_SUCCESS == rc && PMIX_INT32 == pd.value.type && round == pd.value.data.int32;
    PMIX_PDATA_DESTRUCT(&pd);
    if (!ok) {
        printf("FAIL thread %d lookup %s: %d\n", me, key, rc);
        return 1;
    }
    rc = PMIx_Unpublish(keys, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL thread %d unpublish: %d\n", me, rc);
        return 1;
    }
    return 0;
}

static void *work(void *arg)
{
    int me = (int)(long)arg, r;
    pmix_status_t code = -4000 - me;
    pmix_proc_t proc;
    for (r = 0; r < ROUNDS; r++) {
        pmix_status_t rc = PMIx_Init(&proc, NULL, 0);
        pmix_status_t ref;
        if (PMIX_SUCCESS != rc) {
            printf("FAIL thread %d init: %d\n", me, rc);
            return NULL;
        }
        ref = PMIx_Register_event_handler(&code, 1, NULL, 0, handler, NULL, NULL);
        if (ref < 0) {
            printf("FAIL thread %d register: %d\n", me, ref);
            return NULL;
        }
        rc = PMIx_Notify_event(code, NULL, PMIX_RANGE_PROC_LOCAL, NULL, 0, NULL, NULL);
        if (PMIX_SUCCESS != rc) {
            printf("FAIL thread %d notify: %d\n", me, rc);
        }
        put_get(me, r);
        if (r < PUBLISH_ROUNDS) {
            publish_lookup(me, r);
        }
        rc = PMIx_Deregister_event_handler((size_t)ref, NULL, NULL);
        if (PMIX_SUCCESS != rc) {
            printf("FAIL thread %d deregister: %d\n", me, rc);
        }
        if (r + 1 != __atomic_load_n(&calls[me], __ATOMIC_SEQ_CST)) {
            printf("FAIL thread %d: handler ran %d times after %d rounds\n", me, calls[me], r + 1);
        }
        PMIx_Finalize(NULL, 0);
    }
    return NULL;
}

int main(void)
{
    pthread_t th[THREADS];
    pmix_proc_t proc;
    long i;
    if (PMIX_SUCCESS != PMIx_Init(&proc, NULL, 0)) {
        printf("FAIL init\n");
        return 1;
    }
    for (i = 0; i < THREADS; i++) {
        pthread_create(&th[i], NULL, work, (void *)i);
    }
    for (i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    printf("finalize %d\n", PMIx_Finalize(NULL, 0));
    printf("initialized %d\n", PMIx_Initialized());
    return 0;
}
