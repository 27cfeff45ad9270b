/*
 * jobcontrol.c — PMIx_Job_control and PMIx_Job_control_nb with OpenPMIx's
 * const-correct prototypes, forwarding to goPMIx_Job_control
 * (jobcontrol.go). Only the cleanup requests are served (what Open MPI
 * 4.1 sends for its session directories at MPI_Init); they wait for
 * nothing, so they are allowed in a handler.
 */
#include "_cgo_export.h"
#include "cabi.h"

PMIX_EXPORT pmix_status_t PMIx_Job_control(const pmix_proc_t targets[], size_t ntargets,
                                           const pmix_info_t directives[], size_t ndirs,
                                           pmix_info_t **results, size_t *nresults)
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
    return goPMIx_Job_control((pmix_proc_t *)targets, ntargets, (pmix_info_t *)directives, ndirs,
                              NULL, NULL);
}

PMIX_EXPORT pmix_status_t PMIx_Job_control_nb(const pmix_proc_t targets[], size_t ntargets,
                                              const pmix_info_t directives[], size_t ndirs,
                                              pmix_info_cbfunc_t cbfunc, void *cbdata)
{
    if ((NULL == targets && 0 < ntargets) || (NULL == directives && 0 < ndirs)) {
        return PMIX_ERR_BAD_PARAM;
    }
    /* A NULL cbfunc is allowed, as OpenPMIx allows it: Open MPI 4.1 passes
     * none, and nothing is called back then. */
    if (NULL == cbfunc) {
        return goPMIx_Job_control((pmix_proc_t *)targets, ntargets, (pmix_info_t *)directives,
                                  ndirs, NULL, NULL);
    }
    return goPMIx_Job_control((pmix_proc_t *)targets, ntargets, (pmix_info_t *)directives, ndirs,
                              cbfunc, cbdata);
}

void cabi_call_infocb(pmix_info_cbfunc_t fn, pmix_status_t status, void *cbdata)
{
    fn(status, NULL, 0, cbdata, NULL, NULL);
}
