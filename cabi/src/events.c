/*
 * events.c — event handlers: the registrations' local order, the agent's
 * invocations, and the process's own chains.
 *
 * The agent runs the chains of the events it delivers (RFC0002/RFC0018
 * order, docs/protocol.md "Handler invocation") and sends one invocation
 * per handler: the library runs it on the progress thread and answers with
 * its completion. PROC_LOCAL events and the library's own internal events
 * (PMIX_ERR_LOST_CONNECTION, PMIX_ERR_COMM_FAILURE) never reach the agent
 * — the agent refuses a PROC_LOCAL notify, and a lost connection has no
 * agent to ask — so the library orders those chains itself, with the
 * rules of bus/registry.go (placeLocked, planLocked): FIRST, then per
 * category (single code, several codes, default) its FIRST_IN_CATEGORY
 * handler, its list (prepended by default, APPEND at the end, BEFORE and
 * AFTER next to the handler named), its LAST_IN_CATEGORY handler, then
 * LAST. Each registration is placed when the agent accepts it, in the
 * order the agent answers, so both hold the same registrations in the
 * same order; the agent has already refused what cannot be placed.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"

/* ---- the local order ---- */

static void list_unlink(struct reg *r)
{
    struct reg **head = &lib.cat_list[r->cat];
    if (NULL != r->prev_cat) {
        r->prev_cat->next_cat = r->next_cat;
    } else if (*head == r) {
        *head = r->next_cat;
    }
    if (NULL != r->next_cat) {
        r->next_cat->prev_cat = r->prev_cat;
    }
    r->prev_cat = r->next_cat = NULL;
}

static void push_front(struct reg *r)
{
    struct reg **head = &lib.cat_list[r->cat];
    r->prev_cat = NULL;
    r->next_cat = *head;
    if (NULL != *head) {
        (*head)->prev_cat = r;
    }
    *head = r;
}

static void push_back(struct reg *r)
{
    struct reg *t = lib.cat_list[r->cat];
    if (NULL == t) {
        push_front(r);
        return;
    }
    while (NULL != t->next_cat) {
        t = t->next_cat;
    }
    t->next_cat = r;
    r->prev_cat = t;
    r->next_cat = NULL;
}

static void insert_before(struct reg *r, struct reg *t)
{
    r->next_cat = t;
    r->prev_cat = t->prev_cat;
    if (NULL != t->prev_cat) {
        t->prev_cat->next_cat = r;
    } else {
        lib.cat_list[r->cat] = r;
    }
    t->prev_cat = r;
}

static void insert_after(struct reg *r, struct reg *t)
{
    r->prev_cat = t;
    r->next_cat = t->next_cat;
    if (NULL != t->next_cat) {
        t->next_cat->prev_cat = r;
    }
    t->next_cat = r;
}

static struct reg *by_name_locked(const char *name)
{
    struct reg *r;
    for (r = lib.regs; NULL != r; r = r->next) {
        if (r->placed && '\0' != r->name[0] && 0 == strcmp(r->name, name)) {
            return r;
        }
    }
    return NULL;
}

void reg_place_locked(struct reg *r)
{
    int c = r->cat;
    switch (r->place) {
    case P_FIRST:
        if (NULL != lib.first) return;
        lib.first = r;
        break;
    case P_LAST:
        if (NULL != lib.last) return;
        lib.last = r;
        break;
    case P_FIRST_CAT:
        if (NULL != lib.cat_head[c]) return;
        lib.cat_head[c] = r;
        break;
    case P_LAST_CAT:
        if (NULL != lib.cat_tail[c]) return;
        lib.cat_tail[c] = r;
        break;
    case P_BEFORE:
    case P_AFTER: {
        struct reg *t = by_name_locked(r->target);
        int before = P_BEFORE == r->place;
        if (NULL == t || t->cat != c) return;
        if (t == lib.first || t == lib.cat_head[c]) {
            if (before) return;
            push_front(r);
        } else if (t == lib.last || t == lib.cat_tail[c]) {
            if (!before) return;
            push_back(r);
        } else if (before) {
            insert_before(r, t);
        } else {
            insert_after(r, t);
        }
        break;
    }
    case P_APPEND:
        push_back(r);
        break;
    default:
        push_front(r);
    }
    r->placed = 1;
}

