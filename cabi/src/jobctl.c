/*
 * jobctl.c — PMIx_Job_control (+_nb). The cleanup requests, files and
 * directories the process asks to have removed once it ends
 * (PMIX_REGISTER_CLEANUP, PMIX_REGISTER_CLEANUP_DIR, with
 * PMIX_CLEANUP_RECURSIVE, _EMPTY, _IGNORE, _LEAVE_TOPDIR), as Open MPI 4.1
 * registers its session directory at MPI_Init, are the process's own:
 * OpenPMIx's server removes them when the client ends; here the process
 * does it itself, at its last PMIx_Finalize, after detaching. So only a
 * request for the caller itself is taken. Every other request (kill,
 * terminate, signal, pause, resume of procs or jobs, and the informational
 * ones) goes to the agent in a job-control frame, which its launch service
 * carries out (launch.ParseJobControl).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conn.h"

struct cleanup {
    struct cleanup *next;
    char **files, **dirs, **ignore;
    size_t nfiles, ndirs, nignore;
    int recursive, empty_only, keep_top;
};

static pthread_mutex_t cleanup_mu = PTHREAD_MUTEX_INITIALIZER;
static struct cleanup *cleanups;

static void list_free(char **l, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        free(l[i]);
    }
    free(l);
}

static void cleanup_free(struct cleanup *c)
{
    list_free(c->files, c->nfiles);
    list_free(c->dirs, c->ndirs);
    list_free(c->ignore, c->nignore);
    free(c);
}

/* split appends the comma-separated items of s to *l. */
static int split(const char *s, char ***l, size_t *n)
{
    const char *p = s;
    while ('\0' != *p) {
        const char *e = strchr(p, ',');
        size_t len = NULL == e ? strlen(p) : (size_t)(e - p);
        if (len > 0) {
            char **g = realloc(*l, (*n + 1) * sizeof(char *));
            if (NULL == g) {
                return -1;
            }
            *l = g;
            g[*n] = strndup(p, len);
            if (NULL == g[*n]) {
                return -1;
            }
            (*n)++;
        }
        if (NULL == e) {
            break;
        }
        p = e + 1;
    }
    return 0;
}

static int ignored(const struct cleanup *c, const char *name)
{
    size_t i;
    for (i = 0; i < c->nignore; i++) {
        if (0 == strcmp(c->ignore[i], name)) {
            return 1;
        }
    }
    return 0;
}

static void clean(const struct cleanup *c, const char *dir, int top)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    if (NULL != d) {
        while (NULL != (e = readdir(d))) {
            char *p;
            struct stat st;
            if (0 == strcmp(e->d_name, ".") || 0 == strcmp(e->d_name, "..") || ignored(c, e->d_name)) {
                continue;
            }
            if (asprintf(&p, "%s/%s", dir, e->d_name) < 0) {
                continue;
            }
            if (0 == lstat(p, &st) && S_ISDIR(st.st_mode)) {
                if (c->recursive) {
                    clean(c, p, 0);
                }
            } else if (!c->empty_only) {
                unlink(p);
            }
            free(p);
        }
        closedir(d);
    }
    if (!top || !c->keep_top) {
        rmdir(dir); /* fails, as it should, when something is left */
    }
}

/* forget_cleanups drops the registrations (a child forked after Init:
 * they are its parent's). Called with no other thread running. */
void forget_cleanups(void)
{
    while (NULL != cleanups) {
        struct cleanup *c = cleanups;
        cleanups = c->next;
        cleanup_free(c);
    }
}

void run_cleanups(void)
{
    struct cleanup *c, *next;
    size_t i;
    pthread_mutex_lock(&cleanup_mu);
    c = cleanups;
    cleanups = NULL;
    pthread_mutex_unlock(&cleanup_mu);
    /* in the order registered */
    {
        struct cleanup *rev = NULL;
        while (NULL != c) {
            next = c->next;
            c->next = rev;
            rev = c;
            c = next;
        }
        c = rev;
    }
    for (; NULL != c; c = next) {
        next = c->next;
        for (i = 0; i < c->nfiles; i++) {
            const char *base = strrchr(c->files[i], '/');
            if (!ignored(c, NULL == base ? c->files[i] : base + 1)) {
                unlink(c->files[i]);
            }
        }
        for (i = 0; i < c->ndirs; i++) {
            clean(c, c->dirs[i], 1);
        }
        cleanup_free(c);
    }
}

static int is_bool(const pmix_info_t *in, int *out)
{
    if (PMIX_BOOL != in->value.type) {
        return 0;
    }
    *out = in->value.data.flag;
    return 1;
}

static pmix_status_t parse_cleanup(const pmix_info_t *dirs, size_t n, struct cleanup *c)
{
    size_t i;
    for (i = 0; i < n; i++) {
        const pmix_info_t *in = &dirs[i];
        if (0 == strcmp(in->key, PMIX_REGISTER_CLEANUP) || 0 == strcmp(in->key, PMIX_REGISTER_CLEANUP_DIR) ||
            0 == strcmp(in->key, PMIX_CLEANUP_IGNORE)) {
            char ***l = 0 == strcmp(in->key, PMIX_REGISTER_CLEANUP) ? &c->files
                       : 0 == strcmp(in->key, PMIX_REGISTER_CLEANUP_DIR) ? &c->dirs : &c->ignore;
            size_t *ln = l == &c->files ? &c->nfiles : l == &c->dirs ? &c->ndirs : &c->nignore;
            if (PMIX_STRING != in->value.type) {
                return PMIX_ERR_BAD_PARAM;
            }
            if (NULL != in->value.data.string && split(in->value.data.string, l, ln) < 0) {
                return PMIX_ERR_NOMEM;
            }
        } else if (0 == strcmp(in->key, PMIX_CLEANUP_RECURSIVE)) {
            if (!is_bool(in, &c->recursive)) return PMIX_ERR_BAD_PARAM;
        } else if (0 == strcmp(in->key, PMIX_CLEANUP_EMPTY)) {
            if (!is_bool(in, &c->empty_only)) return PMIX_ERR_BAD_PARAM;
        } else if (0 == strcmp(in->key, PMIX_CLEANUP_LEAVE_TOPDIR)) {
            if (!is_bool(in, &c->keep_top)) return PMIX_ERR_BAD_PARAM;
        } else {
            return PMIX_ERR_NOT_SUPPORTED;
        }
    }
    return 0 == c->nfiles && 0 == c->ndirs ? PMIX_ERR_BAD_PARAM : PMIX_SUCCESS;
}

