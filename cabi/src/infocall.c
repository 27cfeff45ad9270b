/*
 * infocall.c — requests whose reply carries info, the shape of
 * PMIx_Job_control and PMIx_Query_info: blocking, the info handed to the
 * caller; non-blocking, a pmix_info_cbfunc_t called from the progress
 * thread with the info and a release function that frees it.
 */
#include <stdlib.h>
#include <string.h>

#include "conn.h"

/* reply_info decodes a reply's info; a malformed list is an error. */
static pmix_status_t reply_info(const struct frame *f, pmix_info_t **info, size_t *n)
{
    struct cur c;
    *info = NULL;
    *n = 0;
    if (NULL == f || NULL == f->in.p) {
        return PMIX_SUCCESS;
    }
    c = cur_of(f->in);
    if (cur_infos(&c, info, n, 0) < 0 || c.bad) {
        PMIx_Info_free(*info, *n);
        *info = NULL;
        *n = 0;
        return PMIX_ERR_UNPACK_FAILURE;
    }
    return PMIX_SUCCESS;
}

struct released {
    pmix_info_t *info;
    size_t n;
};

static void release_info(void *cbdata)
{
    struct released *r = cbdata;
    PMIx_Info_free(r->info, r->n);
    free(r);
}

void info_deliver(pmix_info_cbfunc_t cb, pmix_status_t st, pmix_info_t *info, size_t n, void *cbdata)
{
    struct released *rel = calloc(1, sizeof(*rel));
    if (NULL == rel) {
        cb(st, info, n, cbdata, NULL, NULL);
        PMIx_Info_free(info, n);
        return;
    }
    rel->info = info;
    rel->n = n;
    cb(st, info, n, cbdata, release_info, rel);
}

static void info_reply(struct req *r, struct frame *f, pmix_status_t st)
{
    pmix_info_cbfunc_t cb = (pmix_info_cbfunc_t)r->ctx;
    struct released *rel = calloc(1, sizeof(*rel));
    pmix_status_t rc = PMIX_ERR_NOMEM;
    if (NULL != rel) {
        rc = reply_info(PMIX_SUCCESS == st || PMIX_QUERY_PARTIAL_SUCCESS == st ? f : NULL, &rel->info, &rel->n);
    }
    if (PMIX_SUCCESS != rc) {
        st = rc;
    }
    if (NULL == rel) {
        cb(st, NULL, 0, r->cbdata, NULL, NULL);
    } else {
        cb(st, rel->info, rel->n, r->cbdata, release_info, rel);
    }
    req_release(r);
    free(r);
}

pmix_status_t info_request(unsigned type, void (*build)(struct fw *, void *), void *arg, pmix_info_cbfunc_t cbfunc,
                           void *cbdata)
{
    pmix_status_t rc = attached();
    if (PMIX_SUCCESS != rc) {
        return rc;
    }
    return send_op(type, build, arg, info_reply, NULL, cbdata, (void *)cbfunc);
}

pmix_status_t info_request_wait(unsigned type, void (*build)(struct fw *, void *), void *arg, pmix_info_t **info,
                                size_t *ninfo)
{
    struct req r;
    struct frame f;
    pmix_status_t rc = attached();
    if (NULL != info) {
        *info = NULL;
    }
    if (NULL != ninfo) {
        *ninfo = 0;
    }
    if (PMIX_SUCCESS != rc) {
        return rc;
    }
    memset(&r, 0, sizeof(r));
    rc = send_request(&r, type, build, arg);
    if (PMIX_SUCCESS != rc) {
        return rc;
    }
    rc = await_reply(&r, -1, &f);
    if ((PMIX_SUCCESS == rc || PMIX_QUERY_PARTIAL_SUCCESS == rc) && NULL != info && NULL != ninfo) {
        pmix_status_t drc = reply_info(&f, info, ninfo);
        if (PMIX_SUCCESS != drc) {
            rc = drc;
        }
    }
    req_release(&r);
    return rc;
}
