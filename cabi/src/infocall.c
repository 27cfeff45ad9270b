/*
 * infocall.c — requests whose reply carries info, the shape of
 * PMIx_Job_control and PMIx_Query_info: blocking, the info handed to the
 * caller; non-blocking, a pmix_info_cbfunc_t called from the progress
 * thread with the info and a release function that frees it.
 */
#include <stdlib.h>
#include <string.h>

#include "conn.h"

/* raw_infos decodes a list of info from a reply's field (none when the
 * field is absent); a malformed list is PMIX_ERR_UNPACK_FAILURE, with
 * nothing handed out (cur_infos frees what it made). */
pmix_status_t raw_infos(struct raw field, pmix_info_t **info, size_t *n)
{
    struct cur c;
    *info = NULL;
    *n = 0;
    if (NULL == field.p) {
        return PMIX_SUCCESS;
    }
    c = cur_of(field);
    return cur_infos(&c, info, n, 0) < 0 ? PMIX_ERR_UNPACK_FAILURE : PMIX_SUCCESS;
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
    pmix_info_t *info = NULL;
    size_t n = 0;
    if (PMIX_SUCCESS == st || PMIX_QUERY_PARTIAL_SUCCESS == st) {
        pmix_status_t rc = raw_infos(f->in, &info, &n);
        if (PMIX_SUCCESS != rc) {
            st = rc;
        }
    }
    info_deliver((pmix_info_cbfunc_t)r->ctx, st, info, n, r->cbdata);
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
        pmix_status_t drc = raw_infos(f.in, info, ninfo);
        if (PMIX_SUCCESS != drc) {
            rc = drc;
        }
    }
    req_release(&r);
    return rc;
}