void reg_unplace_locked(struct reg *r)
{
    int c = r->cat;
    if (!r->placed) {
        return;
    }
    r->placed = 0;
    if (lib.first == r) lib.first = NULL;
    else if (lib.last == r) lib.last = NULL;
    else if (lib.cat_head[c] == r) lib.cat_head[c] = NULL;
    else if (lib.cat_tail[c] == r) lib.cat_tail[c] = NULL;
    else list_unlink(r);
}

void reg_free(struct reg *r)
{
    free(r->codes);
    free(r->custom);
    free(r->affected);
    free(r);
}

static int reg_matches(const struct reg *r, pmix_status_t code)
{
    size_t i;
    if (CAT_DEFAULT == r->cat) {
        return 1;
    }
    for (i = 0; i < r->ncodes; i++) {
        if (r->codes[i] == code) {
            return 1;
        }
    }
    return 0;
}

static int proc_matches(const pmix_proc_t *a, const pmix_proc_t *b)
{
    const char *an = a->nspace, *bn = b->nspace;
    size_t cl = strlen(lib.cluster);
    /* "cluster:nspace" of this cluster is the nspace */
    if (cl > 0 && 0 == strncmp(an, lib.cluster, cl) && ':' == an[cl]) an += cl + 1;
    if (cl > 0 && 0 == strncmp(bn, lib.cluster, cl) && ':' == bn[cl]) bn += cl + 1;
    return 0 == strncmp(an, bn, PMIX_MAX_NSLEN) &&
           (a->rank == b->rank || PMIX_RANK_WILDCARD == a->rank || PMIX_RANK_WILDCARD == b->rank);
}

static int info_flag(const pmix_info_t *in)
{
    return PMIX_BOOL != in->value.type || in->value.data.flag;
}

/* passes is bus's eventView.passes for an event of this process (its
 * source is the process itself, a job event). */
static int passes(const struct reg *r, const pmix_info_t *info, size_t ninfo)
{
    size_t i, j, k;
    int nondefault = 0, has_affected = 0, hit = 0;
    for (i = 0; i < ninfo; i++) {
        if (0 == strcmp(info[i].key, PMIX_EVENT_NON_DEFAULT)) {
            nondefault = nondefault || info_flag(&info[i]);
        }
    }
    if (CAT_DEFAULT == r->cat && nondefault) {
        return 0;
    }
    /* levels: a job event needs the job level, which is the default
     * unless only the environment level was asked for */
    if (r->job_given ? !r->job : (r->env_given && r->env)) {
        return 0;
    }
    switch (r->range) {
    case PMIX_RANGE_UNDEF:
    case PMIX_RANGE_PROC_LOCAL:
    case PMIX_RANGE_LOCAL:
    case PMIX_RANGE_NAMESPACE:
    case PMIX_RANGE_SESSION:
    case PMIX_RANGE_GLOBAL:
        break;
    case PMIX_RANGE_CUSTOM:
        for (i = 0; i < r->ncustom && !hit; i++) {
            hit = proc_matches(&r->custom[i], &lib.proc);
        }
        if (!hit) return 0;
        break;
    default: /* RM: the source is no process */
        return 0;
    }
    if (0 == r->naffected) {
        return 1;
    }
    for (i = 0; i < ninfo; i++) {
        const pmix_value_t *v = &info[i].value;
        if (0 != strcmp(info[i].key, PMIX_EVENT_AFFECTED_PROC) && 0 != strcmp(info[i].key, PMIX_EVENT_AFFECTED_PROCS)) {
            continue;
        }
        has_affected = 1;
        if (PMIX_PROC == v->type && NULL != v->data.proc) {
            for (k = 0; k < r->naffected; k++) {
                if (proc_matches(&r->affected[k], v->data.proc)) return 1;
            }
        } else if (PMIX_DATA_ARRAY == v->type && NULL != v->data.darray && PMIX_PROC == v->data.darray->type) {
            const pmix_proc_t *ps = v->data.darray->array;
            for (j = 0; NULL != ps && j < v->data.darray->size; j++) {
                for (k = 0; k < r->naffected; k++) {
                    if (proc_matches(&r->affected[k], &ps[j])) return 1;
                }
            }
        }
    }
    (void)has_affected;
    return 0;
}

