/* singleton.c runs without an agent: PMIx_Init must return
 * PMIX_ERR_UNREACH and still initialise as a singleton. It also exercises
 * the C data helpers, the key-value exchange of a singleton, PMIx_Abort
 * (PMIX_ERR_UNREACH: it returns), PMIx_Resolve_peers (the singleton
 * itself) and a stubbed function. It prints "name value"
 * lines and exits 0, or prints "FAIL ..." and exits 1. */
#include <stdio.h>
#include <string.h>

#include <pmix.h>

#include "datacheck.h"

/* A function the library stubs, declared as OpenPMIx 4.2.2's pmix.h
 * declares it (pmixbus's headers leave it out). */
pmix_status_t PMIx_Get_credential(const pmix_info_t info[], size_t ninfo, pmix_byte_object_t *credential);

static void evhdlr(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[],
                   size_t ninfo, pmix_info_t *results, size_t nresults,
                   pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id; (void)status; (void)source; (void)info; (void)ninfo; (void)results; (void)nresults;
    cbfunc(PMIX_EVENT_NO_ACTION_TAKEN, NULL, 0, NULL, NULL, cbdata);
}

int main(void)
{
    pmix_proc_t me;
    pmix_status_t rc;
    pmix_info_t info;
    pmix_value_t *val = NULL, kv;
    pmix_proc_t *peers = NULL;
    pmix_byte_object_t cred;
    size_t npeers = 0;

    CHECK(0 == PMIx_Initialized(), "initialized before init");
    datacheck();
    printf("error_string %s\n", PMIx_Error_string(PMIX_ERR_UNREACH));
    printf("range_string %s\n", PMIx_Data_range_string(PMIX_RANGE_SESSION));
    rc = PMIx_Init(&me, NULL, 0);
    printf("init %d\n", rc);
    printf("nspace %s\n", me.nspace);
    printf("rank %u\n", me.rank);
    CHECK(1 == PMIx_Initialized(), "not initialized after init");

    PMIX_INFO_LOAD(&info, "key", "value", PMIX_STRING);
    printf("publish %d\n", PMIx_Publish(&info, 1));
    PMIX_INFO_DESTRUCT(&info);
    rc = PMIx_Register_event_handler(NULL, 0, NULL, 0, evhdlr, NULL, NULL);
    printf("register %d\n", rc);
    printf("deregister %d\n", PMIx_Deregister_event_handler((size_t)rc, NULL, NULL));
    rc = PMIx_Get(&me, PMIX_JOB_SIZE, NULL, 0, &val);
    printf("get %d\n", rc);
    if (PMIX_SUCCESS == rc) {
        printf("job_size %s %u\n", PMIx_Data_type_string(val->type), val->data.uint32);
        PMIX_VALUE_RELEASE(val);
    }
    /* a singleton reads back what it put; its fence is with itself */
    PMIX_VALUE_LOAD(&kv, "mine", PMIX_STRING);
    rc = PMIx_Put(PMIX_GLOBAL, "own.key", &kv);
    PMIX_VALUE_DESTRUCT(&kv);
    CHECK(PMIX_SUCCESS == rc && PMIX_SUCCESS == PMIx_Commit(), "put: %s", PMIx_Error_string(rc));
    printf("fence %d\n", PMIx_Fence(NULL, 0, NULL, 0));
    rc = PMIx_Get(&me, "own.key", NULL, 0, &val);
    CHECK(PMIX_SUCCESS == rc && PMIX_STRING == val->type && 0 == strcmp("mine", val->data.string),
          "get of an own value: %s", PMIx_Error_string(rc));
    if (PMIX_SUCCESS == rc) {
        PMIX_VALUE_RELEASE(val);
    }
    printf("get_unknown %d\n", PMIx_Get(&me, "no.such.key", NULL, 0, &val));
    printf("connect %d\n", PMIx_Connect(&me, 1, NULL, 0));
    /* no RM to abort it: the singleton is told so and goes on, as with OpenPMIx */
    printf("abort %d\n", PMIx_Abort(3, "no one to ask", NULL, 0));
    printf("stub %d\n", PMIx_Get_credential(NULL, 0, &cred));
    rc = PMIx_Resolve_peers(NULL, me.nspace, &peers, &npeers);
    CHECK(PMIX_SUCCESS == rc && 1 == npeers && 0 == peers[0].rank, "a singleton's peers: %s, %zu", PMIx_Error_string(rc), npeers);
    PMIX_PROC_FREE(peers, npeers);
    printf("finalize %d\n", PMIx_Finalize(NULL, 0));
    printf("pmixbus %d\n", NULL != strstr(PMIx_Get_version(), "pmixbus"));
    CHECK(0 == PMIx_Initialized(), "initialized after finalize");
    return failed;
}