/* is_cleanup reports whether the directives are cleanup requests, which
 * the process keeps. */
static int is_cleanup(const pmix_info_t *dirs, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        if (0 == strncmp(dirs[i].key, PMIX_REGISTER_CLEANUP, PMIX_MAX_KEYLEN) ||
            0 == strncmp(dirs[i].key, PMIX_REGISTER_CLEANUP_DIR, PMIX_MAX_KEYLEN)) {
            return 1;
        }
    }
    return 0;
}

struct jctrl_args {
    const pmix_proc_t *targets;
    size_t ntargets;
    const pmix_info_t *dirs;
    size_t ndirs;
};

static void build_jctrl(struct fw *f, void *arg)
{
    struct jctrl_args *a = arg;
    if (a->ntargets > 0) {
        fw_key(f, "pc");
        wb_procs(f->w, a->targets, a->ntargets, lib.proc.nspace);
    }
    if (a->ndirs > 0) {
        fw_key(f, "in");
        wb_infos(f->w, a->dirs, a->ndirs);
    }
}

static pmix_status_t job_control(const pmix_proc_t targets[], size_t ntargets, const pmix_info_t directives[],
                                 size_t ndirs)
{
    struct cleanup *c;
    pmix_proc_t me;
    pmix_status_t rc;
    pthread_mutex_lock(&lib.mu);
    if (0 == lib.inits) {
        pthread_mutex_unlock(&lib.mu);
        return PMIX_ERR_INIT;
    }
    me = lib.proc;
    pthread_mutex_unlock(&lib.mu);
    if (1 != ntargets) {
        return PMIX_ERR_NOT_SUPPORTED;
    }
    if (('\0' != targets[0].nspace[0] && 0 != strncmp(targets[0].nspace, me.nspace, PMIX_MAX_NSLEN)) ||
        targets[0].rank != me.rank) {
        return PMIX_ERR_NOT_SUPPORTED;
    }
    c = calloc(1, sizeof(*c));
    if (NULL == c) {
        return PMIX_ERR_NOMEM;
    }
    rc = parse_cleanup(directives, ndirs, c);
    if (PMIX_SUCCESS != rc) {
        cleanup_free(c);
        return rc;
    }
    pthread_mutex_lock(&cleanup_mu);
    c->next = cleanups;
    cleanups = c;
    pthread_mutex_unlock(&cleanup_mu);
    return PMIX_SUCCESS;
}

PMIX_EXPORT pmix_status_t PMIx_Job_control(const pmix_proc_t targets[], size_t ntargets,
                                           const pmix_info_t directives[], size_t ndirs, pmix_info_t **results,
                                           size_t *nresults)
{
    if ((NULL == targets && 0 < ntargets) || (NULL == directives && 0 < ndirs)) {
        return PMIX_ERR_BAD_PARAM;
    }
    if (NULL != results) {
        *results = NULL;
    }
    if (NULL != nresults) {
        *nresults = 0;
    }
    if (!is_cleanup(directives, ndirs)) {
        struct jctrl_args a = {targets, ntargets, directives, ndirs};
        return info_request_wait(T_JOB_CONTROL, build_jctrl, &a, results, nresults);
    }
    return job_control(targets, ntargets, directives, ndirs);
}

static void run_infocb(struct work *w)
{
    ((pmix_info_cbfunc_t)w->q)(PMIX_SUCCESS, NULL, 0, w->p, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Job_control_nb(const pmix_proc_t targets[], size_t ntargets,
                                              const pmix_info_t directives[], size_t ndirs,
                                              pmix_info_cbfunc_t cbfunc, void *cbdata)
{
    pmix_status_t rc;
    if ((NULL == targets && 0 < ntargets) || (NULL == directives && 0 < ndirs)) {
        return PMIX_ERR_BAD_PARAM;
    }
    if (!is_cleanup(directives, ndirs)) {
        struct jctrl_args a = {targets, ntargets, directives, ndirs};
        if (NULL == cbfunc) {
            pmix_info_t *res = NULL;
            size_t nres = 0;
            /* no callback to tell: wait here, as the cleanup path does */
            rc = info_request_wait(T_JOB_CONTROL, build_jctrl, &a, &res, &nres);
            PMIx_Info_free(res, nres);
            return rc;
        }
        return info_request(T_JOB_CONTROL, build_jctrl, &a, cbfunc, cbdata);
    }
    rc = job_control(targets, ntargets, directives, ndirs);
    /* A NULL cbfunc is allowed, as OpenPMIx allows it: Open MPI 4.1 passes
     * none. Never called from inside the _nb call. */
    if (PMIX_SUCCESS == rc && NULL != cbfunc) {
        struct work *w = work_new(run_infocb);
        if (NULL != w) {
            w->q = (void *)cbfunc;
            w->p = cbdata;
            enqueue(w);
        }
    }
    return rc;
}
