/*
 * forward.c — the PMIx entry points that need the agent, with OpenPMIx's
 * const-correct prototypes (cgo cannot express const, so Go exports
 * goPMIx_* and these one-line forwarders give them their PMIx names), and
 * the trampolines between Go and the application's C callbacks.
 *
 * A blocking call made on a thread that is running one of the
 * application's event handlers returns PMIX_ERR_WOULD_BLOCK, as OpenPMIx
 * does: the handler runs on the library's handler goroutine, and OpenPMIx
 * programs are written for a library that cannot answer them from there.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "_cgo_export.h"
#include "cabi.h"

static __thread int in_handler;

void cabi_evhdlr_done(pmix_status_t status, pmix_info_t *results, size_t nresults,
                      pmix_op_cbfunc_t cbfunc, void *thiscbdata, void *notification_cbdata)
{
    goHandlerDone((uintptr_t)notification_cbdata, status, results, nresults);
    /* The results are copied: the handler may release them now. */
    if (NULL != cbfunc) {
        cbfunc(PMIX_SUCCESS, thiscbdata);
    }
}

void cabi_call_evhdlr(pmix_notification_fn_t fn, size_t id, pmix_status_t code,
                      pmix_proc_t *source, pmix_info_t *info, size_t ninfo,
                      pmix_info_t *results, size_t nresults, uintptr_t handle)
{
    in_handler++;
    fn(id, code, source, info, ninfo, results, nresults, cabi_evhdlr_done, (void *)handle);
    in_handler--;
}

void cabi_call_regcb(pmix_hdlr_reg_cbfunc_t fn, pmix_status_t status, size_t ref, void *cbdata)
{
    fn(status, ref, cbdata);
}

void cabi_call_opcb(pmix_op_cbfunc_t fn, pmix_status_t status, void *cbdata) { fn(status, cbdata); }

void cabi_call_valuecb(pmix_value_cbfunc_t fn, pmix_status_t status, pmix_value_t *kv, void *cbdata)
{
    fn(status, kv, cbdata);
}

void cabi_call_lookupcb(pmix_lookup_cbfunc_t fn, pmix_status_t status, pmix_pdata_t *data,
                        size_t ndata, void *cbdata)
{
    fn(status, data, ndata, cbdata);
}

void cabi_exit(int status)
{
    fflush(NULL);
    _exit(status);
}

#define WOULD_BLOCK_IN_HANDLER() \
    do {                         \
        if (in_handler > 0) {    \
            return PMIX_ERR_WOULD_BLOCK; \
        }                        \
    } while (0)

/* Init and Finalize are allowed in a handler when they only count: the
 * library is initialised there, and only the last Finalize waits (for the
 * handlers, among them the caller). */
PMIX_EXPORT pmix_status_t PMIx_Init(pmix_proc_t *proc, pmix_info_t info[], size_t ninfo)
{
    (void)info;
    (void)ninfo;
    return goPMIx_Init(proc);
}

PMIX_EXPORT int PMIx_Initialized(void) { return goPMIx_Initialized(); }

PMIX_EXPORT pmix_status_t PMIx_Finalize(const pmix_info_t info[], size_t ninfo)
{
    (void)info;
    (void)ninfo;
    return goPMIx_Finalize(in_handler > 0);
}

/* Abort is allowed from a handler: it does not wait for anything the
 * handler holds up, and does not return when the caller is among procs. */
PMIX_EXPORT pmix_status_t PMIx_Abort(int status, const char msg[], pmix_proc_t procs[], size_t nprocs)
{
    return goPMIx_Abort(status, (char *)msg, procs, nprocs);
}

PMIX_EXPORT void PMIx_Progress(void) {}

PMIX_EXPORT pmix_status_t PMIx_Register_event_handler(pmix_status_t codes[], size_t ncodes,
                                                      pmix_info_t info[], size_t ninfo,
                                                      pmix_notification_fn_t evhdlr,
                                                      pmix_hdlr_reg_cbfunc_t cbfunc, void *cbdata)
{
    if (NULL == cbfunc) {
        WOULD_BLOCK_IN_HANDLER();
    }
    return goPMIx_Register_event_handler(codes, ncodes, info, ninfo, evhdlr, cbfunc, cbdata);
}

