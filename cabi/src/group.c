/*
 * group.c — PMIx 4.2's process groups: PMIx_Group_construct, _destruct,
 * _invite, _join, _leave and their _nb forms. Each is one request to the
 * agent (frames 40-44, docs/protocol.md), which runs it on the collective
 * engine; construct's, invite's and join's replies carry the results:
 * PMIX_GROUP_CONTEXT_ID first when one was assigned, then
 * PMIX_GROUP_MEMBERSHIP.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"

struct group_args {
    const char *grp;
    const pmix_proc_t *procs;
    size_t nprocs;
    const pmix_info_t *info;
    size_t ninfo;
    const pmix_proc_t *leader;
    int accept;
};

static void build_group(struct fw *f, void *arg)
{
    struct group_args *a = arg;
    fw_key(f, "ns");
    wb_cstr(f->w, a->grp);
    if (a->nprocs > 0) {
        fw_key(f, "pc");
        wb_procs(f->w, a->procs, a->nprocs, lib.proc.nspace);
    }
    if (a->ninfo > 0 && NULL != a->info) {
        fw_key(f, "in");
        wb_infos(f->w, a->info, a->ninfo);
    }
    if (NULL != a->leader) {
        fw_key(f, "src");
        wb_proc(f->w, a->leader);
    }
    if (a->accept) {
        fw_key(f, "st");
        wb_int(f->w, 1);
    }
}

static pmix_status_t group_attached(void)
{
    pmix_status_t rc = PMIX_SUCCESS;
    pthread_mutex_lock(&lib.mu);
    if (0 == lib.inits) {
        rc = PMIX_ERR_INIT;
    } else if (lib.singleton || lib.forked) {
        rc = PMIX_ERR_UNREACH;
    }
    pthread_mutex_unlock(&lib.mu);
    return rc;
}

static int group_blocking_forbidden(void) { return cabi_in_handler > 0 || on_progress_thread(); }

/* run sends a group request and waits for its reply. */
static pmix_status_t run(unsigned type, struct group_args *a, pmix_info_t **results, size_t *nresults)
{
    struct req r;
    struct frame f;
    pmix_status_t rc;
    if (NULL != results) {
        *results = NULL;
    }
    if (NULL != nresults) {
        *nresults = 0;
    }
    if (group_blocking_forbidden()) {
        return PMIX_ERR_WOULD_BLOCK;
    }
    if (PMIX_SUCCESS != (rc = group_attached())) {
        return rc;
    }
    memset(&r, 0, sizeof(r));
    rc = send_request(&r, type, build_group, a);
    if (PMIX_SUCCESS != rc) {
        return rc;
    }
    rc = await_reply(&r, -1, &f);
    if (PMIX_SUCCESS == rc && NULL != results && NULL != nresults) {
        (void) raw_infos(f.res, results, nresults); /* a malformed list is no results */
    }
    req_release(&r);
    return rc;
}

struct info_cb {
    pmix_info_cbfunc_t cbfunc;
    void *cbdata;
    pmix_info_t *info;
    size_t ninfo;
};

static void release_results(void *arg)
{
    struct info_cb *k = arg;
    if (NULL != k->info) {
        PMIx_Info_free(k->info, k->ninfo);
    }
    free(k);
}

static void info_reply(struct req *r, struct frame *f, pmix_status_t st)
{
    struct info_cb *k = r->ctx;
    if (NULL != f && PMIX_SUCCESS == st) {
        (void) raw_infos(f->res, &k->info, &k->ninfo);
    }
    k->cbfunc(st, k->info, k->ninfo, k->cbdata, release_results, k);
    req_release(r);
    free(r);
}

static void group_op_reply(struct req *r, struct frame *f, pmix_status_t st)
{
    (void)f;
    if (NULL != r->opcb) {
        r->opcb(st, r->cbdata);
    }
    req_release(r);
    free(r);
}

/* run_nb sends a group request whose reply goes to an info callback
 * (cbfunc) or an op callback (opcb), or nowhere when both are NULL (as
 * OpenPMIx's _nb forms allow: OpenPMIx's asyncgroup.c joins so). */
static pmix_status_t run_nb(unsigned type, struct group_args *a, pmix_info_cbfunc_t cbfunc, pmix_op_cbfunc_t opcb,
                            void *cbdata)
{
    pmix_status_t rc = group_attached();
    struct req *r;
    struct info_cb *k = NULL;
    if (PMIX_SUCCESS != rc) {
        return rc;
    }
    r = calloc(1, sizeof(*r));
    if (NULL == r) {
        return PMIX_ERR_NOMEM;
    }
    if (NULL != cbfunc) {
        k = calloc(1, sizeof(*k));
        if (NULL == k) {
            free(r);
            return PMIX_ERR_NOMEM;
        }
        k->cbfunc = cbfunc;
        k->cbdata = cbdata;
        r->cb = info_reply;
        r->ctx = k;
    } else {
        r->cb = group_op_reply;
        r->opcb = opcb;
        r->cbdata = cbdata;
    }
    rc = send_request(r, type, build_group, a);
    if (PMIX_SUCCESS != rc) {
        free(k);
        free(r);
    }
    return rc;
}

static int bad_grp(const char grp[]) { return NULL == grp || '\0' == grp[0] || strlen(grp) > PMIX_MAX_NSLEN; }