/* plan_locked is the chain for code: the handlers in order. */
static size_t plan_locked(pmix_status_t code, const pmix_info_t *info, size_t ninfo, struct reg ***out)
{
    size_t n = 0, cap = 8;
    struct reg **p = malloc(cap * sizeof(*p));
    int c;
#define ADD(r)                                                          \
    do {                                                                \
        if (NULL != (r) && reg_matches((r), code) && passes((r), info, ninfo)) { \
            if (n == cap) {                                             \
                struct reg **np_ = realloc(p, 2 * cap * sizeof(*p));    \
                if (NULL == np_) break;                                 \
                p = np_;                                                \
                cap *= 2;                                               \
            }                                                           \
            p[n++] = (r);                                               \
        }                                                               \
    } while (0)
    if (NULL == p) {
        *out = NULL;
        return 0;
    }
    ADD(lib.first);
    for (c = 0; c < 3; c++) {
        struct reg *r;
        ADD(lib.cat_head[c]);
        for (r = lib.cat_list[c]; NULL != r; r = r->next_cat) {
            ADD(r);
        }
        ADD(lib.cat_tail[c]);
    }
    ADD(lib.last);
#undef ADD
    *out = p;
    return n;
}

/* ---- invocations ---- */

/* One call of a handler, until its completion. */
struct invocation {
    int local;      /* of a local chain (chain set), else the agent's */
    struct chain *chain;
    uint64_t seq, id;
    pmix_status_t code;
    pmix_proc_t source;
    pmix_info_t *info, *results;
    size_t ninfo, nresults;
    struct wbuf prior; /* the results as given, encoded: edits show */
    int completed;
    int abort; /* the handler asked for an abort (defer_abort) */
    /* local invocations: when the chain passes the handler over, and
     * their place in lib.timed (kept there, expired, until Finalize: the
     * handler may still complete late, which is then ignored) */
    struct timespec deadline;
    int expired;
    struct invocation *next_timed;
};

#define DEFAULT_TIMEOUT 30.0 /* bus.DefaultHandlerTimeout */

static void unlink_timed_locked(struct invocation *inv)
{
    struct invocation **pp;
    for (pp = &lib.timed; NULL != *pp; pp = &(*pp)->next_timed) {
        if (*pp == inv) {
            *pp = inv->next_timed;
            inv->next_timed = NULL;
            return;
        }
    }
}

/* The invocation whose handler this thread is calling, until it returns
 * or completes. */
static __thread struct invocation *current;
/* An invocation completed inside its handler's call, which call_handler
 * frees once the handler returns. */
static __thread struct invocation *free_after;

/* The 2016-04-07 minutes let a handler ask for an abort by notifying
 * PMIX_ERR_PROC_REQUESTED_ABORT: "Once the current event callback stack
 * has completed, the new PMIX_ABORT event will be triggered". Notified
 * PROC_LOCAL from inside a handler that has not completed, it is not run
 * at once: the handler's completion carries pmixbus.evabort, and the chain
 * running it — the agent's, or the library's own — raises the abort once
 * it ended, as client/abort.go does. Unlike the Go client, which marks
 * every handler of the process still running, only the calling handler's
 * invocation is marked: the library knows which one asked. */
