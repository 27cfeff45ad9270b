/* datacheck.h: checks of the C data helpers through 4.2.2's macros, shared
 * by the test programs (singleton.c runs them against both headers and
 * the library, helpers.c under the sanitizers). */
#ifndef DATACHECK_H
#define DATACHECK_H

#include <stdio.h>
#include <string.h>

#include <pmix.h>

#include "check.h"

static void datacheck(void)
{
    pmix_info_t *info;
    pmix_value_t v, *vp = NULL;
    pmix_status_t rc;
    pmix_data_array_t *da;
    pmix_proc_t procs[2];
    uint32_t u32 = 42;
    void *list;
    pmix_data_array_t conv;

    PMIX_INFO_CREATE(info, 3);
    CHECK(info[2].flags == PMIX_INFO_ARRAY_END, "INFO_CREATE end flag %u", info[2].flags);
    PMIX_INFO_LOAD(&info[0], PMIX_EVENT_HDLR_NAME, "name", PMIX_STRING);
    PMIX_INFO_LOAD(&info[1], PMIX_JOB_SIZE, &u32, PMIX_UINT32);
    PMIX_LOAD_PROCID(&procs[0], "ns", 0);
    PMIX_LOAD_PROCID(&procs[1], "ns", 1);
    PMIX_DATA_ARRAY_CREATE(da, 2, PMIX_PROC);
    memcpy(da->array, procs, sizeof(procs));
    PMIX_INFO_LOAD(&info[2], PMIX_EVENT_CUSTOM_RANGE, da, PMIX_DATA_ARRAY);
    PMIX_DATA_ARRAY_FREE(da);
    CHECK(0 == strcmp(info[0].value.data.string, "name"), "string %s", info[0].value.data.string);
    CHECK(42 == info[1].value.data.uint32, "uint32 %u", info[1].value.data.uint32);
    CHECK(2 == info[2].value.data.darray->size, "darray size");
    CHECK(1 == ((pmix_proc_t *)info[2].value.data.darray->array)[1].rank, "darray copy");

    PMIX_VALUE_CONSTRUCT(&v);
    rc = PMIx_Value_xfer(&v, &info[2].value);
    CHECK(PMIX_SUCCESS == rc && v.data.darray != info[2].value.data.darray, "xfer deep copies: %d", rc);
    PMIX_VALUE_DESTRUCT(&v);

    PMIX_VALUE_XFER(rc, vp, &info[0].value);
    CHECK(PMIX_SUCCESS == rc && 0 == strcmp(vp->data.string, "name"), "VALUE_XFER");
    PMIX_VALUE_RELEASE(vp);
    PMIX_INFO_FREE(info, 3);

    list = PMIx_Info_list_start();
    PMIx_Info_list_add(list, "a", "x", PMIX_STRING);
    PMIx_Info_list_add(list, "b", &u32, PMIX_UINT32);
    rc = PMIx_Info_list_convert(list, &conv);
    CHECK(PMIX_SUCCESS == rc && 2 == conv.size && PMIX_INFO == conv.type, "list convert %d", rc);
    CHECK(0 == strcmp(((pmix_info_t *)conv.array)[1].key, "b"), "list order");
    PMIx_Info_list_release(list);
    PMIX_DATA_ARRAY_DESTRUCT(&conv);

}

#endif
