/*
 * client.c — the PMIx entry points that need the agent, in C over the
 * protocol of docs/protocol.md (conn.c), with OpenPMIx's const-correct
 * prototypes and the semantics docs/cabi.md gives.
 *
 * A blocking call made where it would wait for the progress thread —
 * from an event handler, or any callback, which run there — returns
 * PMIX_ERR_WOULD_BLOCK, as OpenPMIx does; Commit, Log and Abort, which
 * wait only for the agent, and the nested Init/Finalize, which only
 * count, are allowed there.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conn.h"
#include "nodefence.h"

HIDDEN int progress_start(void);

#define ATTACH_MS 30000
#define ABORT_MS 10000
#define MAX_ABORT_MESSAGE 4096

static int blocking_forbidden(void) { return cabi_in_handler > 0 || on_progress_thread(); }

#define WOULD_BLOCK_IN_HANDLER()            \
    do {                                    \
        if (blocking_forbidden()) {         \
            return PMIX_ERR_WOULD_BLOCK;    \
        }                                   \
    } while (0)

static int bad_key(const char key[])
{
    return NULL == key || '\0' == key[0] || strnlen(key, PMIX_MAX_KEYLEN + 1) > PMIX_MAX_KEYLEN;
}

#define BAD_PROCS(procs, nprocs) (NULL == (procs) && 0 < (nprocs))

/* attached: PMIX_SUCCESS when a call may go to the agent, else the
 * status it returns (not initialised, or a singleton). */
pmix_status_t attached(void)
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

static void self_proc(pmix_proc_t *p)
{
    pthread_mutex_lock(&lib.mu);
    *p = lib.proc;
    pthread_mutex_unlock(&lib.mu);
}

/* fix_proc: an empty nspace is the caller's. */
static void fix_proc(pmix_proc_t *out, const pmix_proc_t *in)
{
    memset(out, 0, sizeof(*out));
    memcpy(out->nspace, in->nspace, PMIX_MAX_NSLEN);
    out->rank = in->rank;
    if ('\0' == out->nspace[0]) {
        memcpy(out->nspace, lib.proc.nspace, sizeof(out->nspace));
    }
}

static int same_proc(const pmix_proc_t *a, const pmix_proc_t *b)
{
    return a->rank == b->rank && 0 == strncmp(a->nspace, b->nspace, PMIX_MAX_NSLEN);
}

/* ---- callbacks queued to the progress thread ---- */

static void run_opcb(struct work *w)
{
    ((pmix_op_cbfunc_t)w->q)(w->st, w->p);
}

/* later_op calls cbfunc(st, cbdata) from the progress thread: never from
 * inside the _nb call that asked for it. */
static void later_op(pmix_op_cbfunc_t cbfunc, pmix_status_t st, void *cbdata)
{
    struct work *w = work_new(run_opcb);
    if (NULL == w) {
        return;
    }
    w->q = (void *)cbfunc;
    w->p = cbdata;
    w->st = st;
    enqueue(w);
}

/* answer settles a call without the agent (see cabi/doc.go). */
static pmix_status_t answer(pmix_status_t rc, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    if (NULL == cbfunc || PMIX_SUCCESS != rc) {
        return rc;
    }
    later_op(cbfunc, rc, cbdata);
    return PMIX_SUCCESS;
}

/* A request whose reply goes to an op callback. */
static void op_reply(struct req *r, struct frame *f, pmix_status_t st)
{
    (void)f;
    r->opcb(st, r->cbdata);
    req_release(r);
    free(r);
}

/* send_op sends a non-blocking request whose reply goes to cb on the
 * progress thread, with cbfunc, cbdata and ctx for it. On failure nothing
 * is kept: ctx stays the caller's to free. */
pmix_status_t send_op(unsigned type, void (*build)(struct fw *, void *), void *arg,
                      void (*cb)(struct req *, struct frame *, pmix_status_t), pmix_op_cbfunc_t cbfunc, void *cbdata,
                      void *ctx)
{
    pmix_status_t rc;
    struct req *r = calloc(1, sizeof(*r));

    if (NULL == r) {
        return PMIX_ERR_NOMEM;
    }
    r->cb = cb;
    r->opcb = cbfunc;
    r->cbdata = cbdata;
    r->ctx = ctx;
    rc = send_request(r, type, build, arg);
    if (PMIX_SUCCESS != rc) {
        free(r);
    }
    return rc;
}

/* request runs a request: blocking (cbfunc NULL) returns the reply's
 * status; otherwise it returns once the frame is sent and cbfunc gets the
 * reply's status from the progress thread. */
static pmix_status_t request(unsigned type, void (*build)(struct fw *, void *), void *arg, pmix_op_cbfunc_t cbfunc,
                             void *cbdata)
{
    pmix_status_t rc;
    if (NULL == cbfunc) {
        struct req r;
        struct frame f;
        memset(&r, 0, sizeof(r));
        rc = send_request(&r, type, build, arg);
        if (PMIX_SUCCESS != rc) {
            return rc;
        }
        rc = await_reply(&r, -1, &f);
        req_release(&r);
        return rc;
    }
    return send_op(type, build, arg, op_reply, cbfunc, cbdata, NULL);
}

/* ---- Init, Finalize ---- */

static void free_kept(struct kept **list)
{
    while (NULL != *list) {
        struct kept *k = *list;
        *list = k->next;
        free(k->enc);
        free(k);
    }
}

static void free_state(void)
{
    struct reg *r;
    struct connect_rec *c;
    while (NULL != (r = lib.regs)) {
        lib.regs = r->next;
        reg_free(r);
    }
    lib.first = lib.last = NULL;
    memset(lib.cat_head, 0, sizeof(lib.cat_head));
    memset(lib.cat_tail, 0, sizeof(lib.cat_tail));
    memset(lib.cat_list, 0, sizeof(lib.cat_list));
    free_kept(&lib.puts);
    free_kept(&lib.stored);
    while (NULL != (c = lib.connects)) {
        size_t i;
        lib.connects = c->next;
        for (i = 0; i < c->n; i++) {
            free(c->ns[i]);
        }
        free(c->ns);
        free(c->key);
        free(c);
    }
    lib.next_ref = 0;
    model_forget_locked();
}

static int parse_rank(const char *s, pmix_rank_t *out)
{
    char *end;
    unsigned long long n;
    while (' ' == *s || '\t' == *s) s++;
    if (0 == strcasecmp(s, "*") || 0 == strcasecmp(s, "wildcard")) {
        *out = PMIX_RANK_WILDCARD;
        return 0;
    }
    if (0 == strcasecmp(s, "undef")) {
        *out = PMIX_RANK_UNDEF;
        return 0;
    }
    errno = 0;
    n = strtoull(s, &end, 10);
    while (' ' == *end || '\t' == *end || '\n' == *end) end++;
    if (0 != errno || end == s || '\0' != *end || '-' == *s || n >= PMIX_RANK_VALID) {
        return -1;
    }
    *out = (pmix_rank_t)n;
    return 0;
}

PMIX_EXPORT pmix_status_t PMIx_Init(pmix_proc_t *proc, pmix_info_t info[], size_t ninfo)
{
    pmix_status_t rc = PMIX_SUCCESS;
    const char *ns, *rk, *agent, *cred;
    pmix_rank_t rank = 0;
    /* A nested Init only counts; the first one attaches under initmu,
     * which the last Finalize holds while it detaches. A callback on the
     * progress thread cannot wait for that (Finalize joins the thread). */
    pthread_mutex_lock(&lib.mu);
    if (lib.inits > 0) {
        lib.inits++;
        rc = lib.singleton ? PMIX_ERR_UNREACH : PMIX_SUCCESS;
        if (NULL != proc) {
            *proc = lib.proc;
        }
        pthread_mutex_unlock(&lib.mu);
        return rc;
    }
    if (lib.closing && on_progress_thread()) {
        pthread_mutex_unlock(&lib.mu);
        return PMIX_ERR_INIT;
    }
    pthread_mutex_unlock(&lib.mu);
    pthread_mutex_lock(&lib.initmu);
    pthread_mutex_lock(&lib.mu);
    if (lib.inits > 0) {
        lib.inits++;
        rc = lib.singleton ? PMIX_ERR_UNREACH : PMIX_SUCCESS;
        if (NULL != proc) {
            *proc = lib.proc;
        }
        pthread_mutex_unlock(&lib.mu);
        pthread_mutex_unlock(&lib.initmu);
        return rc;
    }
    pthread_mutex_unlock(&lib.mu);
    ns = getenv("PMIX_NAMESPACE");
    rk = getenv("PMIX_RANK");
    agent = getenv("PMIXBUS_AGENT");
    cred = getenv("PMIXBUS_CREDENTIAL");
    if (NULL == ns || NULL == rk || NULL == agent || NULL == cred || '\0' == *ns || '\0' == *rk || '\0' == *agent ||
        '\0' == *cred || parse_rank(rk, &rank) < 0 || strlen(ns) > PMIX_MAX_NSLEN) {
        rc = PMIX_ERR_INIT;
    } else {
        rc = conn_open(agent, ns, rank, cred);
    }
    memset(&lib.proc, 0, sizeof(lib.proc));
    if (PMIX_SUCCESS == rc) {
        snprintf(lib.proc.nspace, sizeof(lib.proc.nspace), "%s", ns);
        lib.proc.rank = rank;
        lib.singleton = 0;
    } else if (PMIX_ERR_INIT == rc || PMIX_ERR_UNREACH == rc) {
        /* No agent: a singleton, as OpenPMIx makes one, and the status MPI
         * libraries take for "run as a singleton". */
        char host[256] = "";
        gethostname(host, sizeof(host) - 1);
        snprintf(lib.proc.nspace, sizeof(lib.proc.nspace), "singleton.%.200s.%d", host, (int)getpid());
        lib.proc.rank = 0;
        lib.singleton = 1;
        lib.cluster[0] = '\0';
        rc = PMIX_ERR_UNREACH;
    } else {
        pthread_mutex_unlock(&lib.initmu);
        return rc;
    }
    watch_fork();
    if (progress_start() < 0) {
        if (!lib.singleton) {
            conn_close();
        }
        pthread_mutex_unlock(&lib.initmu);
        return PMIX_ERR_OUT_OF_RESOURCE;
    }
    pthread_mutex_lock(&lib.mu);
    lib.inits = 1;
    if (NULL != proc) {
        *proc = lib.proc;
    }
    pthread_mutex_unlock(&lib.mu);
    model_declare(info, ninfo);
    pthread_mutex_unlock(&lib.initmu);
    return rc;
}