int defer_abort(void)
{
    if (NULL == current || __atomic_load_n(&current->completed, __ATOMIC_ACQUIRE)) {
        return 0;
    }
    current->abort = 1;
    return 1;
}

static void inv_free(struct invocation *inv)
{
    PMIx_Info_free(inv->info, inv->ninfo);
    PMIx_Info_free(inv->results, inv->nresults);
    wb_free(&inv->prior);
    free(inv);
}

struct work *invoke_work(struct cur *c, int entry, struct frame *f)
{
    struct invocation *inv = calloc(1, sizeof(*inv));
    struct work *w;
    if (NULL == inv) {
        return NULL;
    }
    if (entry) {
        /* [s, id, nm, c, src|nil, in, res] */
        uint64_t u;
        int64_t code;
        uint32_t nl;
        if (7 != cur_array(c)) {
            c->bad = 1;
        }
        cur_uint(c, UINT64_MAX, &inv->seq);
        cur_uint(c, UINT64_MAX, &inv->id);
        cur_str(c, &nl);
        cur_int(c, INT32_MIN, INT32_MAX, &code);
        inv->code = (pmix_status_t)code;
        if (!cur_nil(c)) {
            cur_proc(c, &inv->source);
        }
        cur_infos(c, &inv->info, &inv->ninfo, 0);
        cur_infos(c, &inv->results, &inv->nresults, 0);
        (void)u;
    } else {
        struct cur s = cur_of(f->src), in = cur_of(f->in), res = cur_of(f->res);
        inv->seq = f->s;
        inv->id = f->id;
        inv->code = (pmix_status_t)f->c;
        if (NULL != f->src.p && !cur_nil(&s)) {
            cur_proc(&s, &inv->source);
        }
        if (NULL != f->in.p) {
            cur_infos(&in, &inv->info, &inv->ninfo, 0);
        }
        if (NULL != f->res.p) {
            cur_infos(&res, &inv->results, &inv->nresults, 0);
        }
        c->bad = s.bad || in.bad || res.bad;
    }
    if (c->bad) {
        inv_free(inv);
        return NULL;
    }
    wb_infos(&inv->prior, inv->results, inv->nresults);
    w = work_new(run_invoke);
    if (NULL == w) {
        inv_free(inv);
        return NULL;
    }
    w->p = inv;
    return w;
}

static void send_done(uint64_t seq, pmix_status_t st, const pmix_info_t *added, size_t nadded, struct wbuf *prior)
{
    struct wbuf w = {0};
    struct fw f;
    if (lib.version >= 2) {
        /* Done = [s, st, res, pr or nil], an entry of an invoke-done-batch */
        wb_array(&w, 4);
        wb_uint(&w, seq);
        wb_int(&w, st);
        wb_infos(&w, added, nadded);
        if (NULL != prior) {
            wb_raw(&w, prior->p, prior->len);
        } else {
            wb_nil(&w);
        }
        if (!w.oom) {
            (void)send_done_entry(&w);
        }
        wb_free(&w);
        return;
    }
    fw_begin(&f, &w, T_INVOKE_DONE, seq);
    fw_key(&f, "st");
    wb_int(&w, st);
    if (nadded > 0) {
        fw_key(&f, "res");
        wb_infos(&w, added, nadded);
    }
    if (NULL != prior) {
        fw_key(&f, "pr");
        wb_raw(&w, prior->p, prior->len);
    }
    if (0 == fw_end(&f)) {
        (void)send_oneway(&w);
    }
    wb_free(&w);
}

static void chain_step(struct chain *ch, pmix_status_t st, pmix_info_t *added, size_t nadded);