PMIX_EXPORT pmix_status_t PMIx_Deregister_event_handler(size_t ref, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    if (NULL == cbfunc) {
        WOULD_BLOCK_IN_HANDLER();
    }
    return goPMIx_Deregister_event_handler(ref, cbfunc, cbdata);
}

PMIX_EXPORT pmix_status_t PMIx_Notify_event(pmix_status_t status, const pmix_proc_t *source,
                                            pmix_data_range_t range, const pmix_info_t info[],
                                            size_t ninfo, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)source; /* the agent stamps the source: it is never taken from a client's word */
    if (NULL == cbfunc) {
        WOULD_BLOCK_IN_HANDLER();
    }
    return goPMIx_Notify_event(status, range, (pmix_info_t *)info, ninfo, cbfunc, cbdata);
}

PMIX_EXPORT pmix_status_t PMIx_Publish(const pmix_info_t info[], size_t ninfo)
{
    WOULD_BLOCK_IN_HANDLER();
    return goPMIx_Publish((pmix_info_t *)info, ninfo, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Publish_nb(const pmix_info_t info[], size_t ninfo,
                                          pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    if (NULL == cbfunc) {
        return PMIX_ERR_BAD_PARAM;
    }
    return goPMIx_Publish((pmix_info_t *)info, ninfo, cbfunc, cbdata);
}

PMIX_EXPORT pmix_status_t PMIx_Lookup(pmix_pdata_t data[], size_t ndata, const pmix_info_t info[],
                                      size_t ninfo)
{
    WOULD_BLOCK_IN_HANDLER();
    return goPMIx_Lookup(data, ndata, (pmix_info_t *)info, ninfo);
}

PMIX_EXPORT pmix_status_t PMIx_Lookup_nb(char **keys, const pmix_info_t info[], size_t ninfo,
                                         pmix_lookup_cbfunc_t cbfunc, void *cbdata)
{
    if (NULL == cbfunc || NULL == keys) {
        return PMIX_ERR_BAD_PARAM;
    }
    return goPMIx_Lookup_nb(keys, (pmix_info_t *)info, ninfo, cbfunc, cbdata);
}

PMIX_EXPORT pmix_status_t PMIx_Unpublish(char **keys, const pmix_info_t info[], size_t ninfo)
{
    WOULD_BLOCK_IN_HANDLER();
    return goPMIx_Unpublish(keys, (pmix_info_t *)info, ninfo, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Unpublish_nb(char **keys, const pmix_info_t info[], size_t ninfo,
                                            pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    if (NULL == cbfunc) {
        return PMIX_ERR_BAD_PARAM;
    }
    return goPMIx_Unpublish(keys, (pmix_info_t *)info, ninfo, cbfunc, cbdata);
}

/* ---- the key-value exchange and the collectives ---- */

/* A key must be given and fit a pmix_key_t; it is read no further than
 * that, so an unterminated one is caught too. */
static int bad_key(const char key[])
{
    return NULL == key || '\0' == key[0] || strnlen(key, PMIX_MAX_KEYLEN + 1) > PMIX_MAX_KEYLEN;
}

#define BAD_PROCS(procs, nprocs) (NULL == (procs) && 0 < (nprocs))

PMIX_EXPORT pmix_status_t PMIx_Put(pmix_scope_t scope, const char key[], pmix_value_t *val)
{
    if (bad_key(key) || NULL == val) {
        return PMIX_ERR_BAD_PARAM;
    }
    return goPMIx_Put(scope, (char *)key, val);
}

/* Commit waits only for the agent to take the values, not for other
 * processes: it is allowed in a handler. */
PMIX_EXPORT pmix_status_t PMIx_Commit(void) { return goPMIx_Commit(); }

PMIX_EXPORT pmix_status_t PMIx_Store_internal(const pmix_proc_t *proc, const char key[],
                                              pmix_value_t *val)
{
    if (NULL == proc || bad_key(key) || NULL == val) {
        return PMIX_ERR_BAD_PARAM;
    }
    return goPMIx_Store_internal((pmix_proc_t *)proc, (char *)key, val);
}

PMIX_EXPORT pmix_status_t PMIx_Get(const pmix_proc_t *proc, const char key[],
                                   const pmix_info_t info[], size_t ninfo, pmix_value_t **val)
{
    if (bad_key(key) || NULL == val) {
        return PMIX_ERR_BAD_PARAM;
    }
    *val = NULL;
    WOULD_BLOCK_IN_HANDLER();
    return goPMIx_Get((pmix_proc_t *)proc, (char *)key, (pmix_info_t *)info, ninfo, val, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Get_nb(const pmix_proc_t *proc, const char key[],
                                      const pmix_info_t info[], size_t ninfo,
                                      pmix_value_cbfunc_t cbfunc, void *cbdata)
{
    if (bad_key(key) || NULL == cbfunc) {
        return PMIX_ERR_BAD_PARAM;
    }
    return goPMIx_Get((pmix_proc_t *)proc, (char *)key, (pmix_info_t *)info, ninfo, NULL, cbfunc, cbdata);
}

PMIX_EXPORT pmix_status_t PMIx_Fence(const pmix_proc_t procs[], size_t nprocs,
                                     const pmix_info_t info[], size_t ninfo)
{
    if (BAD_PROCS(procs, nprocs)) {
        return PMIX_ERR_BAD_PARAM;
    }
    WOULD_BLOCK_IN_HANDLER();
    return goPMIx_Fence((pmix_proc_t *)procs, nprocs, (pmix_info_t *)info, ninfo, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Fence_nb(const pmix_proc_t procs[], size_t nprocs,
                                        const pmix_info_t info[], size_t ninfo,
                                        pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    if (BAD_PROCS(procs, nprocs) || NULL == cbfunc) {
        return PMIX_ERR_BAD_PARAM;
    }
    return goPMIx_Fence((pmix_proc_t *)procs, nprocs, (pmix_info_t *)info, ninfo, cbfunc, cbdata);
}

/* Connect and Disconnect name their procs: none is an error. */
PMIX_EXPORT pmix_status_t PMIx_Connect(const pmix_proc_t procs[], size_t nprocs,
                                       const pmix_info_t info[], size_t ninfo)
{
    if (NULL == procs || 0 == nprocs) {
        return PMIX_ERR_BAD_PARAM;
    }
    WOULD_BLOCK_IN_HANDLER();
    return goPMIx_Connect((pmix_proc_t *)procs, nprocs, (pmix_info_t *)info, ninfo, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Connect_nb(const pmix_proc_t procs[], size_t nprocs,
                                          const pmix_info_t info[], size_t ninfo,
                                          pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    if (NULL == procs || 0 == nprocs || NULL == cbfunc) {
        return PMIX_ERR_BAD_PARAM;
    }
    return goPMIx_Connect((pmix_proc_t *)procs, nprocs, (pmix_info_t *)info, ninfo, cbfunc, cbdata);
}

PMIX_EXPORT pmix_status_t PMIx_Disconnect(const pmix_proc_t procs[], size_t nprocs,
                                          const pmix_info_t info[], size_t ninfo)
{
    if (NULL == procs || 0 == nprocs) {
        return PMIX_ERR_BAD_PARAM;
    }
    WOULD_BLOCK_IN_HANDLER();
    return goPMIx_Disconnect((pmix_proc_t *)procs, nprocs, (pmix_info_t *)info, ninfo, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Disconnect_nb(const pmix_proc_t procs[], size_t nprocs,
                                             const pmix_info_t info[], size_t ninfo,
                                             pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    if (NULL == procs || 0 == nprocs || NULL == cbfunc) {
        return PMIX_ERR_BAD_PARAM;
    }
    return goPMIx_Disconnect((pmix_proc_t *)procs, nprocs, (pmix_info_t *)info, ninfo, cbfunc, cbdata);
}