PMIX_EXPORT int PMIx_Initialized(void)
{
    int n;
    pthread_mutex_lock(&lib.mu);
    n = lib.inits > 0;
    pthread_mutex_unlock(&lib.mu);
    return n;
}

PMIX_EXPORT pmix_status_t PMIx_Finalize(const pmix_info_t info[], size_t ninfo)
{
    pmix_status_t rc = PMIX_SUCCESS;
    int singleton;
    (void)info;
    (void)ninfo;
    pthread_mutex_lock(&lib.mu);
    if (0 == lib.inits) {
        pthread_mutex_unlock(&lib.mu);
        return PMIX_ERR_INIT;
    }
    if (1 == lib.inits && blocking_forbidden()) {
        /* the last Finalize would wait for the handler calling it */
        pthread_mutex_unlock(&lib.mu);
        return PMIX_ERR_WOULD_BLOCK;
    }
    if (lib.inits > 1) {
        lib.inits--;
        pthread_mutex_unlock(&lib.mu);
        return PMIX_SUCCESS;
    }
    pthread_mutex_unlock(&lib.mu);
    /* The last one: detach under initmu, so that no Init attaches while
     * this one detaches. */
    pthread_mutex_lock(&lib.initmu);
    pthread_mutex_lock(&lib.mu);
    if (lib.inits != 1) {
        /* another thread's Init or Finalize came between */
        rc = 0 == lib.inits ? PMIX_ERR_INIT : PMIX_SUCCESS;
        if (lib.inits > 1) {
            lib.inits--;
        }
        pthread_mutex_unlock(&lib.mu);
        pthread_mutex_unlock(&lib.initmu);
        return rc;
    }
    lib.inits = 0;
    lib.closing = 1;
    singleton = lib.singleton || lib.forked;
    pthread_mutex_unlock(&lib.mu);
    if (!singleton) {
        struct req r;
        struct frame f;
        pthread_mutex_lock(&lib.mu);
        lib.final = 1;
        pthread_mutex_unlock(&lib.mu);
        memset(&r, 0, sizeof(r));
        if (PMIX_SUCCESS == send_request(&r, T_FINALIZE, NULL, NULL)) {
            rc = await_reply(&r, ATTACH_MS, &f);
            req_release(&r);
            if (PMIX_ERR_LOST_CONNECTION == rc) {
                rc = PMIX_SUCCESS; /* a lost agent is no error */
            }
        }
    }
    conn_close();
    topology_release();
    pthread_mutex_lock(&lib.mu);
    free_state();
    free_timed_locked();
    lib.singleton = 0;
    lib.closing = 0;
    pthread_mutex_unlock(&lib.mu);
    pthread_mutex_unlock(&lib.initmu);
    run_cleanups();
    return rc;
}

PMIX_EXPORT void PMIx_Progress(void) {}

/* ---- Abort ---- */

struct abort_args {
    int status;
    const char *msg;
    size_t msglen;
    const pmix_proc_t *procs;
    size_t nprocs;
};

static void build_abort(struct fw *f, void *arg)
{
    struct abort_args *a = arg;
    fw_key(f, "st");
    wb_int(f->w, a->status);
    if (a->msglen > 0) {
        fw_key(f, "m");
        wb_str(f->w, a->msg, a->msglen);
    }
    if (a->nprocs > 0) {
        fw_key(f, "pc");
        wb_procs(f->w, a->procs, a->nprocs, lib.proc.nspace);
    }
}

PMIX_EXPORT pmix_status_t PMIx_Abort(int status, const char msg[], pmix_proc_t procs[], size_t nprocs)
{
    struct abort_args a = {status, msg, 0, procs, nprocs};
    pmix_status_t rc = attached();
    pmix_proc_t self;
    struct req r;
    struct frame f;
    int included = 0 == nprocs;
    size_t i;
    if (PMIX_ERR_INIT == rc) {
        return rc;
    }
    if (BAD_PROCS(procs, nprocs)) {
        return PMIX_ERR_BAD_PARAM;
    }
    if (PMIX_SUCCESS != rc) {
        return rc;
    }
    self_proc(&self);
    for (i = 0; NULL != procs && i < nprocs; i++) {
        pmix_proc_t p;
        fix_proc(&p, &procs[i]);
        included = included || (0 == strncmp(p.nspace, self.nspace, PMIX_MAX_NSLEN) &&
                                (p.rank == self.rank || PMIX_RANK_WILDCARD == p.rank));
    }
    if (NULL != msg) {
        a.msglen = strnlen(msg, MAX_ABORT_MESSAGE); /* the abort counts more than its whole message */
    }
    memset(&r, 0, sizeof(r));
    rc = send_request(&r, T_ABORT, build_abort, &a);
    if (PMIX_SUCCESS == rc) {
        rc = await_reply(&r, ABORT_MS, &f);
        req_release(&r);
    }
    if (included) {
        fflush(NULL);
        _exit(0 == status ? 1 : status); /* an abort is no success, as the launcher counts it */
    }
    return rc;
}

/* ---- events ---- */

static void run_regcb(struct work *w)
{
    ((pmix_hdlr_reg_cbfunc_t)w->q)(w->st, (size_t)w->a, w->p);
}

static void later_regcb(pmix_hdlr_reg_cbfunc_t cbfunc, pmix_status_t st, size_t ref, void *cbdata)
{
    struct work *w = work_new(run_regcb);
    if (NULL == w) {
        return;
    }
    w->q = (void *)cbfunc;
    w->p = cbdata;
    w->st = st;
    w->a = ref;
    enqueue(w);
}

static int flag_on(const pmix_info_t *in) { return PMIX_BOOL != in->value.type || in->value.data.flag; }

static void take_procs(const pmix_value_t *v, pmix_proc_t **out, size_t *n)
{
    if (PMIX_PROC == v->type && NULL != v->data.proc) {
        pmix_proc_t *p = realloc(*out, (*n + 1) * sizeof(*p));
        if (NULL != p) {
            p[(*n)++] = *v->data.proc;
            *out = p;
        }
    } else if (PMIX_DATA_ARRAY == v->type && NULL != v->data.darray && PMIX_PROC == v->data.darray->type &&
               NULL != v->data.darray->array) {
        size_t k = v->data.darray->size;
        pmix_proc_t *p = realloc(*out, (*n + k) * sizeof(*p));
        if (NULL != p) {
            memcpy(p + *n, v->data.darray->array, k * sizeof(*p));
            *n += k;
            *out = p;
        }
    }
}