/* evhdlr_done is the completion callback every handler gets. */
static void evhdlr_done(pmix_status_t status, pmix_info_t *results, size_t nresults, pmix_op_cbfunc_t cbfunc,
                        void *thiscbdata, void *notification_cbdata)
{
    struct invocation *inv = notification_cbdata;
    const pmix_info_t **edit = NULL;
    pmix_info_t *added = NULL;
    size_t nadded = 0, i, j;
    char *matched = NULL;
    struct wbuf now = {0};
    int inside = 0;
    if (NULL == inv || __atomic_exchange_n(&inv->completed, 1, __ATOMIC_ACQ_REL)) {
        return; /* a second completion, or one after its timeout */
    }
    if (inv->local) {
        pthread_mutex_lock(&lib.mu);
        unlink_timed_locked(inv);
        pthread_mutex_unlock(&lib.mu);
    }
    if (current == inv) {
        current = NULL; /* completed inside its call */
        inside = 1;
    }
    /* RFC0018: the prior results as the handler left them — edited in
     * place, a key emptied to remove an entry — and, of the results it
     * passed back, the entries matching a prior key not yet matched are
     * edits of it, the others new (cabi/doc.go, "Handlers"). */
    if (inv->nresults > 0) {
        edit = calloc(inv->nresults, sizeof(*edit));
        matched = calloc(inv->nresults, 1);
    }
    if (NULL != results && results != inv->results && nresults > 0) {
        added = calloc(nresults, sizeof(*added));
        for (i = 0; NULL != added && i < nresults; i++) {
            int was_edit = 0;
            for (j = 0; NULL != edit && NULL != matched && j < inv->nresults; j++) {
                if (!matched[j] && '\0' != inv->results[j].key[0] &&
                    0 == strncmp(inv->results[j].key, results[i].key, PMIX_MAX_KEYLEN)) {
                    matched[j] = 1;
                    edit[j] = &results[i];
                    was_edit = 1;
                    break;
                }
            }
            if (!was_edit) {
                PMIx_Info_xfer(&added[nadded++], &results[i]);
            }
        }
    }
    if (inv->abort) {
        pmix_info_t *grown = realloc(added, (nadded + 1) * sizeof(*added));
        if (NULL != grown) {
            bool yes = true;
            added = grown;
            memset(&added[nadded], 0, sizeof(added[nadded]));
            PMIx_Info_load(&added[nadded++], "pmixbus.evabort", &yes, PMIX_BOOL);
        }
    }
    if (inv->nresults > 0) {
        /* the prior list now, encoded as it was at the call */
        size_t at = wb_array32(&now);
        for (i = 0; i < inv->nresults; i++) {
            const pmix_value_t *v = NULL != edit && NULL != edit[i] ? &edit[i]->value : &inv->results[i].value;
            size_t mark;
            wb_array(&now, 3);
            wb_str(&now, inv->results[i].key, strnlen(inv->results[i].key, PMIX_MAX_KEYLEN));
            wb_uint(&now, inv->results[i].flags & PMIX_INFO_REQD);
            mark = now.len;
            if (wb_value(&now, v) < 0) {
                now.len = mark;
                wb_array(&now, 2);
                wb_uint(&now, 0);
                wb_nil(&now);
            }
        }
        wb_patch32(&now, at, (uint32_t)inv->nresults);
    }
    if (inv->local) {
        chain_step(inv->chain, status, added, nadded); /* copies them */
    } else {
        int same = now.len == inv->prior.len && (0 == now.len || 0 == memcmp(now.p, inv->prior.p, now.len));
        send_done(inv->seq, status, added, nadded, inv->nresults > 0 && !same ? &now : NULL);
    }
    wb_free(&now);
    free(edit);
    free(matched);
    PMIx_Info_free(added, nadded);
    if (inside) {
        /* The handler may still read its info until it returns (OpenPMIx's
         * fault.c prints its affected proc after completing): call_handler
         * frees it then. */
        free_after = inv;
    } else {
        inv_free(inv);
    }
    /* The results are copied: the handler may release them now. */
    if (NULL != cbfunc) {
        cbfunc(PMIX_SUCCESS, thiscbdata);
    }
}

