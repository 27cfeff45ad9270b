/*
 * log.c — PMIx_Log and PMIx_Log_nb with OpenPMIx's const-correct
 * prototypes, forwarding to goPMIx_Log (log.go). Log waits only for the
 * agent to store the message, never for another process: like Commit, it
 * is allowed in an event handler.
 */
#include "_cgo_export.h"
#include "cabi.h"

PMIX_EXPORT pmix_status_t PMIx_Log(const pmix_info_t data[], size_t ndata,
                                   const pmix_info_t directives[], size_t ndirs)
{
    if (NULL == data || 0 == ndata || (NULL == directives && 0 < ndirs)) {
        return PMIX_ERR_BAD_PARAM;
    }
    return goPMIx_Log((pmix_info_t *)data, ndata, (pmix_info_t *)directives, ndirs, NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Log_nb(const pmix_info_t data[], size_t ndata,
                                      const pmix_info_t directives[], size_t ndirs,
                                      pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    if (NULL == data || 0 == ndata || (NULL == directives && 0 < ndirs) || NULL == cbfunc) {
        return PMIX_ERR_BAD_PARAM;
    }
    return goPMIx_Log((pmix_info_t *)data, ndata, (pmix_info_t *)directives, ndirs, cbfunc, cbdata);
}
