/*
 * cabi.h — what the C entry points (forward.c) and the Go bridge share:
 * the trampolines through which Go calls the application's C callbacks,
 * and the value builders Go uses to hand out malloc'd C data.
 */
#ifndef CABI_H
#define CABI_H

#include <stdint.h>

#include "pmix.h"

/* Go → C: call the application's callbacks. cabi_call_evhdlr marks the
 * calling thread as running a handler for its duration, and gives the
 * handler cabi_evhdlr_done as its completion callback, with handle as its
 * cbdata. */
void cabi_call_evhdlr(pmix_notification_fn_t fn, size_t id, pmix_status_t code,
                      pmix_proc_t *source, pmix_info_t *info, size_t ninfo,
                      pmix_info_t *results, size_t nresults, uintptr_t handle);
void cabi_call_regcb(pmix_hdlr_reg_cbfunc_t fn, pmix_status_t status, size_t ref, void *cbdata);
void cabi_call_opcb(pmix_op_cbfunc_t fn, pmix_status_t status, void *cbdata);
void cabi_call_valuecb(pmix_value_cbfunc_t fn, pmix_status_t status, pmix_value_t *kv, void *cbdata);
void cabi_call_infocb(pmix_info_cbfunc_t fn, pmix_status_t status, void *cbdata);
void cabi_call_lookupcb(pmix_lookup_cbfunc_t fn, pmix_status_t status, pmix_pdata_t *data,
                        size_t ndata, void *cbdata);

/* Exit the process at once, as an abort asks (stdio flushed first). */
void cabi_exit(int status);

#endif