/* call_handler calls fn for inv; a registration's PMIX_EVENT_RETURN_OBJECT
 * (cbobject) goes at the end of the info, as OpenPMIx gives it back. */
static void call_handler(pmix_notification_fn_t fn, size_t ref, void *cbobject, struct invocation *inv)
{
    struct invocation *outer = current;
    if (NULL != cbobject) {
        pmix_info_t *in = realloc(inv->info, (inv->ninfo + 1) * sizeof(*in));
        if (NULL != in) {
            memset(&in[inv->ninfo], 0, sizeof(*in));
            PMIx_Info_load(&in[inv->ninfo], PMIX_EVENT_RETURN_OBJECT, cbobject, PMIX_POINTER);
            inv->info = in;
            inv->ninfo++;
        }
    }
    cabi_in_handler++;
    current = inv;
    free_after = NULL;
    fn(ref, inv->code, &inv->source, inv->info, inv->ninfo, inv->results, inv->nresults, evhdlr_done, inv);
    if (free_after == inv) {
        inv_free(inv);
    }
    free_after = NULL;
    current = outer;
    cabi_in_handler--;
}

void run_invoke(struct work *w)
{
    struct invocation *inv = w->p;
    struct reg *r;
    pmix_notification_fn_t fn = NULL;
    size_t ref = 0;
    void *cbobject = NULL;
    pthread_mutex_lock(&lib.mu);
    for (r = lib.regs; NULL != r; r = r->next) {
        if (REG_OK == r->state && !r->dropped && r->agent_id == inv->id) {
            break;
        }
    }
    /* A replayed event waits for its registering call to return. */
    while (NULL != r && !r->returned && !lib.stop) {
        pthread_cond_wait(&lib.cv, &lib.mu);
        for (r = lib.regs; NULL != r; r = r->next) {
            if (REG_OK == r->state && !r->dropped && r->agent_id == inv->id) {
                break;
            }
        }
    }
    if (NULL != r) {
        fn = r->fn;
        ref = r->ref;
        cbobject = r->cbobject;
    }
    pthread_mutex_unlock(&lib.mu);
    if (NULL == fn) {
        /* deregistered while the agent was invoking it */
        send_done(inv->seq, PMIX_EVENT_NO_ACTION_TAKEN, NULL, 0, NULL);
        inv_free(inv);
        return;
    }
    call_handler(fn, ref, cbobject, inv);
}

/* ---- local chains ---- */

struct chain {
    pmix_status_t code;
    pmix_info_t *info;
    size_t ninfo;
    pmix_info_t *results;
    size_t nresults;
    size_t *refs; /* the handlers, by reference, in order */
    size_t n, next;
    void (*done)(void *arg);
    void *arg;
    int abort; /* a handler asked for an abort: raised once the chain ended */
};

static void chain_free(struct chain *ch)
{
    PMIx_Info_free(ch->info, ch->ninfo);
    PMIx_Info_free(ch->results, ch->nresults);
    free(ch->refs);
    free(ch);
}

static void chain_run(struct work *w);

int expire_locked(void)
{
    struct timespec now;
    struct invocation **pp, *inv;
    long next = -1;
    clock_gettime(CLOCK_MONOTONIC, &now);
    for (pp = &lib.timed; NULL != (inv = *pp);) {
        long ms = (long)(inv->deadline.tv_sec - now.tv_sec) * 1000 + (inv->deadline.tv_nsec - now.tv_nsec) / 1000000;
        if (inv->expired) {
            pp = &inv->next_timed;
            continue;
        }
        if (ms <= 0 && !__atomic_exchange_n(&inv->completed, 1, __ATOMIC_ACQ_REL)) {
            /* passed over: the chain moves on with PMIX_ERR_TIMEOUT */
            struct work *w = work_new(chain_run);
            inv->expired = 1;
            if (NULL != w) {
                w->p = inv->chain;
                enqueue_locked(w);
            }
            pp = &inv->next_timed;
            continue;
        }
        if (ms > 0 && (next < 0 || ms < next)) {
            next = ms;
        }
        pp = &inv->next_timed;
    }
    return next > INT32_MAX ? INT32_MAX : (int)next;
}

