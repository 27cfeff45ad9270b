/* layout.c prints the sizeof and offsetof values research §4.3 lists, one
 * "name value" per line, for the cabi layout test to compare. */
#include <stddef.h>
#include <stdio.h>

#include <pmix.h>

#define SIZE(t) printf("sizeof(%s) %zu\n", #t, sizeof(t))
#define ALIGN(t) printf("alignof(%s) %zu\n", #t, _Alignof(t))
#define OFF(t, f) printf("offsetof(%s.%s) %zu\n", #t, #f, offsetof(t, f))
#define VAL(c) printf("%s %lld\n", #c, (long long)(c))

int main(void)
{
    SIZE(pmix_status_t); SIZE(pmix_rank_t); SIZE(pmix_data_type_t);
    SIZE(pmix_data_range_t); SIZE(pmix_persistence_t); SIZE(pmix_scope_t);
    SIZE(pmix_info_directives_t);
    SIZE(pmix_proc_t); ALIGN(pmix_proc_t); OFF(pmix_proc_t, nspace); OFF(pmix_proc_t, rank);
    SIZE(pmix_value_t); ALIGN(pmix_value_t); OFF(pmix_value_t, type); OFF(pmix_value_t, data);
    printf("sizeof(pmix_value_t.data) %zu\n", sizeof(((pmix_value_t *)0)->data));
    SIZE(pmix_info_t); ALIGN(pmix_info_t); OFF(pmix_info_t, key); OFF(pmix_info_t, flags); OFF(pmix_info_t, value);
    SIZE(pmix_pdata_t); ALIGN(pmix_pdata_t); OFF(pmix_pdata_t, proc); OFF(pmix_pdata_t, key); OFF(pmix_pdata_t, value);
    SIZE(pmix_data_array_t); OFF(pmix_data_array_t, type); OFF(pmix_data_array_t, size); OFF(pmix_data_array_t, array);
    SIZE(pmix_byte_object_t); OFF(pmix_byte_object_t, bytes); OFF(pmix_byte_object_t, size);
    SIZE(pmix_app_t); OFF(pmix_app_t, cmd); OFF(pmix_app_t, argv); OFF(pmix_app_t, env); OFF(pmix_app_t, cwd);
    OFF(pmix_app_t, maxprocs); OFF(pmix_app_t, info); OFF(pmix_app_t, ninfo);
    SIZE(pmix_envar_t);
    VAL(PMIX_MAX_NSLEN); VAL(PMIX_MAX_KEYLEN);
    VAL(PMIX_RANK_WILDCARD); VAL(PMIX_RANK_UNDEF); VAL(PMIX_RANK_LOCAL_NODE); VAL(PMIX_RANK_INVALID);
    VAL(PMIX_RANK_LOCAL_PEERS); VAL(PMIX_RANK_VALID);
    VAL(PMIX_BOOL); VAL(PMIX_BYTE); VAL(PMIX_STRING); VAL(PMIX_SIZE); VAL(PMIX_PID); VAL(PMIX_INT);
    VAL(PMIX_INT8); VAL(PMIX_INT16); VAL(PMIX_INT32); VAL(PMIX_INT64); VAL(PMIX_UINT); VAL(PMIX_UINT8);
    VAL(PMIX_UINT16); VAL(PMIX_UINT32); VAL(PMIX_UINT64); VAL(PMIX_FLOAT); VAL(PMIX_DOUBLE);
    VAL(PMIX_TIMEVAL); VAL(PMIX_TIME); VAL(PMIX_STATUS); VAL(PMIX_VALUE); VAL(PMIX_PROC); VAL(PMIX_APP);
    VAL(PMIX_INFO); VAL(PMIX_PDATA); VAL(PMIX_BYTE_OBJECT); VAL(PMIX_KVAL); VAL(PMIX_PERSIST);
    VAL(PMIX_POINTER); VAL(PMIX_SCOPE); VAL(PMIX_DATA_RANGE); VAL(PMIX_COMMAND); VAL(PMIX_INFO_DIRECTIVES);
    VAL(PMIX_DATA_TYPE); VAL(PMIX_PROC_STATE); VAL(PMIX_PROC_INFO); VAL(PMIX_DATA_ARRAY); VAL(PMIX_PROC_RANK);
    VAL(PMIX_QUERY); VAL(PMIX_COMPRESSED_STRING); VAL(PMIX_ALLOC_DIRECTIVE); VAL(PMIX_IOF_CHANNEL);
    VAL(PMIX_ENVAR); VAL(PMIX_COORD); VAL(PMIX_REGATTR); VAL(PMIX_REGEX); VAL(PMIX_JOB_STATE);
    VAL(PMIX_STOR_ACCESS_TYPE);
    VAL(PMIX_INFO_REQD); VAL(PMIX_INFO_ARRAY_END); VAL(PMIX_INFO_REQD_PROCESSED); VAL(PMIX_INFO_QUALIFIER);
    VAL(PMIX_INFO_PERSISTENT);
    VAL(PMIX_SCOPE_UNDEF); VAL(PMIX_LOCAL); VAL(PMIX_REMOTE); VAL(PMIX_GLOBAL); VAL(PMIX_INTERNAL);
    VAL(PMIX_PERSIST_INDEF); VAL(PMIX_PERSIST_FIRST_READ); VAL(PMIX_PERSIST_PROC); VAL(PMIX_PERSIST_APP);
    VAL(PMIX_PERSIST_SESSION);
    VAL(PMIX_RANGE_RM); VAL(PMIX_RANGE_LOCAL); VAL(PMIX_RANGE_NAMESPACE); VAL(PMIX_RANGE_SESSION);
    VAL(PMIX_RANGE_GLOBAL); VAL(PMIX_RANGE_CUSTOM); VAL(PMIX_RANGE_PROC_LOCAL); VAL(PMIX_RANGE_INVALID);
    VAL(PMIX_ERR_UNREACH); VAL(PMIX_ERR_NOT_SUPPORTED); VAL(PMIX_ERR_WOULD_BLOCK); VAL(PMIX_ERR_NOT_FOUND);
    VAL(PMIX_ERR_PROC_REQUESTED_ABORT); VAL(PMIX_EVENT_ACTION_COMPLETE); VAL(PMIX_EXTERNAL_ERR_BASE);
    return 0;
}