static struct reg *reg_new(const pmix_status_t *codes, size_t ncodes, const pmix_info_t *info, size_t ninfo,
                           pmix_notification_fn_t fn)
{
    struct reg *r = calloc(1, sizeof(*r));
    size_t i, j;
    if (NULL == r) {
        return NULL;
    }
    r->fn = fn;
    if (NULL != codes && ncodes > 0) {
        r->codes = malloc(ncodes * sizeof(*codes));
        if (NULL == r->codes) {
            free(r);
            return NULL;
        }
        /* without duplicates, as bus normalises them */
        for (i = 0; i < ncodes; i++) {
            for (j = 0; j < r->ncodes && r->codes[j] != codes[i]; j++) {
            }
            if (j == r->ncodes) {
                r->codes[r->ncodes++] = codes[i];
            }
        }
    }
    r->cat = 0 == r->ncodes ? CAT_DEFAULT : 1 == r->ncodes ? CAT_SINGLE : CAT_MULTI;
    r->place = P_PREPEND;
    for (i = 0; NULL != info && i < ninfo; i++) {
        const pmix_info_t *in = &info[i];
        const char *k = in->key;
        if (0 == strcmp(k, PMIX_EVENT_RETURN_OBJECT) && PMIX_POINTER == in->value.type) {
            r->cbobject = in->value.data.ptr;
        } else if (0 == strcmp(k, PMIX_EVENT_HDLR_NAME) && PMIX_STRING == in->value.type && NULL != in->value.data.string) {
            snprintf(r->name, sizeof(r->name), "%s", in->value.data.string);
        } else if (0 == strcmp(k, PMIX_EVENT_HDLR_FIRST) && flag_on(in)) {
            r->place = P_FIRST;
        } else if (0 == strcmp(k, PMIX_EVENT_HDLR_LAST) && flag_on(in)) {
            r->place = P_LAST;
        } else if (0 == strcmp(k, PMIX_EVENT_HDLR_FIRST_IN_CATEGORY) && flag_on(in)) {
            r->place = P_FIRST_CAT;
        } else if (0 == strcmp(k, PMIX_EVENT_HDLR_LAST_IN_CATEGORY) && flag_on(in)) {
            r->place = P_LAST_CAT;
        } else if (0 == strcmp(k, PMIX_EVENT_HDLR_APPEND) && flag_on(in)) {
            r->place = P_APPEND;
        } else if (0 == strcmp(k, PMIX_EVENT_HDLR_PREPEND) && flag_on(in)) {
            r->place = P_PREPEND;
        } else if ((0 == strcmp(k, PMIX_EVENT_HDLR_BEFORE) || 0 == strcmp(k, PMIX_EVENT_HDLR_AFTER)) &&
                   PMIX_STRING == in->value.type && NULL != in->value.data.string) {
            r->place = 0 == strcmp(k, PMIX_EVENT_HDLR_BEFORE) ? P_BEFORE : P_AFTER;
            snprintf(r->target, sizeof(r->target), "%s", in->value.data.string);
        } else if (0 == strcmp(k, "pmix.evjob")) {
            r->job_given = 1;
            r->job = flag_on(in);
        } else if (0 == strcmp(k, "pmix.evenv")) {
            r->env_given = 1;
            r->env = flag_on(in);
        } else if (0 == strcmp(k, PMIX_RANGE) && PMIX_DATA_RANGE == in->value.type) {
            r->range = in->value.data.range;
        } else if (0 == strcmp(k, PMIX_EVENT_CUSTOM_RANGE)) {
            take_procs(&in->value, &r->custom, &r->ncustom);
        } else if (0 == strcmp(k, PMIX_EVENT_AFFECTED_PROC) || 0 == strcmp(k, PMIX_EVENT_AFFECTED_PROCS)) {
            take_procs(&in->value, &r->affected, &r->naffected);
        } else if (0 == strcmp(k, PMIX_EVENT_ACTION_TIMEOUT)) {
            const pmix_value_t *v = &in->value;
            switch (v->type) {
            case PMIX_INT: case PMIX_INT32: r->timeout = v->data.int32; break;
            case PMIX_INT8: r->timeout = v->data.int8; break;
            case PMIX_INT16: r->timeout = v->data.int16; break;
            case PMIX_INT64: r->timeout = (double)v->data.int64; break;
            case PMIX_UINT8: r->timeout = v->data.uint8; break;
            case PMIX_UINT16: r->timeout = v->data.uint16; break;
            case PMIX_UINT: case PMIX_UINT32: r->timeout = v->data.uint32; break;
            case PMIX_SIZE: case PMIX_UINT64: r->timeout = (double)v->data.uint64; break;
            case PMIX_FLOAT: r->timeout = v->data.fval; break;
            case PMIX_DOUBLE: r->timeout = v->data.dval; break;
            }
            if (!(r->timeout > 0)) {
                r->timeout = 0;
            }
        }
    }
    if (r->ncustom > 0 && PMIX_RANGE_UNDEF == r->range) {
        r->range = PMIX_RANGE_CUSTOM;
    }
    return r;
}

struct reg_args {
    const pmix_status_t *codes;
    size_t ncodes;
    const pmix_info_t *info;
    size_t ninfo;
};

static void build_register(struct fw *f, void *arg)
{
    struct reg_args *a = arg;
    size_t i;
    fw_key(f, "cs");
    wb_array(f->w, (uint32_t)(NULL == a->codes ? 0 : a->ncodes));
    for (i = 0; NULL != a->codes && i < a->ncodes; i++) {
        wb_int(f->w, a->codes[i]);
    }
    if (a->ninfo > 0 && NULL != a->info) {
        fw_key(f, "in");
        wb_infos(f->w, a->info, a->ninfo);
    }
}

static void unlink_reg_locked(struct reg *g)
{
    struct reg **pp;
    for (pp = &lib.regs; NULL != *pp; pp = &(*pp)->next) {
        if (*pp == g) {
            *pp = g->next;
            return;
        }
    }
}

static void build_id(struct fw *f, void *arg)
{
    fw_key(f, "id");
    wb_uint(f->w, *(uint64_t *)arg);
}

/* drop_at_agent deregisters id without waiting (a registration given up
 * before its reply). */
static void drop_at_agent(uint64_t id)
{
    struct wbuf w = {0};
    struct fw f;
    fw_begin(&f, &w, T_DEREGISTER, 0);
    build_id(&f, &id);
    if (0 == fw_end(&f)) {
        (void)send_oneway(&w);
    }
    wb_free(&w);
}

/* settle_reg: the agent answered g's registration with rc. Returns the
 * status for the caller. */
static pmix_status_t settle_reg(struct reg *g, pmix_status_t rc)
{
    int drop = 0;
    uint64_t id = 0;
    pthread_mutex_lock(&lib.mu);
    if (PMIX_SUCCESS != rc || REG_OK != g->state) {
        if (PMIX_SUCCESS == rc) {
            rc = PMIX_ERR_LOST_CONNECTION;
        }
        unlink_reg_locked(g);
        reg_unplace_locked(g);
        reg_free(g);
    } else if (g->dropped) {
        drop = 1;
        id = g->agent_id;
        unlink_reg_locked(g);
        reg_free(g);
    } else {
        g->returned = 1;
        model_replay_locked(g);
        pthread_cond_broadcast(&lib.cv);
    }
    pthread_mutex_unlock(&lib.mu);
    if (drop) {
        drop_at_agent(id);
    }
    return rc;
}

static void reg_reply(struct req *r, struct frame *f, pmix_status_t st)
{
    struct reg *g = r->reg;
    size_t ref = g->ref;
    pmix_hdlr_reg_cbfunc_t cb = (pmix_hdlr_reg_cbfunc_t)r->ctx;
    (void)f;
    st = settle_reg(g, st);
    cb(st, PMIX_SUCCESS == st ? ref : SIZE_MAX, r->cbdata);
    req_release(r);
    free(r);
}

PMIX_EXPORT pmix_status_t PMIx_Register_event_handler(pmix_status_t codes[], size_t ncodes, pmix_info_t info[],
                                                      size_t ninfo, pmix_notification_fn_t evhdlr,
                                                      pmix_hdlr_reg_cbfunc_t cbfunc, void *cbdata)
{
    struct reg_args a = {codes, ncodes, info, ninfo};
    struct reg *g;
    struct req *r;
    struct req local;
    pmix_status_t rc;
    size_t ref;
    if (NULL == cbfunc) {
        WOULD_BLOCK_IN_HANDLER();
    }
    if (NULL == evhdlr) {
        return PMIX_ERR_BAD_PARAM;
    }
    g = reg_new(codes, ncodes, info, ninfo, evhdlr);
    if (NULL == g) {
        return PMIX_ERR_NOMEM;
    }
    pthread_mutex_lock(&lib.mu);
    if (0 == lib.inits) {
        pthread_mutex_unlock(&lib.mu);
        reg_free(g);
        return PMIX_ERR_INIT;
    }
    ref = g->ref = lib.next_ref++;
    g->next = lib.regs;
    lib.regs = g;
    if (lib.singleton) {
        /* A singleton has no agent to raise events: the registration is
         * kept, and its handler is never called. */
        g->state = REG_OK;
        g->returned = 1;
        model_replay_locked(g);
        pthread_mutex_unlock(&lib.mu);
        if (NULL != cbfunc) {
            later_regcb(cbfunc, PMIX_SUCCESS, ref, cbdata);
            return PMIX_SUCCESS;
        }
        return (pmix_status_t)ref;
    }
    pthread_mutex_unlock(&lib.mu);
    if (NULL == cbfunc) {
        struct frame f;
        memset(&local, 0, sizeof(local));
        local.reg = g;
        rc = send_request(&local, T_REGISTER, build_register, &a);
        if (PMIX_SUCCESS == rc) {
            rc = await_reply(&local, -1, &f);
            req_release(&local);
        } else {
            g->state = -1;
        }
        if (PMIX_ERR_TIMEOUT == rc) {
            g->state = -1;
        }
        rc = settle_reg(g, rc);
        return PMIX_SUCCESS == rc ? (pmix_status_t)ref : rc;
    }
    r = calloc(1, sizeof(*r));
    if (NULL == r) {
        pthread_mutex_lock(&lib.mu);
        unlink_reg_locked(g);
        pthread_mutex_unlock(&lib.mu);
        reg_free(g);
        return PMIX_ERR_NOMEM;
    }
    r->reg = g;
    r->cb = reg_reply;
    r->ctx = (void *)cbfunc;
    r->cbdata = cbdata;
    rc = send_request(r, T_REGISTER, build_register, &a);
    if (PMIX_SUCCESS != rc) {
        free(r);
        g->state = -1;
        settle_reg(g, rc);
    }
    return rc;
}