void free_timed_locked(void)
{
    while (NULL != lib.timed) {
        struct invocation *inv = lib.timed;
        lib.timed = inv->next_timed;
        inv_free(inv);
    }
}

/* chain_step takes a handler's completion and queues the next. */
static void chain_step(struct chain *ch, pmix_status_t st, pmix_info_t *added, size_t nadded)
{
    struct work *w;
    size_t i;
    for (i = 0; i < nadded; i++) {
        if (0 == strcmp(added[i].key, "pmixbus.evabort")) {
            ch->abort = 1;
        }
    }
    if (nadded > 0) {
        pmix_info_t *all = calloc(ch->nresults + nadded, sizeof(*all));
        size_t i;
        if (NULL != all) {
            for (i = 0; i < ch->nresults; i++) {
                PMIx_Info_xfer(&all[i], &ch->results[i]);
            }
            for (i = 0; i < nadded; i++) {
                PMIx_Info_xfer(&all[ch->nresults + i], &added[i]);
            }
            PMIx_Info_free(ch->results, ch->nresults);
            ch->results = all;
            ch->nresults += nadded;
        }
    }
    if (PMIX_EVENT_ACTION_COMPLETE == st) {
        ch->next = ch->n;
    }
    w = work_new(chain_run);
    if (NULL == w) {
        return;
    }
    w->p = ch;
    enqueue(w);
}

static pmix_info_t *info_copy(const pmix_info_t *in, size_t n)
{
    pmix_info_t *out;
    size_t i;
    if (NULL == in || 0 == n) {
        return NULL;
    }
    out = calloc(n, sizeof(*out));
    for (i = 0; NULL != out && i < n; i++) {
        PMIx_Info_xfer(&out[i], &in[i]);
    }
    if (NULL != out) {
        out[n - 1].flags |= PMIX_INFO_ARRAY_END;
    }
    return out;
}

/* chain_run calls the next handler of the chain, or ends it. */
static void chain_run(struct work *w)
{
    struct chain *ch = w->p;
    while (ch->next < ch->n) {
        size_t ref = ch->refs[ch->next++];
        struct reg *r;
        pmix_notification_fn_t fn = NULL;
        void *cbobject = NULL;
        struct invocation *inv;
        double timeout = 0;
        pthread_mutex_lock(&lib.mu);
        for (r = lib.regs; NULL != r; r = r->next) {
            if (r->ref == ref && r->placed && !r->dropped) {
                fn = r->fn;
                cbobject = r->cbobject;
                timeout = r->timeout;
                break;
            }
        }
        pthread_mutex_unlock(&lib.mu);
        if (NULL == fn) {
            continue; /* deregistered meanwhile */
        }
        inv = calloc(1, sizeof(*inv));
        if (NULL == inv) {
            break;
        }
        inv->local = 1;
        inv->chain = ch;
        inv->code = ch->code;
        inv->source = lib.proc;
        inv->info = info_copy(ch->info, ch->ninfo);
        inv->ninfo = NULL == inv->info ? 0 : ch->ninfo;
        inv->results = info_copy(ch->results, ch->nresults);
        inv->nresults = NULL == inv->results ? 0 : ch->nresults;
        {
            double secs = timeout > 0 ? timeout : DEFAULT_TIMEOUT;
            clock_gettime(CLOCK_MONOTONIC, &inv->deadline);
            inv->deadline.tv_sec += (time_t)secs;
            inv->deadline.tv_nsec += (long)((secs - (double)(time_t)secs) * 1e9);
            if (inv->deadline.tv_nsec >= 1000000000L) {
                inv->deadline.tv_sec++;
                inv->deadline.tv_nsec -= 1000000000L;
            }
            pthread_mutex_lock(&lib.mu);
            inv->next_timed = lib.timed;
            lib.timed = inv;
            pthread_mutex_unlock(&lib.mu);
        }
        call_handler(fn, ref, cbobject, inv);
        return;
    }
    if (NULL != ch->done) {
        ch->done(ch->arg);
    }
    if (ch->abort) {
        pmix_info_t text;
        memset(&text, 0, sizeof(text));
        PMIx_Info_load(&text, PMIX_EVENT_TEXT_MESSAGE, "abort requested by an event handler", PMIX_STRING);
        local_event(PMIX_ERR_PROC_REQUESTED_ABORT, &text, 1, NULL, NULL);
        PMIx_Info_destruct(&text);
    }
    pthread_mutex_lock(&lib.mu);
    lib.chains--;
    pthread_mutex_unlock(&lib.mu);
    chain_free(ch);
}