PMIX_EXPORT pmix_status_t PMIx_Group_construct(const char grp[], const pmix_proc_t procs[], size_t nprocs,
                                               const pmix_info_t directives[], size_t ndirs, pmix_info_t **results,
                                               size_t *nresults)
{
    struct group_args a = {grp, procs, nprocs, directives, ndirs, NULL, 0};
    /* No procs: an added member (PMIX_GROUP_ADD_MEMBERS). */
    if (bad_grp(grp) || (NULL == procs && 0 != nprocs)) {
        return PMIX_ERR_BAD_PARAM;
    }
    return run(T_GROUP_CONSTRUCT, &a, results, nresults);
}

PMIX_EXPORT pmix_status_t PMIx_Group_construct_nb(const char grp[], const pmix_proc_t procs[], size_t nprocs,
                                                  const pmix_info_t info[], size_t ninfo, pmix_info_cbfunc_t cbfunc,
                                                  void *cbdata)
{
    struct group_args a = {grp, procs, nprocs, info, ninfo, NULL, 0};
    /* No procs: an added member (PMIX_GROUP_ADD_MEMBERS). */
    if (bad_grp(grp) || (NULL == procs && 0 != nprocs)) {
        return PMIX_ERR_BAD_PARAM;
    }
    return run_nb(T_GROUP_CONSTRUCT, &a, cbfunc, NULL, cbdata);
}

PMIX_EXPORT pmix_status_t PMIx_Group_destruct(const char grp[], const pmix_info_t directives[], size_t ndirs)
{
    struct group_args a = {grp, NULL, 0, directives, ndirs, NULL, 0};
    if (bad_grp(grp)) {
        return PMIX_ERR_BAD_PARAM;
    }
    return run(T_GROUP_DESTRUCT, &a, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Group_destruct_nb(const char grp[], const pmix_info_t info[], size_t ninfo,
                                                 pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    struct group_args a = {grp, NULL, 0, info, ninfo, NULL, 0};
    if (bad_grp(grp)) {
        return PMIX_ERR_BAD_PARAM;
    }
    return run_nb(T_GROUP_DESTRUCT, &a, NULL, cbfunc, cbdata);
}

PMIX_EXPORT pmix_status_t PMIx_Group_invite(const char grp[], const pmix_proc_t procs[], size_t nprocs,
                                            const pmix_info_t info[], size_t ninfo, pmix_info_t **results,
                                            size_t *nresult)
{
    struct group_args a = {grp, procs, nprocs, info, ninfo, NULL, 0};
    if (bad_grp(grp) || NULL == procs || 0 == nprocs) {
        return PMIX_ERR_BAD_PARAM;
    }
    return run(T_GROUP_INVITE, &a, results, nresult);
}

PMIX_EXPORT pmix_status_t PMIx_Group_invite_nb(const char grp[], const pmix_proc_t procs[], size_t nprocs,
                                               const pmix_info_t info[], size_t ninfo, pmix_info_cbfunc_t cbfunc,
                                               void *cbdata)
{
    struct group_args a = {grp, procs, nprocs, info, ninfo, NULL, 0};
    if (bad_grp(grp) || NULL == procs || 0 == nprocs) {
        return PMIX_ERR_BAD_PARAM;
    }
    return run_nb(T_GROUP_INVITE, &a, cbfunc, NULL, cbdata);
}

PMIX_EXPORT pmix_status_t PMIx_Group_join(const char grp[], const pmix_proc_t *leader, pmix_group_opt_t opt,
                                          const pmix_info_t info[], size_t ninfo, pmix_info_t **results,
                                          size_t *nresult)
{
    struct group_args a = {grp, NULL, 0, info, ninfo, leader, PMIX_GROUP_ACCEPT == opt};
    if (bad_grp(grp) || NULL == leader) {
        return PMIX_ERR_BAD_PARAM;
    }
    return run(T_GROUP_JOIN, &a, results, nresult);
}

PMIX_EXPORT pmix_status_t PMIx_Group_join_nb(const char grp[], const pmix_proc_t *leader, pmix_group_opt_t opt,
                                             const pmix_info_t info[], size_t ninfo, pmix_info_cbfunc_t cbfunc,
                                             void *cbdata)
{
    struct group_args a = {grp, NULL, 0, info, ninfo, leader, PMIX_GROUP_ACCEPT == opt};
    if (bad_grp(grp) || NULL == leader) {
        return PMIX_ERR_BAD_PARAM;
    }
    return run_nb(T_GROUP_JOIN, &a, cbfunc, NULL, cbdata);
}

PMIX_EXPORT pmix_status_t PMIx_Group_leave(const char grp[], const pmix_info_t info[], size_t ninfo)
{
    struct group_args a = {grp, NULL, 0, info, ninfo, NULL, 0};
    if (bad_grp(grp)) {
        return PMIX_ERR_BAD_PARAM;
    }
    return run(T_GROUP_LEAVE, &a, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Group_leave_nb(const char grp[], const pmix_info_t info[], size_t ninfo,
                                              pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    struct group_args a = {grp, NULL, 0, info, ninfo, NULL, 0};
    if (bad_grp(grp)) {
        return PMIX_ERR_BAD_PARAM;
    }
    return run_nb(T_GROUP_LEAVE, &a, NULL, cbfunc, cbdata);
}