PMIX_EXPORT pmix_status_t PMIx_Deregister_event_handler(size_t ref, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    struct reg *g;
    uint64_t id;
    if (NULL == cbfunc) {
        WOULD_BLOCK_IN_HANDLER();
    }
    pthread_mutex_lock(&lib.mu);
    if (0 == lib.inits) {
        pthread_mutex_unlock(&lib.mu);
        return PMIX_ERR_INIT;
    }
    for (g = lib.regs; NULL != g && (g->ref != ref || g->dropped); g = g->next) {
    }
    if (NULL == g) {
        /* A reference never handed out, or already removed: the callback
         * is still called (with the error), as OpenPMIx calls it for
         * every request, so a caller waiting on it does not hang. */
        pthread_mutex_unlock(&lib.mu);
        if (NULL == cbfunc) {
            return PMIX_ERR_NOT_FOUND;
        }
        later_op(cbfunc, PMIX_ERR_NOT_FOUND, cbdata);
        return PMIX_SUCCESS;
    }
    reg_unplace_locked(g);
    if (lib.singleton || REG_OK != g->state || !g->returned) {
        /* A singleton's, or one whose registration has not completed:
         * that one is dropped at the agent when it does. */
        if (lib.singleton) {
            unlink_reg_locked(g);
            reg_free(g);
        } else {
            g->dropped = 1;
        }
        pthread_mutex_unlock(&lib.mu);
        return answer(PMIX_SUCCESS, cbfunc, cbdata);
    }
    id = g->agent_id;
    unlink_reg_locked(g);
    reg_free(g);
    pthread_mutex_unlock(&lib.mu);
    return request(T_DEREGISTER, build_id, &id, cbfunc, cbdata);
}

struct notify_args {
    pmix_status_t code;
    pmix_data_range_t range;
    const pmix_info_t *info;
    size_t ninfo;
};

static void build_notify(struct fw *f, void *arg)
{
    struct notify_args *a = arg;
    fw_key(f, "c");
    wb_int(f->w, a->code);
    fw_key(f, "r");
    wb_uint(f->w, a->range);
    if (a->ninfo > 0 && NULL != a->info) {
        fw_key(f, "in");
        wb_infos(f->w, a->info, a->ninfo);
    }
}

struct local_wait {
    int done;
    pmix_op_cbfunc_t cbfunc;
    void *cbdata;
};

static void local_done(void *arg)
{
    struct local_wait *lw = arg;
    if (NULL != lw->cbfunc) {
        lw->cbfunc(PMIX_SUCCESS, lw->cbdata);
        free(lw);
        return;
    }
    pthread_mutex_lock(&lib.mu);
    lw->done = 1;
    pthread_cond_broadcast(&lib.cv);
    pthread_mutex_unlock(&lib.mu);
}

PMIX_EXPORT pmix_status_t PMIx_Notify_event(pmix_status_t status, const pmix_proc_t *source,
                                            pmix_data_range_t range, const pmix_info_t info[], size_t ninfo,
                                            pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    struct notify_args a = {status, range, info, ninfo};
    pmix_status_t rc;
    (void)source; /* the agent stamps the source: it is never taken from a client's word */
    if (PMIX_RANGE_PROC_LOCAL == range && PMIX_ERR_PROC_REQUESTED_ABORT == status && defer_abort()) {
        /* an abort asked for by the running handler, raised after its
         * chain (events.c): nothing to wait for, so allowed blocking too */
        return answer(PMIX_SUCCESS, cbfunc, cbdata);
    }
    if (NULL == cbfunc) {
        WOULD_BLOCK_IN_HANDLER();
    }
    rc = attached();
    if (PMIX_SUCCESS != rc) {
        return rc;
    }
    if (PMIX_RANGE_PROC_LOCAL == range) {
        /* This process's own chain, run on the progress thread. */
        struct local_wait *lw = calloc(1, sizeof(*lw)), stack;
        if (NULL != cbfunc) {
            if (NULL == lw) {
                return PMIX_ERR_NOMEM;
            }
            lw->cbfunc = cbfunc;
            lw->cbdata = cbdata;
            local_event(status, info, NULL == info ? 0 : ninfo, local_done, lw);
            return PMIX_SUCCESS;
        }
        free(lw);
        memset(&stack, 0, sizeof(stack));
        local_event(status, info, NULL == info ? 0 : ninfo, local_done, &stack);
        pthread_mutex_lock(&lib.mu);
        while (!stack.done) {
            pthread_cond_wait(&lib.cv, &lib.mu);
        }
        pthread_mutex_unlock(&lib.mu);
        return PMIX_SUCCESS;
    }
    if (range < PMIX_RANGE_RM || range > PMIX_RANGE_PROC_LOCAL) {
        return PMIX_ERR_BAD_PARAM;
    }
    if (NULL == cbfunc && PMIX_RANGE_SESSION != range && PMIX_RANGE_CUSTOM != range) {
        /* As OpenPMIx's, a blocking notify returns once the event is sent,
         * without waiting for the agent's answer (dropped when it comes):
         * the agent refuses an event of these ranges from a client only
         * when it has lost NATS. A session's or a custom range's event
         * depends on what the agent knows: that call waits. */
        return send_request(NULL, T_NOTIFY, build_notify, &a);
    }
    /* With a callback the event is sent before the call returns, so events
     * notified one after another leave in that order. */
    return request(T_NOTIFY, build_notify, &a, cbfunc, cbdata);
}

/* ---- publish, lookup, unpublish ---- */

struct infos_args {
    const pmix_info_t *info;
    size_t ninfo;
    char **keys;
    size_t nkeys;
    int keys_given;
};

static void build_infos(struct fw *f, void *arg)
{
    struct infos_args *a = arg;
    size_t i;
    if (a->keys_given) {
        fw_key(f, "ks");
        wb_array(f->w, (uint32_t)a->nkeys);
        for (i = 0; i < a->nkeys; i++) {
            wb_cstr(f->w, a->keys[i]);
        }
    }
    if (a->ninfo > 0 && NULL != a->info) {
        fw_key(f, "in");
        wb_infos(f->w, a->info, a->ninfo);
    }
}

