/*
 * query.c — PMIx_Query_info (+_nb). The keys the library answers itself,
 * also before PMIx_Init and in a singleton, as the standard allows for
 * them (OpenPMIx's abi_no_init.c): PMIX_QUERY_STABLE_ABI_VERSION and
 * PMIX_QUERY_PROVISIONAL_ABI_VERSION, "0.0" as OpenPMIx 4.2.2 answers.
 * Any other query goes to the agent in a query frame, one entry per key,
 * its value the query's qualifiers; the agent answers what it knows
 * (docs/cabi.md) and, as OpenPMIx, PMIX_ERR_NOT_FOUND when it knows none
 * of the keys, PMIX_QUERY_PARTIAL_SUCCESS with the answers when some.
 */
#include <stdlib.h>
#include <string.h>

#include "conn.h"

#define ABI_VERSION "0.0"

static int is_local(const char *key)
{
    return 0 == strncmp(key, PMIX_QUERY_STABLE_ABI_VERSION, PMIX_MAX_KEYLEN) ||
           0 == strncmp(key, PMIX_QUERY_PROVISIONAL_ABI_VERSION, PMIX_MAX_KEYLEN);
}

/* all_local reports whether every key of the queries is answered here;
 * -1 for a query without keys. */
static int all_local(const pmix_query_t *q, size_t n)
{
    size_t i, k, keys = 0;
    for (i = 0; i < n; i++) {
        for (k = 0; NULL != q[i].keys && NULL != q[i].keys[k]; k++) {
            keys++;
            if (!is_local(q[i].keys[k])) {
                return 0;
            }
        }
    }
    return 0 == keys ? -1 : 1;
}

static pmix_status_t answer_local(const pmix_query_t *q, size_t n, pmix_info_t **out, size_t *nout)
{
    size_t i, k, m = 0;
    pmix_info_t *info;
    for (i = 0; i < n; i++) {
        for (k = 0; NULL != q[i].keys[k]; k++) {
            m++;
        }
    }
    info = calloc(m, sizeof(*info));
    if (NULL == info) {
        return PMIX_ERR_NOMEM;
    }
    m = 0;
    for (i = 0; i < n; i++) {
        for (k = 0; NULL != q[i].keys[k]; k++) {
            PMIx_Info_load(&info[m++], q[i].keys[k], ABI_VERSION, PMIX_STRING);
        }
    }
    *out = info;
    *nout = m;
    return PMIX_SUCCESS;
}

struct query_args {
    const pmix_query_t *q;
    size_t n;
};

/* build_query writes one info per key asked, its value the query's
 * qualifiers (an info array, borrowed: nothing is copied). */
static void build_query(struct fw *f, void *arg)
{
    struct query_args *a = arg;
    size_t i, k, m = 0;
    pmix_info_t *in;
    pmix_data_array_t *quals = calloc(a->n, sizeof(*quals));
    for (i = 0; i < a->n; i++) {
        for (k = 0; NULL != a->q[i].keys[k]; k++) {
            m++;
        }
    }
    in = calloc(m, sizeof(*in));
    fw_key(f, "in");
    if (NULL == quals || NULL == in) {
        f->w->oom = 1;
        wb_infos(f->w, NULL, 0);
        free(quals);
        free(in);
        return;
    }
    m = 0;
    for (i = 0; i < a->n; i++) {
        quals[i].type = PMIX_INFO;
        quals[i].array = a->q[i].qualifiers;
        quals[i].size = NULL == a->q[i].qualifiers ? 0 : a->q[i].nqual;
        for (k = 0; NULL != a->q[i].keys[k]; k++) {
            PMIX_LOAD_KEY(in[m].key, a->q[i].keys[k]);
            in[m].value.type = PMIX_DATA_ARRAY;
            in[m].value.data.darray = &quals[i];
            m++;
        }
    }
    wb_infos(f->w, in, m);
    free(in); /* shallow: the qualifiers are the caller's */
    free(quals);
}

struct local_answer {
    pmix_info_cbfunc_t cb;
    void *cbdata;
    pmix_status_t st;
    pmix_info_t *info;
    size_t n;
};

static void run_local(struct work *w)
{
    struct local_answer *a = w->p;
    info_deliver(a->cb, a->st, a->info, a->n, a->cbdata);
    free(a);
}

static pmix_status_t check(const pmix_query_t *queries, size_t nqueries)
{
    size_t i;
    if (NULL == queries || 0 == nqueries) {
        return PMIX_ERR_BAD_PARAM;
    }
    for (i = 0; i < nqueries; i++) {
        if (NULL == queries[i].keys || (NULL == queries[i].qualifiers && 0 < queries[i].nqual)) {
            return PMIX_ERR_BAD_PARAM;
        }
    }
    return all_local(queries, nqueries) < 0 ? PMIX_ERR_BAD_PARAM : PMIX_SUCCESS;
}

PMIX_EXPORT pmix_status_t PMIx_Query_info(pmix_query_t queries[], size_t nqueries, pmix_info_t **results,
                                          size_t *nresults)
{
    struct query_args a = {queries, nqueries};
    pmix_status_t rc;
    if (NULL == results || NULL == nresults) {
        return PMIX_ERR_BAD_PARAM;
    }
    *results = NULL;
    *nresults = 0;
    if (PMIX_SUCCESS != (rc = check(queries, nqueries))) {
        return rc;
    }
    if (all_local(queries, nqueries)) {
        return answer_local(queries, nqueries, results, nresults);
    }
    return info_request_wait(T_QUERY, build_query, &a, results, nresults);
}

PMIX_EXPORT pmix_status_t PMIx_Query_info_nb(pmix_query_t queries[], size_t nqueries, pmix_info_cbfunc_t cbfunc,
                                             void *cbdata)
{
    struct query_args a = {queries, nqueries};
    pmix_status_t rc;
    if (NULL == cbfunc) {
        return PMIX_ERR_BAD_PARAM;
    }
    if (PMIX_SUCCESS != (rc = check(queries, nqueries))) {
        return rc;
    }
    if (all_local(queries, nqueries)) {
        /* called back from the progress thread when there is one, never
         * from inside this call */
        struct local_answer *la = calloc(1, sizeof(*la));
        struct work *w;
        if (NULL == la) {
            return PMIX_ERR_NOMEM;
        }
        la->cb = cbfunc;
        la->cbdata = cbdata;
        la->st = answer_local(queries, nqueries, &la->info, &la->n);
        pthread_mutex_lock(&lib.mu);
        if (0 == lib.inits || !lib.running) {
            /* before Init no thread runs: call back now, as OpenPMIx
             * does for what it answers without its progress thread */
            pthread_mutex_unlock(&lib.mu);
            info_deliver(cbfunc, la->st, la->info, la->n, cbdata);
            free(la);
            return PMIX_SUCCESS;
        }
        pthread_mutex_unlock(&lib.mu);
        w = work_new(run_local);
        if (NULL == w) {
            PMIx_Info_free(la->info, la->n);
            free(la);
            return PMIX_ERR_NOMEM;
        }
        w->p = la;
        enqueue(w);
        return PMIX_SUCCESS;
    }
    return info_request(T_QUERY, build_query, &a, cbfunc, cbdata);
}