static struct chain *chain_new_locked(pmix_status_t code, const pmix_info_t *info, size_t ninfo)
{
    struct chain *ch = calloc(1, sizeof(*ch));
    struct reg **plan = NULL;
    size_t i;
    if (NULL == ch) {
        return NULL;
    }
    ch->code = code;
    ch->info = info_copy(info, ninfo);
    ch->ninfo = NULL == ch->info ? 0 : ninfo;
    ch->n = plan_locked(code, ch->info, ch->ninfo, &plan);
    ch->refs = calloc(ch->n + 1, sizeof(size_t));
    for (i = 0; NULL != ch->refs && i < ch->n; i++) {
        ch->refs[i] = plan[i]->ref;
    }
    if (NULL == ch->refs) {
        ch->n = 0;
    }
    free(plan);
    lib.chains++;
    return ch;
}

void local_event(pmix_status_t code, const pmix_info_t *info, size_t ninfo, void (*done)(void *arg), void *arg)
{
    struct chain *ch;
    struct work *w = work_new(chain_run);
    pthread_mutex_lock(&lib.mu);
    ch = chain_new_locked(code, info, ninfo);
    if (NULL == ch || NULL == w) {
        pthread_mutex_unlock(&lib.mu);
        free(w);
        if (NULL != ch) {
            chain_free(ch);
        }
        if (NULL != done) {
            done(arg);
        }
        return;
    }
    ch->done = done;
    ch->arg = arg;
    w->p = ch;
    enqueue_locked(w);
    pthread_mutex_unlock(&lib.mu);
}

void internal_event_locked(pmix_status_t code, const char *msg)
{
    pmix_info_t text;
    struct chain *ch;
    struct work *w = work_new(chain_run);
    memset(&text, 0, sizeof(text));
    PMIx_Info_load(&text, PMIX_EVENT_TEXT_MESSAGE, msg, PMIX_STRING);
    ch = chain_new_locked(code, &text, 1);
    PMIx_Info_destruct(&text);
    if (NULL == ch || NULL == w) {
        free(w);
        if (NULL != ch) {
            lib.chains--;
            chain_free(ch);
        }
        return;
    }
    w->p = ch;
    enqueue_locked(w);
}

void local_event_one_locked(size_t ref, pmix_status_t code, const pmix_info_t *info, size_t ninfo)
{
    struct chain *ch = calloc(1, sizeof(*ch));
    struct work *w = work_new(chain_run);
    if (NULL == ch || NULL == w) {
        free(ch);
        free(w);
        return;
    }
    ch->code = code;
    ch->info = info_copy(info, ninfo);
    ch->ninfo = NULL == ch->info ? 0 : ninfo;
    ch->refs = malloc(sizeof(size_t));
    if (NULL == ch->refs) {
        chain_free(ch);
        free(w);
        return;
    }
    ch->refs[0] = ref;
    ch->n = 1;
    lib.chains++;
    w->p = ch;
    enqueue_locked(w);
}