PMIX_EXPORT pmix_status_t PMIx_Publish(const pmix_info_t info[], size_t ninfo)
{
    struct infos_args a = {info, ninfo, NULL, 0, 0};
    pmix_status_t rc;
    WOULD_BLOCK_IN_HANDLER();
    if (PMIX_SUCCESS != (rc = attached())) {
        return rc;
    }
    return request(T_PUBLISH, build_infos, &a, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Publish_nb(const pmix_info_t info[], size_t ninfo, pmix_op_cbfunc_t cbfunc,
                                          void *cbdata)
{
    struct infos_args a = {info, ninfo, NULL, 0, 0};
    pmix_status_t rc;
    if (NULL == cbfunc) {
        return PMIX_ERR_BAD_PARAM;
    }
    if (PMIX_SUCCESS != (rc = attached())) {
        return rc;
    }
    return request(T_PUBLISH, build_infos, &a, cbfunc, cbdata);
}

/* fill_pdata puts each value found into the first entry of pd with its
 * key that has none yet. */
static pmix_status_t fill_pdata(pmix_pdata_t *pd, size_t n, struct raw found)
{
    struct cur c = cur_of(found);
    uint32_t cnt, i;
    char *filled;
    if (NULL == found.p) {
        return PMIX_SUCCESS;
    }
    filled = calloc(n + 1, 1);
    if (NULL == filled) {
        return PMIX_ERR_NOMEM;
    }
    cnt = cur_array(&c);
    for (i = 0; i < cnt && !c.bad; i++) {
        pmix_proc_t p;
        uint32_t kl;
        const char *k;
        char key[PMIX_MAX_KEYLEN + 1];
        size_t j;
        if (3 != cur_array(&c) || cur_proc(&c, &p) < 0) {
            break;
        }
        k = cur_str(&c, &kl);
        if (c.bad || kl > PMIX_MAX_KEYLEN) {
            c.bad = 1;
            break;
        }
        memcpy(key, k, kl);
        key[kl] = '\0';
        for (j = 0; j < n; j++) {
            if (!filled[j] && 0 == strncmp(pd[j].key, key, PMIX_MAX_KEYLEN)) {
                break;
            }
        }
        if (j == n) {
            cur_skip(&c);
            continue;
        }
        filled[j] = 1;
        pd[j].proc = p;
        /* Overwritten, not destructed, as OpenPMIx does: the caller may
         * not have constructed the value. */
        if (cur_value(&c, &pd[j].value, key, 0) < 0) {
            PMIx_Value_destruct(&pd[j].value);
        }
    }
    free(filled);
    return c.bad ? PMIX_ERR_UNPACK_FAILURE : PMIX_SUCCESS;
}

PMIX_EXPORT pmix_status_t PMIx_Lookup(pmix_pdata_t data[], size_t ndata, const pmix_info_t info[], size_t ninfo)
{
    struct infos_args a = {info, ninfo, NULL, 0, 1};
    struct req r;
    struct frame f;
    pmix_status_t rc;
    size_t i;
    WOULD_BLOCK_IN_HANDLER();
    if (NULL == data || 0 == ndata) {
        return PMIX_ERR_BAD_PARAM;
    }
    if (PMIX_SUCCESS != (rc = attached())) {
        return rc;
    }
    a.keys = calloc(ndata, sizeof(char *));
    if (NULL == a.keys) {
        return PMIX_ERR_NOMEM;
    }
    for (i = 0; i < ndata; i++) {
        a.keys[i] = data[i].key;
    }
    a.nkeys = ndata;
    memset(&r, 0, sizeof(r));
    rc = send_request(&r, T_LOOKUP, build_infos, &a);
    free(a.keys);
    if (PMIX_SUCCESS != rc) {
        return rc;
    }
    rc = await_reply(&r, -1, &f);
    if (NULL != r.body && !r.lost) {
        pmix_status_t frc = fill_pdata(data, ndata, f.pd);
        if (PMIX_SUCCESS == rc) {
            rc = frc;
        }
    }
    req_release(&r);
    return rc;
}

static void lookup_reply(struct req *r, struct frame *f, pmix_status_t st)
{
    pmix_lookup_cbfunc_t cb = (pmix_lookup_cbfunc_t)r->ctx;
    pmix_pdata_t *arr = NULL;
    size_t n = 0;
    if (NULL != f && NULL != f->pd.p) {
        struct cur c = cur_of(f->pd);
        uint32_t cnt = cur_array(&c), i;
        if (cnt > 0) {
            arr = calloc(cnt, sizeof(*arr));
        }
        /* the keys first, then the values by key */
        for (i = 0; NULL != arr && i < cnt && !c.bad; i++) {
            pmix_proc_t p;
            uint32_t kl;
            const char *k;
            if (3 != cur_array(&c) || cur_proc(&c, &p) < 0) {
                break;
            }
            k = cur_str(&c, &kl);
            if (c.bad || kl > PMIX_MAX_KEYLEN) {
                break;
            }
            memcpy(arr[i].key, k, kl);
            cur_skip(&c);
        }
        if (NULL != arr) {
            n = cnt;
            if (PMIX_SUCCESS != fill_pdata(arr, n, f->pd) && PMIX_SUCCESS == st) {
                st = PMIX_ERR_UNPACK_FAILURE;
            }
        }
    }
    cb(st, arr, n, r->cbdata);
    PMIx_Pdata_free(arr, n);
    req_release(r);
    free(r);
}

static size_t argv_len(char **keys)
{
    size_t n = 0;
    while (NULL != keys && NULL != keys[n]) {
        n++;
    }
    return n;
}

PMIX_EXPORT pmix_status_t PMIx_Lookup_nb(char **keys, const pmix_info_t info[], size_t ninfo,
                                         pmix_lookup_cbfunc_t cbfunc, void *cbdata)
{
    struct infos_args a = {info, ninfo, keys, argv_len(keys), 1};
    struct req *r;
    pmix_status_t rc;
    if (NULL == cbfunc || NULL == keys) {
        return PMIX_ERR_BAD_PARAM;
    }
    if (PMIX_SUCCESS != (rc = attached())) {
        return rc;
    }
    if (0 == a.nkeys) {
        return PMIX_ERR_BAD_PARAM;
    }
    r = calloc(1, sizeof(*r));
    if (NULL == r) {
        return PMIX_ERR_NOMEM;
    }
    r->cb = lookup_reply;
    r->ctx = (void *)cbfunc;
    r->cbdata = cbdata;
    rc = send_request(r, T_LOOKUP, build_infos, &a);
    if (PMIX_SUCCESS != rc) {
        free(r);
    }
    return rc;
}

PMIX_EXPORT pmix_status_t PMIx_Unpublish(char **keys, const pmix_info_t info[], size_t ninfo)
{
    struct infos_args a = {info, ninfo, keys, argv_len(keys), NULL != keys && NULL != keys[0]};
    pmix_status_t rc;
    WOULD_BLOCK_IN_HANDLER();
    if (PMIX_SUCCESS != (rc = attached())) {
        return rc;
    }
    return request(T_UNPUBLISH, build_infos, &a, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Unpublish_nb(char **keys, const pmix_info_t info[], size_t ninfo,
                                            pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    struct infos_args a = {info, ninfo, keys, argv_len(keys), NULL != keys && NULL != keys[0]};
    pmix_status_t rc;
    if (NULL == cbfunc) {
        return PMIX_ERR_BAD_PARAM;
    }
    if (PMIX_SUCCESS != (rc = attached())) {
        return rc;
    }
    return request(T_UNPUBLISH, build_infos, &a, cbfunc, cbdata);
}

/* ---- Put, Commit, Store_internal, Get ---- */

static struct kept *kept_find(struct kept *list, const pmix_proc_t *p, const char *key)
{
    for (; NULL != list; list = list->next) {
        if ((NULL == p || same_proc(&list->proc, p)) && 0 == strcmp(list->key, key)) {
            return list;
        }
    }
    return NULL;
}

/* kept_set stores enc (taken) under (p, key) in *list. */
static void kept_set(struct kept **list, const pmix_proc_t *p, const char *key, int scope, struct wbuf *enc)
{
    struct kept *k = kept_find(*list, p, key);
    if (NULL == k) {
        k = calloc(1, sizeof(*k));
        if (NULL == k) {
            wb_free(enc);
            return;
        }
        if (NULL != p) {
            k->proc = *p;
        }
        snprintf(k->key, sizeof(k->key), "%s", key);
        k->next = *list;
        __atomic_store_n(list, k, __ATOMIC_RELEASE); /* local_get peeks at lib.stored */
    }
    free(k->enc);
    k->enc = enc->p;
    k->len = enc->len;
    k->scope = scope;
    k->pending = PMIX_INTERNAL != scope;
    memset(enc, 0, sizeof(*enc));
}

static int encode_value(const pmix_value_t *v, struct wbuf *w)
{
    memset(w, 0, sizeof(*w));
    if (wb_value(w, v) < 0 || w->oom) {
        wb_free(w);
        return -1;
    }
    return 0;
}

/* kept_value decodes a kept value for C. */
static pmix_value_t *kept_value(const struct kept *k)
{
    struct raw r = {k->enc, k->enc + k->len};
    struct cur c = cur_of(r);
    pmix_value_t *v = calloc(1, sizeof(*v));
    if (NULL != v && cur_value(&c, v, k->key, 0) < 0) {
        PMIx_Value_free(v, 1);
        v = NULL;
    }
    return v;
}

PMIX_EXPORT pmix_status_t PMIx_Put(pmix_scope_t scope, const char key[], pmix_value_t *val)
{
    struct wbuf enc;
    if (bad_key(key) || NULL == val) {
        return PMIX_ERR_BAD_PARAM;
    }
    if (encode_value(val, &enc) < 0) {
        return PMIX_ERR_NOT_SUPPORTED; /* a type that cannot leave the process */
    }
    pthread_mutex_lock(&lib.mu);
    if (0 == lib.inits) {
        pthread_mutex_unlock(&lib.mu);
        wb_free(&enc);
        return PMIX_ERR_INIT;
    }
    if (scope < PMIX_LOCAL || scope > PMIX_INTERNAL) {
        pthread_mutex_unlock(&lib.mu);
        wb_free(&enc);
        return PMIX_ERR_BAD_PARAM;
    }
    if (lib.singleton) {
        /* A singleton is the only reader of what it puts. */
        kept_set(&lib.stored, &lib.proc, key, scope, &enc);
    } else {
        kept_set(&lib.puts, NULL, key, scope, &enc);
    }
    pthread_mutex_unlock(&lib.mu);
    return PMIX_SUCCESS;
}

struct commit_args {
    struct kept **puts;
    size_t n;
};

static void build_commit(struct fw *f, void *arg)
{
    struct commit_args *a = arg;
    size_t i;
    fw_key(f, "pt");
    wb_array(f->w, (uint32_t)a->n);
    for (i = 0; i < a->n; i++) {
        wb_array(f->w, 3);
        wb_uint(f->w, (uint64_t)a->puts[i]->scope);
        wb_cstr(f->w, a->puts[i]->key);
        wb_raw(f->w, a->puts[i]->enc, a->puts[i]->len);
    }
}

static int by_key(const void *a, const void *b)
{
    return strcmp((*(struct kept *const *)a)->key, (*(struct kept *const *)b)->key);
}

/* Commit waits only for the agent to take the values, not for other
 * processes: it is allowed in a handler. */
PMIX_EXPORT pmix_status_t PMIx_Commit(void)
{
    struct commit_args a = {NULL, 0};
    struct kept *k, **copies = NULL;
    struct req r;
    struct frame f;
    pmix_status_t rc = attached();
    size_t i, n = 0;
    if (PMIX_ERR_UNREACH == rc && !lib.forked) {
        return PMIX_SUCCESS; /* a singleton has no one to commit to */
    }
    if (PMIX_SUCCESS != rc) {
        return rc;
    }
    /* copies of the pending values, so that a Put meanwhile is safe */
    pthread_mutex_lock(&lib.mu);
    for (k = lib.puts; NULL != k; k = k->next) {
        n += k->pending;
    }
    if (n > 0) {
        copies = calloc(n, sizeof(*copies));
    }
    for (k = lib.puts, i = 0; NULL != copies && NULL != k; k = k->next) {
        if (!k->pending) {
            continue;
        }
        copies[i] = malloc(sizeof(struct kept));
        if (NULL == copies[i]) {
            break;
        }
        *copies[i] = *k;
        copies[i]->enc = malloc(k->len);
        if (NULL == copies[i]->enc) {
            free(copies[i]);
            break;
        }
        memcpy(copies[i]->enc, k->enc, k->len);
        k->pending = 0;
        i++;
    }
    pthread_mutex_unlock(&lib.mu);
    if (0 == n) {
        return PMIX_SUCCESS;
    }
    if (NULL == copies || i < n) {
        rc = PMIX_ERR_NOMEM;
        n = i;
        goto out;
    }
    qsort(copies, n, sizeof(*copies), by_key);
    a.puts = copies;
    a.n = n;
    memset(&r, 0, sizeof(r));
    rc = send_request(&r, T_COMMIT, build_commit, &a);
    if (PMIX_SUCCESS == rc) {
        rc = await_reply(&r, -1, &f);
        req_release(&r);
    }
out:
    if (PMIX_SUCCESS != rc) {
        /* the values stay pending: the next Commit sends them */
        pthread_mutex_lock(&lib.mu);
        for (i = 0; i < n; i++) {
            struct kept *again = kept_find(lib.puts, NULL, copies[i]->key);
            if (NULL != again && PMIX_INTERNAL != again->scope) {
                again->pending = 1;
            }
        }
        pthread_mutex_unlock(&lib.mu);
    }
    for (i = 0; i < n; i++) {
        free(copies[i]->enc);
        free(copies[i]);
    }
    free(copies);
    return rc;
}

PMIX_EXPORT pmix_status_t PMIx_Store_internal(const pmix_proc_t *proc, const char key[], pmix_value_t *val)
{
    struct wbuf enc;
    pmix_proc_t p;
    if (NULL == proc || bad_key(key) || NULL == val) {
        return PMIX_ERR_BAD_PARAM;
    }
    if (encode_value(val, &enc) < 0) {
        return PMIX_ERR_NOT_SUPPORTED;
    }
    pthread_mutex_lock(&lib.mu);
    if (0 == lib.inits) {
        pthread_mutex_unlock(&lib.mu);
        wb_free(&enc);
        return PMIX_ERR_INIT;
    }
    fix_proc(&p, proc);
    if (!lib.singleton && same_proc(&p, &lib.proc)) {
        kept_set(&lib.puts, NULL, key, PMIX_INTERNAL, &enc);
    } else {
        kept_set(&lib.stored, &p, key, 0, &enc);
    }
    pthread_mutex_unlock(&lib.mu);
    return PMIX_SUCCESS;
}

/* singleton_value is the job-level info of a singleton's own job of one
 * process, as OpenPMIx gives a singleton. */
static pmix_value_t *singleton_value(const pmix_proc_t *p, const char *key)
{
    pmix_value_t *v;
    uint32_t u32 = 1;
    uint16_t u16 = 0;
    if (0 != strncmp(p->nspace, lib.proc.nspace, PMIX_MAX_NSLEN) ||
        (PMIX_RANK_WILDCARD != p->rank && p->rank != lib.proc.rank)) {
        return NULL;
    }
    v = calloc(1, sizeof(*v));
    if (NULL == v) {
        return NULL;
    }
    if (0 == strcmp(key, PMIX_JOB_SIZE) || 0 == strcmp(key, PMIX_LOCAL_SIZE) || 0 == strcmp(key, PMIX_UNIV_SIZE)) {
        PMIx_Value_load(v, &u32, PMIX_UINT32);
    } else if (0 == strcmp(key, PMIX_APPNUM)) {
        u32 = 0;
        PMIx_Value_load(v, &u32, PMIX_UINT32);
    } else if (0 == strcmp(key, PMIX_LOCAL_RANK) || 0 == strcmp(key, PMIX_NODE_RANK)) {
        PMIx_Value_load(v, &u16, PMIX_UINT16);
    } else if (0 == strcmp(key, PMIX_LOCAL_PEERS)) {
        PMIx_Value_load(v, "0", PMIX_STRING);
    } else if (0 == strcmp(key, PMIX_HOSTNAME)) {
        char host[256] = "";
        gethostname(host, sizeof(host) - 1);
        PMIx_Value_load(v, host, PMIX_STRING);
    } else {
        free(v);
        return NULL;
    }
    return v;
}

static int has_flag(const pmix_info_t *info, size_t ninfo, const char *key)
{
    size_t i;
    for (i = 0; NULL != info && i < ninfo; i++) {
        if (0 == strcmp(info[i].key, key)) {
            return flag_on(&info[i]);
        }
    }
    return 0;
}

static int proc_level(const char *key)
{
    return 0 == strcmp(key, PMIX_RANK) || 0 == strcmp(key, PMIX_LOCAL_RANK) || 0 == strcmp(key, PMIX_NODE_RANK) ||
           0 == strcmp(key, PMIX_APP_RANK);
}

/* local_get answers a Get in the process: 1 and *out set when found, 0
 * when the agent must be asked, -1 when NOT_FOUND. */
static int local_get(const pmix_proc_t *p, const char *key, const pmix_info_t *info, size_t ninfo,
                     pmix_value_t **out)
{
    struct kept *k;
    int own, self;
    *out = NULL;
    /* What Store_internal and a singleton keep: looked at under the lock
     * only when there is any (the common Get, of job info, takes none). */
    if (NULL != __atomic_load_n(&lib.stored, __ATOMIC_ACQUIRE) || lib.singleton) {
        pthread_mutex_lock(&lib.mu);
        k = kept_find(lib.stored, p, key);
        if (NULL != k) {
            *out = kept_value(k);
            pthread_mutex_unlock(&lib.mu);
            return NULL != *out ? 1 : -1;
        }
        pthread_mutex_unlock(&lib.mu);
        if (lib.singleton) {
            *out = singleton_value(p, key);
            return NULL != *out ? 1 : -1;
        }
    }
    own = 0 == strncmp(p->nspace, lib.proc.nspace, PMIX_MAX_NSLEN);
    if (!own && '\0' != lib.cluster[0]) {
        size_t cl = strlen(lib.cluster);
        own = 0 == strncmp(p->nspace, lib.cluster, cl) && ':' == p->nspace[cl] &&
              0 == strncmp(p->nspace + cl + 1, lib.proc.nspace, PMIX_MAX_NSLEN);
    }
    self = own && p->rank == lib.proc.rank;
    if (self) {
        pthread_mutex_lock(&lib.mu);
        k = kept_find(lib.puts, NULL, key);
        if (NULL != k) {
            *out = kept_value(k);
            pthread_mutex_unlock(&lib.mu);
            return NULL != *out ? 1 : -1;
        }
        pthread_mutex_unlock(&lib.mu);
    }
    if (self || (own && PMIX_RANK_WILDCARD == p->rank && !proc_level(key))) {
        pmix_value_t v;
        if (hello_lookup(key, &v)) {
            *out = malloc(sizeof(v));
            if (NULL != *out) {
                **out = v;
            } else {
                PMIx_Value_destruct(&v);
            }
            return NULL != *out ? 1 : -1;
        }
    }
    return has_flag(info, ninfo, PMIX_OPTIONAL) ? -1 : 0;
}

struct get_args {
    pmix_proc_t proc;
    const char *key;
    const pmix_info_t *info;
    size_t ninfo;
};

static void build_get(struct fw *f, void *arg)
{
    struct get_args *a = arg;
    fw_key(f, "src");
    wb_proc(f->w, &a->proc);
    fw_key(f, "ks");
    wb_array(f->w, 1);
    wb_cstr(f->w, a->key);
    if (a->ninfo > 0 && NULL != a->info) {
        fw_key(f, "in");
        wb_infos(f->w, a->info, a->ninfo);
    }
}

/* get_value takes the one value of a get's reply. */
static pmix_status_t get_value(struct frame *f, const char *key, pmix_value_t **out)
{
    struct cur c = cur_of(f->pd);
    pmix_proc_t p;
    uint32_t kl;
    *out = NULL;
    if (1 != cur_array(&c) || 3 != cur_array(&c) || cur_proc(&c, &p) < 0) {
        return PMIX_ERR_COMM_FAILURE;
    }
    cur_str(&c, &kl);
    *out = calloc(1, sizeof(pmix_value_t));
    if (NULL == *out) {
        return PMIX_ERR_NOMEM;
    }
    if (c.bad || cur_value(&c, *out, key, 0) < 0) {
        PMIx_Value_free(*out, 1);
        *out = NULL;
        return PMIX_ERR_COMM_FAILURE;
    }
    return PMIX_SUCCESS;
}

static void run_valuecb(struct work *w)
{
    pmix_value_t *v = w->body ? (pmix_value_t *)w->body : NULL;
    ((pmix_value_cbfunc_t)w->q)(w->st, v, w->p);
    /* As OpenPMIx: the value is the library's, valid during the callback. */
    if (NULL != v) {
        PMIx_Value_free(v, 1);
    }
    w->body = NULL;
}

static void later_value(pmix_value_cbfunc_t cbfunc, pmix_status_t st, pmix_value_t *v, void *cbdata)
{
    struct work *w = work_new(run_valuecb);
    if (NULL == w) {
        PMIx_Value_free(v, 1);
        return;
    }
    w->q = (void *)cbfunc;
    w->p = cbdata;
    w->st = st;
    w->body = (char *)v;
    enqueue(w);
}

static void get_reply(struct req *r, struct frame *f, pmix_status_t st)
{
    pmix_value_t *v = NULL;
    pmix_value_cbfunc_t cb = (pmix_value_cbfunc_t)r->ctx;
    if (PMIX_SUCCESS == st && NULL != f) {
        st = get_value(f, (const char *)r + sizeof(*r), &v);
    }
    cb(st, PMIX_SUCCESS == st ? v : NULL, r->cbdata);
    if (NULL != v) {
        PMIx_Value_free(v, 1);
    }
    req_release(r);
    free(r);
}

static pmix_status_t do_get(const pmix_proc_t *proc, const char key[], const pmix_info_t info[], size_t ninfo,
                            pmix_value_t **val, pmix_value_cbfunc_t cbfunc, void *cbdata)
{
    struct get_args a;
    pmix_value_t *v = NULL;
    pmix_status_t rc;
    int found;
    /* lib.proc and the job info do not change while initialised */
    if (0 == __atomic_load_n(&lib.inits, __ATOMIC_ACQUIRE)) {
        return PMIX_ERR_INIT;
    }
    if (NULL == proc) {
        memset(&a.proc, 0, sizeof(a.proc));
        memcpy(a.proc.nspace, lib.proc.nspace, sizeof(a.proc.nspace));
        a.proc.rank = PMIX_RANK_WILDCARD;
    } else {
        fix_proc(&a.proc, proc);
    }
    a.key = key;
    a.info = info;
    a.ninfo = ninfo;
    found = local_get(&a.proc, key, info, ninfo, &v);
    if (0 != found) {
        rc = found > 0 ? PMIX_SUCCESS : PMIX_ERR_NOT_FOUND;
        if (NULL == cbfunc) {
            *val = v;
            return rc;
        }
        later_value(cbfunc, rc, v, cbdata);
        return PMIX_SUCCESS;
    }
    if (NULL == cbfunc) {
        struct req r;
        struct frame f;
        memset(&r, 0, sizeof(r));
        rc = send_request(&r, T_GET, build_get, &a);
        if (PMIX_SUCCESS != rc) {
            return rc;
        }
        rc = await_reply(&r, -1, &f);
        if (PMIX_SUCCESS == rc) {
            rc = get_value(&f, key, val);
        }
        req_release(&r);
        return rc;
    } else {
        /* the key travels behind the request */
        size_t kl = strlen(key);
        struct req *r = calloc(1, sizeof(*r) + kl + 1);
        if (NULL == r) {
            return PMIX_ERR_NOMEM;
        }
        memcpy((char *)r + sizeof(*r), key, kl + 1);
        r->cb = get_reply;
        r->ctx = (void *)cbfunc;
        r->cbdata = cbdata;
        rc = send_request(r, T_GET, build_get, &a);
        if (PMIX_SUCCESS != rc) {
            free(r);
        }
        return rc;
    }
}

PMIX_EXPORT pmix_status_t PMIx_Get(const pmix_proc_t *proc, const char key[], const pmix_info_t info[],
                                   size_t ninfo, pmix_value_t **val)
{
    if (bad_key(key) || NULL == val) {
        return PMIX_ERR_BAD_PARAM;
    }
    *val = NULL;
    WOULD_BLOCK_IN_HANDLER();
    return do_get(proc, key, info, ninfo, val, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Get_nb(const pmix_proc_t *proc, const char key[], const pmix_info_t info[],
                                      size_t ninfo, pmix_value_cbfunc_t cbfunc, void *cbdata)
{
    if (bad_key(key) || NULL == cbfunc) {
        return PMIX_ERR_BAD_PARAM;
    }
    return do_get(proc, key, info, ninfo, NULL, cbfunc, cbdata);
}

/* ---- Fence, Connect, Disconnect ---- */

struct procs_args {
    const pmix_proc_t *procs;
    size_t nprocs;
    const pmix_info_t *info;
    size_t ninfo;
    const char *ns;
};

static void build_procs(struct fw *f, void *arg)
{
    struct procs_args *a = arg;
    if (a->nprocs > 0) {
        fw_key(f, "pc");
        wb_procs(f->w, a->procs, a->nprocs, lib.proc.nspace);
    }
    if (NULL != a->ns) {
        fw_key(f, "ns");
        wb_cstr(f->w, a->ns);
    }
    if (a->ninfo > 0 && NULL != a->info) {
        fw_key(f, "in");
        wb_infos(f->w, a->info, a->ninfo);
    }
}

/* tell_last sends the fence a (eligible, blocking) marked as the node's
 * last arrival at a partial barrier, and waits for its reply. */
static pmix_status_t tell_last(void *arg)
{
    struct procs_args *a = arg, marked = *a;
    pmix_info_t *info = calloc(a->ninfo + 1, sizeof(pmix_info_t));
    bool yes = true;
    pmix_status_t rc;
    if (NULL == info) {
        return PMIX_ERR_NOMEM;
    }
    if (a->ninfo > 0 && NULL != a->info) {
        memcpy(info, a->info, a->ninfo * sizeof(pmix_info_t)); /* borrowed: not freed here */
    } else {
        marked.ninfo = 0;
    }
    PMIX_INFO_LOAD(&info[marked.ninfo], "pmixbus.nodefence.last", &yes, PMIX_BOOL);
    marked.info = info;
    marked.ninfo++;
    rc = request(T_FENCE, build_procs, &marked, NULL, NULL);
    free(info);
    return rc;
}

static pmix_status_t fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[], size_t ninfo,
                           pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    struct procs_args a = {procs, nprocs, info, ninfo, NULL};
    pmix_status_t rc = attached();
    if (PMIX_ERR_UNREACH == rc && !lib.forked) {
        /* a singleton fences with itself */
        size_t i;
        pmix_proc_t self;
        self_proc(&self);
        rc = PMIX_SUCCESS;
        for (i = 0; i < nprocs; i++) {
            pmix_proc_t p;
            fix_proc(&p, &procs[i]);
            if (0 != strncmp(p.nspace, self.nspace, PMIX_MAX_NSLEN) ||
                (p.rank != self.rank && PMIX_RANK_WILDCARD != p.rank)) {
                rc = PMIX_ERR_UNREACH;
            }
        }
        return answer(rc, cbfunc, cbdata);
    }
    if (PMIX_SUCCESS != rc) {
        return rc;
    }
    /* A blocking fence of the whole job without data, when the job's
     * ranks share the node's barrier (nodefence.c); the _nb form goes to
     * the agent, which arrives at the barrier for it. */
    if (NULL == cbfunc && nf_eligible(procs, nprocs, info, ninfo, lib.proc.nspace) && nf_fence(&rc, tell_last, &a)) {
        return rc;
    }
    return request(T_FENCE, build_procs, &a, cbfunc, cbdata);
}

PMIX_EXPORT pmix_status_t PMIx_Fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                                     size_t ninfo)
{
    if (BAD_PROCS(procs, nprocs)) {
        return PMIX_ERR_BAD_PARAM;
    }
    WOULD_BLOCK_IN_HANDLER();
    return fence(procs, nprocs, info, ninfo, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Fence_nb(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                                        size_t ninfo, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    if (BAD_PROCS(procs, nprocs) || NULL == cbfunc) {
        return PMIX_ERR_BAD_PARAM;
    }
    return fence(procs, nprocs, info, ninfo, cbfunc, cbdata);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* connect_key names a set of procs whatever their order. */
static char *connect_key(const pmix_proc_t *procs, size_t n)
{
    char **names = calloc(n, sizeof(char *));
    char *key = NULL;
    size_t i, len = 1;
    if (NULL == names) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        pmix_proc_t p;
        fix_proc(&p, &procs[i]);
        if (asprintf(&names[i], "%s.%u", p.nspace, p.rank) < 0) {
            names[i] = NULL;
            goto out;
        }
        len += strlen(names[i]) + 1;
    }
    qsort(names, n, sizeof(char *), cmp_str);
    key = calloc(1, len);
    for (i = 0; NULL != key && i < n; i++) {
        strcat(key, names[i]);
        strcat(key, "\n");
    }
out:
    for (i = 0; i < n; i++) {
        free(names[i]);
    }
    free(names);
    return key;
}

static struct connect_rec *connect_find_locked(const char *key)
{
    struct connect_rec *c;
    for (c = lib.connects; NULL != c; c = c->next) {
        if (0 == strcmp(c->key, key)) {
            return c;
        }
    }
    return NULL;
}

/* connected records a connect's outcome: the keys the caller reads. */
static pmix_status_t connected(const char *key, struct frame *f, pmix_status_t st)
{
    struct connect_rec *c;
    char ns[PMIX_MAX_NSLEN + 1] = "";
    pmix_rank_t rank = f->has_rk ? (pmix_rank_t)f->rk : 0;
    char **grown;
    if (PMIX_SUCCESS != st) {
        return st;
    }
    if (NULL != f->ns) {
        size_t n = f->ns_len > PMIX_MAX_NSLEN ? PMIX_MAX_NSLEN : f->ns_len;
        memcpy(ns, f->ns, n);
        ns[n] = '\0';
    }
    pthread_mutex_lock(&lib.mu);
    if (0 == lib.inits) {
        pthread_mutex_unlock(&lib.mu);
        return PMIX_ERR_INIT; /* finalized meanwhile */
    }
    c = connect_find_locked(key);
    if (NULL == c) {
        c = calloc(1, sizeof(*c));
        if (NULL == c || NULL == (c->key = strdup(key))) {
            free(c);
            pthread_mutex_unlock(&lib.mu);
            return PMIX_ERR_NOMEM;
        }
        c->next = lib.connects;
        lib.connects = c;
    }
    grown = realloc(c->ns, (c->n + 1) * sizeof(char *));
    if (NULL != grown) {
        c->ns = grown;
        c->ns[c->n] = strdup(ns);
        if (NULL != c->ns[c->n]) {
            c->n++;
        }
    }
    if ('\0' != ns[0]) {
        pmix_value_t v;
        struct wbuf enc;
        PMIx_Value_load(&v, ns, PMIX_STRING);
        if (0 == encode_value(&v, &enc)) {
            kept_set(&lib.stored, &lib.proc, "pmixbus.cnct.nspace", 0, &enc);
        }
        PMIx_Value_destruct(&v);
        PMIx_Value_load(&v, &rank, PMIX_PROC_RANK);
        if (0 == encode_value(&v, &enc)) {
            kept_set(&lib.stored, &lib.proc, "pmixbus.cnct.rank", 0, &enc);
        }
    }
    pthread_mutex_unlock(&lib.mu);
    return PMIX_SUCCESS;
}

static void connect_reply(struct req *r, struct frame *f, pmix_status_t st)
{
    char *key = r->ctx;
    if (NULL != f) {
        st = connected(key, f, st);
    }
    r->opcb(st, r->cbdata);
    free(key);
    req_release(r);
    free(r);
}

static pmix_status_t do_connect(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[], size_t ninfo,
                                pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    struct procs_args a = {procs, nprocs, info, ninfo, NULL};
    pmix_status_t rc = attached();
    char *key;
    if (PMIX_SUCCESS != rc) {
        return rc;
    }
    key = connect_key(procs, nprocs);
    if (NULL == key) {
        return PMIX_ERR_NOMEM;
    }
    if (NULL == cbfunc) {
        struct req r;
        struct frame f;
        memset(&r, 0, sizeof(r));
        rc = send_request(&r, T_CONNECT, build_procs, &a);
        if (PMIX_SUCCESS == rc) {
            rc = await_reply(&r, -1, &f);
            if (PMIX_SUCCESS == rc) {
                rc = connected(key, &f, rc);
            }
            req_release(&r);
        }
        free(key);
        return rc;
    }
    rc = send_op(T_CONNECT, build_procs, &a, connect_reply, cbfunc, cbdata, key);
    if (PMIX_SUCCESS != rc) {
        free(key);
    }
    return rc;
}

PMIX_EXPORT pmix_status_t PMIx_Connect(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                                       size_t ninfo)
{
    if (NULL == procs || 0 == nprocs) {
        return PMIX_ERR_BAD_PARAM;
    }
    WOULD_BLOCK_IN_HANDLER();
    return do_connect(procs, nprocs, info, ninfo, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Connect_nb(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                                          size_t ninfo, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    if (NULL == procs || 0 == nprocs || NULL == cbfunc) {
        return PMIX_ERR_BAD_PARAM;
    }
    return do_connect(procs, nprocs, info, ninfo, cbfunc, cbdata);
}

/* disconnected forgets ns of the connects of key. */
static pmix_status_t disconnected(const char *key, const char *ns, pmix_status_t st)
{
    struct connect_rec *c;
    size_t i;
    if (PMIX_SUCCESS != st) {
        return st;
    }
    pthread_mutex_lock(&lib.mu);
    c = connect_find_locked(key);
    for (i = 0; NULL != c && i < c->n; i++) {
        if (0 == strcmp(c->ns[i], ns)) {
            free(c->ns[i]);
            memmove(&c->ns[i], &c->ns[i + 1], (c->n - i - 1) * sizeof(char *));
            c->n--;
            break;
        }
    }
    pthread_mutex_unlock(&lib.mu);
    return PMIX_SUCCESS;
}

static void disconnect_reply(struct req *r, struct frame *f, pmix_status_t st)
{
    char *key = r->ctx;
    (void)f;
    st = disconnected(key, key + strlen(key) + 1, st);
    r->opcb(st, r->cbdata);
    free(key);
    req_release(r);
    free(r);
}

static pmix_status_t do_disconnect(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                                   size_t ninfo, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    struct procs_args a = {NULL, 0, info, ninfo, NULL};
    pmix_status_t rc = attached();
    struct connect_rec *c;
    char *key, *both;
    size_t kl, nl;
    if (PMIX_SUCCESS != rc) {
        return rc;
    }
    key = connect_key(procs, nprocs);
    if (NULL == key) {
        return PMIX_ERR_NOMEM;
    }
    pthread_mutex_lock(&lib.mu);
    c = connect_find_locked(key);
    if (NULL == c || 0 == c->n) {
        pthread_mutex_unlock(&lib.mu);
        free(key);
        return PMIX_ERR_INVALID_NAMESPACE;
    }
    kl = strlen(key);
    nl = strlen(c->ns[c->n - 1]);
    both = malloc(kl + nl + 2);
    if (NULL != both) {
        memcpy(both, key, kl + 1);
        memcpy(both + kl + 1, c->ns[c->n - 1], nl + 1);
    }
    pthread_mutex_unlock(&lib.mu);
    free(key);
    if (NULL == both) {
        return PMIX_ERR_NOMEM;
    }
    a.ns = both + kl + 1;
    if ('\0' == a.ns[0]) {
        /* a connect with PMIX_CONNECT_XCHG_ONLY has no nspace to leave */
        rc = disconnected(both, a.ns, PMIX_SUCCESS);
        free(both);
        return answer(rc, cbfunc, cbdata);
    }
    if (NULL == cbfunc) {
        rc = request(T_DISCONNECT, build_procs, &a, NULL, NULL);
        rc = disconnected(both, a.ns, rc);
        free(both);
        return rc;
    }
    rc = send_op(T_DISCONNECT, build_procs, &a, disconnect_reply, cbfunc, cbdata, both);
    if (PMIX_SUCCESS != rc) {
        free(both);
    }
    return rc;
}

PMIX_EXPORT pmix_status_t PMIx_Disconnect(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                                          size_t ninfo)
{
    if (NULL == procs || 0 == nprocs) {
        return PMIX_ERR_BAD_PARAM;
    }
    WOULD_BLOCK_IN_HANDLER();
    return do_disconnect(procs, nprocs, info, ninfo, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Disconnect_nb(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                                             size_t ninfo, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    if (NULL == procs || 0 == nprocs || NULL == cbfunc) {
        return PMIX_ERR_BAD_PARAM;
    }
    return do_disconnect(procs, nprocs, info, ninfo, cbfunc, cbdata);
}

/* ---- Log ---- */

struct log_args {
    const pmix_info_t *data, *dirs;
    size_t ndata, ndirs;
};

static void build_log(struct fw *f, void *arg)
{
    struct log_args *a = arg;
    fw_key(f, "in");
    wb_infos(f->w, a->data, a->ndata);
    if (a->ndirs > 0 && NULL != a->dirs) {
        fw_key(f, "res");
        wb_infos(f->w, a->dirs, a->ndirs);
    }
}

/* Log waits only for the agent to store the message, never for another
 * process: like Commit, it is allowed in an event handler. */
PMIX_EXPORT pmix_status_t PMIx_Log(const pmix_info_t data[], size_t ndata, const pmix_info_t directives[],
                                   size_t ndirs)
{
    struct log_args a = {data, directives, ndata, ndirs};
    pmix_status_t rc;
    if (NULL == data || 0 == ndata || (NULL == directives && 0 < ndirs)) {
        return PMIX_ERR_BAD_PARAM;
    }
    if (PMIX_SUCCESS != (rc = attached())) {
        return rc;
    }
    return request(T_LOG, build_log, &a, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Log_nb(const pmix_info_t data[], size_t ndata, const pmix_info_t directives[],
                                      size_t ndirs, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    struct log_args a = {data, directives, ndata, ndirs};
    pmix_status_t rc;
    if (NULL == data || 0 == ndata || (NULL == directives && 0 < ndirs) || NULL == cbfunc) {
        return PMIX_ERR_BAD_PARAM;
    }
    if (PMIX_SUCCESS != (rc = attached())) {
        return rc;
    }
    return request(T_LOG, build_log, &a, cbfunc, cbdata);
}
