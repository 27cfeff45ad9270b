/*
 * spawn.c — PMIx_Spawn (+_nb): the spawn frame (type 30) carries the job
 * directives and the apps; the agent hands it to the job's launcher, which
 * starts the new job as `pmixbus run` does and answers with its nspace
 * once every rank has started (docs/protocol.md, docs/cabi.md). An app
 * without cwd runs in this process's working directory, as Open MPI 4.1
 * asks with PMIX_WDIR anyway.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"

enum { T_SPAWN = 30 };

struct spawn_args {
    const pmix_info_t *info;
    size_t ninfo;
    const pmix_app_t *apps;
    size_t napps;
    const char *cwd; /* for apps without one */
};

static size_t argv_len(char *const *v)
{
    size_t n = 0;
    while (NULL != v && NULL != v[n]) {
        n++;
    }
    return n;
}

static void wb_argv(struct wbuf *w, char *const *v)
{
    size_t i, n = argv_len(v);
    wb_array(w, (uint32_t)n);
    for (i = 0; i < n; i++) {
        wb_cstr(w, v[i]);
    }
}

static void build_spawn(struct fw *f, void *arg)
{
    struct spawn_args *a = arg;
    size_t i;
    if (a->ninfo > 0 && NULL != a->info) {
        fw_key(f, "in");
        wb_infos(f->w, a->info, a->ninfo);
    }
    fw_key(f, "ap");
    wb_array(f->w, (uint32_t)a->napps);
    for (i = 0; i < a->napps; i++) {
        const pmix_app_t *app = &a->apps[i];
        wb_array(f->w, 6);
        wb_cstr(f->w, app->cmd);
        wb_argv(f->w, app->argv);
        wb_argv(f->w, app->env);
        wb_cstr(f->w, NULL != app->cwd && '\0' != app->cwd[0] ? app->cwd : a->cwd);
        wb_uint(f->w, (uint64_t)app->maxprocs);
        wb_infos(f->w, app->info, app->ninfo);
    }
}

/* check validates the call's arguments and that it may go to the agent. */
static pmix_status_t check(const pmix_info_t job_info[], size_t ninfo, const pmix_app_t apps[], size_t napps)
{
    size_t i;
    pmix_status_t rc = PMIX_SUCCESS;
    if (NULL == apps || 0 == napps || napps > 1024 || (NULL == job_info && ninfo > 0)) {
        return PMIX_ERR_BAD_PARAM;
    }
    for (i = 0; i < napps; i++) {
        if (NULL == apps[i].cmd || '\0' == apps[i].cmd[0] || apps[i].maxprocs <= 0 ||
            (NULL == apps[i].info && apps[i].ninfo > 0)) {
            return PMIX_ERR_BAD_PARAM;
        }
    }
    pthread_mutex_lock(&lib.mu);
    if (0 == lib.inits) {
        rc = PMIX_ERR_INIT;
    } else if (lib.singleton || lib.forked) {
        rc = PMIX_ERR_NOT_SUPPORTED; /* no launcher to ask */
    }
    pthread_mutex_unlock(&lib.mu);
    return rc;
}

/* copy_nspace copies the reply's nspace into out (PMIX_MAX_NSLEN + 1). */
static pmix_status_t copy_nspace(const struct frame *f, char *out)
{
    if (NULL == f->ns || 0 == f->ns_len || f->ns_len > PMIX_MAX_NSLEN) {
        return PMIX_ERR_UNPACK_FAILURE;
    }
    memcpy(out, f->ns, f->ns_len);
    out[f->ns_len] = '\0';
    return PMIX_SUCCESS;
}

struct spawn_cb {
    pmix_spawn_cbfunc_t fn;
    void *cbdata;
};

static void spawn_reply(struct req *r, struct frame *f, pmix_status_t st)
{
    struct spawn_cb *cb = r->ctx;
    char ns[PMIX_MAX_NSLEN + 1] = "";
    if (PMIX_SUCCESS == st) {
        st = NULL == f ? PMIX_ERR_LOST_CONNECTION : copy_nspace(f, ns);
    }
    cb->fn(st, ns, cb->cbdata);
    free(cb);
    req_release(r);
    free(r);
}

static pmix_status_t spawn(const pmix_info_t job_info[], size_t ninfo, const pmix_app_t apps[], size_t napps,
                           pmix_nspace_t nspace, pmix_spawn_cbfunc_t cbfunc, void *cbdata)
{
    char cwd[PATH_MAX] = "";
    struct spawn_args a = {job_info, ninfo, apps, napps, cwd};
    struct req *r;
    pmix_status_t rc = check(job_info, ninfo, apps, napps);
    if (PMIX_SUCCESS != rc) {
        return rc;
    }
    if (NULL == getcwd(cwd, sizeof(cwd))) {
        cwd[0] = '\0'; /* the agent's, then */
    }
    if (NULL == cbfunc) {
        struct req sr;
        struct frame f;
        memset(&sr, 0, sizeof(sr));
        rc = send_request(&sr, T_SPAWN, build_spawn, &a);
        if (PMIX_SUCCESS != rc) {
            return rc;
        }
        rc = await_reply(&sr, -1, &f);
        if (PMIX_SUCCESS == rc && NULL != nspace) {
            rc = copy_nspace(&f, nspace);
        }
        req_release(&sr);
        return rc;
    }
    r = calloc(1, sizeof(*r));
    if (NULL == r) {
        return PMIX_ERR_NOMEM;
    }
    r->ctx = calloc(1, sizeof(struct spawn_cb));
    if (NULL == r->ctx) {
        free(r);
        return PMIX_ERR_NOMEM;
    }
    ((struct spawn_cb *)r->ctx)->fn = cbfunc;
    ((struct spawn_cb *)r->ctx)->cbdata = cbdata;
    r->cb = spawn_reply;
    rc = send_request(r, T_SPAWN, build_spawn, &a);
    if (PMIX_SUCCESS != rc) {
        free(r->ctx);
        free(r);
    }
    return rc;
}

PMIX_EXPORT pmix_status_t PMIx_Spawn(const pmix_info_t job_info[], size_t ninfo, const pmix_app_t apps[],
                                     size_t napps, pmix_nspace_t nspace)
{
    if (cabi_in_handler > 0 || on_progress_thread()) {
        return PMIX_ERR_WOULD_BLOCK;
    }
    return spawn(job_info, ninfo, apps, napps, nspace, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Spawn_nb(const pmix_info_t job_info[], size_t ninfo, const pmix_app_t apps[],
                                        size_t napps, pmix_spawn_cbfunc_t cbfunc, void *cbdata)
{
    if (NULL == cbfunc) {
        return PMIX_ERR_BAD_PARAM;
    }
    return spawn(job_info, ninfo, apps, napps, NULL, cbfunc, cbdata);
}
