/*
 * helpers.c — the *_string functions and the helper functions that
 * programs built with OpenPMIx 4.2.3+ headers call where 4.2.2's macros
 * were inline (keys, procs, argv, constructors). Pure C, like values.c.
 */
#define _GNU_SOURCE /* asprintf, strndup, strcasecmp */
#include <stdio.h>

#include "objects.h"
#include "errors_table.h"

PMIX_EXPORT const char *PMIx_Get_version(void)
{
    return "pmixbus libpmix.so.2 (OpenPMIx 4.2.2 ABI, PMIx Standard: 4.2, Stable ABI: 0.0, Provisional ABI: 0.0)";
}

PMIX_EXPORT const char *PMIx_Error_string(pmix_status_t status)
{
    size_t i;
    for (i = 0; i < sizeof(cabi_errors) / sizeof(cabi_errors[0]); i++) {
        if (cabi_errors[i].code == status) {
            return cabi_errors[i].text;
        }
    }
    return "ERROR STRING NOT FOUND";
}

PMIX_EXPORT const char *PMIx_Data_range_string(pmix_data_range_t range)
{
    static const char *const names[] = {
        "UNDEFINED", "INTENDED FOR HOST RESOURCE MANAGER ONLY", "AVAIL ON LOCAL NODE ONLY",
        "AVAIL TO PROCESSES IN SAME JOB ONLY", "AVAIL TO PROCESSES IN SAME ALLOCATION ONLY",
        "AVAIL TO ANYONE WITH AUTHORIZATION", "AVAIL AS SPECIFIED IN DIRECTIVES",
        "AVAIL ON LOCAL PROC ONLY"};
    if (range < sizeof(names) / sizeof(names[0])) {
        return names[range];
    }
    return PMIX_RANGE_INVALID == range ? "INVALID" : "UNKNOWN";
}

PMIX_EXPORT const char *PMIx_Persistence_string(pmix_persistence_t persist)
{
    static const char *const names[] = {
        "INDEFINITE", "DELETE ON FIRST ACCESS", "RETAIN UNTIL PUBLISHING PROCESS TERMINATES",
        "RETAIN UNTIL APPLICATION OF PUBLISHING PROCESS TERMINATES",
        "RETAIN UNTIL ALLOCATION OF PUBLISHING PROCESS TERMINATES"};
    if (persist < sizeof(names) / sizeof(names[0])) {
        return names[persist];
    }
    return PMIX_PERSIST_INVALID == persist ? "INVALID" : "UNKNOWN PERSISTENCE";
}

PMIX_EXPORT const char *PMIx_Scope_string(pmix_scope_t scope)
{
    static const char *const names[] = {"UNDEFINED", "SHARE ON LOCAL NODE ONLY",
                                        "SHARE ON REMOTE NODES ONLY", "SHARE ACROSS ALL NODES",
                                        "STORE INTERNALLY"};
    return scope < sizeof(names) / sizeof(names[0]) ? names[scope] : "UNKNOWN SCOPE";
}

PMIX_EXPORT const char *PMIx_Data_type_string(pmix_data_type_t type)
{
    static const char *const names[] = {
        [PMIX_BOOL] = "PMIX_BOOL", [PMIX_BYTE] = "PMIX_BYTE", [PMIX_STRING] = "PMIX_STRING",
        [PMIX_SIZE] = "PMIX_SIZE", [PMIX_PID] = "PMIX_PID", [PMIX_INT] = "PMIX_INT",
        [PMIX_INT8] = "PMIX_INT8", [PMIX_INT16] = "PMIX_INT16", [PMIX_INT32] = "PMIX_INT32",
        [PMIX_INT64] = "PMIX_INT64", [PMIX_UINT] = "PMIX_UINT", [PMIX_UINT8] = "PMIX_UINT8",
        [PMIX_UINT16] = "PMIX_UINT16", [PMIX_UINT32] = "PMIX_UINT32", [PMIX_UINT64] = "PMIX_UINT64",
        [PMIX_FLOAT] = "PMIX_FLOAT", [PMIX_DOUBLE] = "PMIX_DOUBLE", [PMIX_TIMEVAL] = "PMIX_TIMEVAL",
        [PMIX_TIME] = "PMIX_TIME", [PMIX_STATUS] = "PMIX_STATUS", [PMIX_VALUE] = "PMIX_VALUE",
        [PMIX_PROC] = "PMIX_PROC", [PMIX_APP] = "PMIX_APP", [PMIX_INFO] = "PMIX_INFO",
        [PMIX_PDATA] = "PMIX_PDATA", [26] = "PMIX_BUFFER", [PMIX_BYTE_OBJECT] = "PMIX_BYTE_OBJECT",
        [PMIX_KVAL] = "PMIX_KVAL", [PMIX_PERSIST] = "PMIX_PERSIST", [PMIX_POINTER] = "PMIX_POINTER",
        [PMIX_SCOPE] = "PMIX_SCOPE", [PMIX_DATA_RANGE] = "PMIX_DATA_RANGE",
        [PMIX_COMMAND] = "PMIX_COMMAND", [PMIX_INFO_DIRECTIVES] = "PMIX_INFO_DIRECTIVES",
        [PMIX_DATA_TYPE] = "PMIX_DATA_TYPE", [PMIX_PROC_STATE] = "PMIX_PROC_STATE",
        [PMIX_PROC_INFO] = "PMIX_PROC_INFO", [PMIX_DATA_ARRAY] = "PMIX_DATA_ARRAY",
        [PMIX_PROC_RANK] = "PMIX_PROC_RANK", [PMIX_QUERY] = "PMIX_QUERY",
        [PMIX_COMPRESSED_STRING] = "PMIX_COMPRESSED_STRING",
        [PMIX_ALLOC_DIRECTIVE] = "PMIX_ALLOC_DIRECTIVE", [PMIX_IOF_CHANNEL] = "PMIX_IOF_CHANNEL",
        [PMIX_ENVAR] = "PMIX_ENVAR", [PMIX_COORD] = "PMIX_COORD", [PMIX_REGATTR] = "PMIX_REGATTR",
        [PMIX_REGEX] = "PMIX_REGEX", [PMIX_JOB_STATE] = "PMIX_JOB_STATE",
        [PMIX_LINK_STATE] = "PMIX_LINK_STATE", [PMIX_PROC_CPUSET] = "PMIX_PROC_CPUSET",
        [PMIX_GEOMETRY] = "PMIX_GEOMETRY", [PMIX_DEVICE_DIST] = "PMIX_DEVICE_DIST",
        [PMIX_ENDPOINT] = "PMIX_ENDPOINT", [PMIX_TOPO] = "PMIX_TOPO", [PMIX_DEVTYPE] = "PMIX_DEVTYPE",
        [PMIX_PROC_NSPACE] = "PMIX_PROC_NSPACE", [61] = "PMIX_PROC_STATS", [62] = "PMIX_DISK_STATS",
        [63] = "PMIX_NET_STATS", [64] = "PMIX_NODE_STATS", [PMIX_DATA_BUFFER] = "PMIX_DATA_BUFFER",
    };
    if (type < sizeof(names) / sizeof(names[0]) && NULL != names[type]) {
        return names[type];
    }
    return "NOT INITIALIZED";
}

PMIX_EXPORT const char *PMIx_Proc_state_string(pmix_proc_state_t state)
{
    switch (state) {
    case 0: return "UNDEFINED";
    case 1: return "PREPPED FOR LAUNCH";
    case 2: return "LAUNCH UNDERWAY";
    case 3: return "PROC READY FOR RESTART";
    case 4: return "PROC MARKED FOR TERMINATION";
    case 5: return "PROC EXECUTING";
    case 6: return "PROC HAS CONNECTED TO LOCAL PMIX SERVER";
    case 15: return "PROC HAS NOT TERMINATED";
    case 20: return "PROC HAS TERMINATED";
    case 50: return "PROC ERROR";
    case 51: return "PROC KILLED BY CMD";
    case 52: return "PROC ABNORMALLY ABORTED";
    case 53: return "PROC FAILED TO START";
    case 54: return "PROC ABORTED BY SIGNAL";
    case 55: return "PROC TERMINATED WITHOUT CALLING PMIx_Finalize";
    case 56: return "PROC LOST COMMUNICATION";
    case 57: return "PROC SENSOR BOUND EXCEEDED";
    case 58: return "PROC CALLED PMIx_Abort";
    case 59: return "PROC FAILED TO REPORT HEARTBEAT";
    case 60: return "PROC WAITING TO MIGRATE";
    case 61: return "PROC CANNOT BE RESTARTED";
    case 62: return "PROC TERMINATED WITH NON-ZERO STATUS";
    case 63: return "PROC FAILED TO LAUNCH";
    default: return "UNKNOWN STATE";
    }
}

PMIX_EXPORT const char *PMIx_Job_state_string(pmix_job_state_t state)
{
    switch (state) {
    case 0: return "UNDEFINED";
    case 1: return "PREPPED FOR LAUNCH";
    case 2: return "LAUNCHING";
    case 3: return "RUNNING";
    case 4: return "SUSPENDED";
    case 5: return "CONNECTED";
    case 15: return "UNTERMINATED";
    case 20: return "TERMINATED";
    case 50: return "TERMINATED WITH ERROR";
    default: return "UNKNOWN";
    }
}

PMIX_EXPORT const char *PMIx_Alloc_directive_string(pmix_alloc_directive_t directive)
{
    static const char *const names[] = {"UNSPECIFIED", "NEW", "EXTEND", "RELEASE", "REACQUIRE"};
    return directive < sizeof(names) / sizeof(names[0]) ? names[directive] : "UNSPECIFIED";
}

PMIX_EXPORT const char *PMIx_IOF_channel_string(pmix_iof_channel_t channel)
{
    static const char *const names[] = {
        "NONE", "STDIN", "STDOUT", "STDIN STDOUT", "STDERR", "STDIN STDERR", "STDOUT STDERR",
        "STDIN STDOUT STDERR", "STDDIAG", "STDIN STDDIAG", "STDOUT STDDIAG",
        "STDIN STDOUT STDDIAG", "STDERR STDDIAG", "STDIN STDERR STDDIAG",
        "STDOUT STDERR STDDIAG", "STDIN STDOUT STDERR STDDIAG"};
    return names[channel & 0xf];
}

PMIX_EXPORT const char *PMIx_Link_state_string(pmix_link_state_t state)
{
    switch (state) {
    case 1: return "INACTIVE";
    case 2: return "ACTIVE";
    default: return "UNKNOWN";
    }
}

PMIX_EXPORT const char *PMIx_Device_type_string(pmix_device_type_t type)
{
    switch (type) {
    case PMIX_DEVTYPE_BLOCK: return "BLOCK";
    case PMIX_DEVTYPE_GPU: return "GPU";
    case PMIX_DEVTYPE_NETWORK: return "NETWORK";
    case PMIX_DEVTYPE_OPENFABRICS: return "OPENFABRICS";
    case PMIX_DEVTYPE_DMA: return "DMA";
    case PMIX_DEVTYPE_COPROC: return "COPROCESSOR";
    default: return "UNKNOWN";
    }
}

PMIX_EXPORT const char *PMIx_Value_comparison_string(pmix_value_cmp_t cmp)
{
    switch (cmp) {
    case PMIX_EQUAL: return "EQUAL";
    case PMIX_VALUE1_GREATER: return "VALUE1 GREATER";
    case PMIX_VALUE2_GREATER: return "VALUE2 GREATER";
    case PMIX_VALUE_TYPE_DIFFERENT: return "DIFFERENT TYPES";
    case PMIX_VALUE_INCOMPATIBLE_OBJECTS: return "INCOMPATIBLE OBJECTS";
    case PMIX_VALUE_COMPARISON_NOT_AVAIL: return "COMPARISON NOT AVAILABLE";
    default: return "UNKNOWN";
    }
}

/* OpenPMIx returns one static buffer here too, so the result is only good
 * until the next call on any thread; a thread-local buffer keeps threads
 * apart. */
PMIX_EXPORT const char *PMIx_Info_directives_string(pmix_info_directives_t directives)
{
    static __thread char buf[64];
    if (directives & PMIX_INFO_QUALIFIER) {
        return "QUALIFIER";
    }
    snprintf(buf, sizeof(buf), "%s%s%s", (directives & PMIX_INFO_REQD) ? "REQUIRED" : "OPTIONAL",
             (directives & PMIX_INFO_REQD_PROCESSED) ? ":PROCESSED" : "",
             (directives & PMIX_INFO_ARRAY_END) ? ":END" : "");
    return buf;
}

/* pmixbus keeps no attribute dictionary: the key is its own name. */
PMIX_EXPORT const char *PMIx_Get_attribute_string(const char *attribute) { return attribute; }
PMIX_EXPORT const char *PMIx_Get_attribute_name(const char *attrstring) { return attrstring; }

PMIX_EXPORT char *PMIx_Value_string(const pmix_value_t *v)
{
    char *out = NULL;
    int rc;
    switch (v->type) {
    case PMIX_STRING:
        rc = asprintf(&out, "Data type: PMIX_STRING\tValue: %s", v->data.string ? v->data.string : "NULL");
        break;
    case PMIX_BOOL:
        rc = asprintf(&out, "Data type: PMIX_BOOL\tValue: %s", v->data.flag ? "True" : "False");
        break;
    case PMIX_PROC:
        rc = asprintf(&out, "Data type: PMIX_PROC\tValue: %s:%u", v->data.proc ? v->data.proc->nspace : "NULL",
                      v->data.proc ? v->data.proc->rank : 0);
        break;
    default: {
        int64_t n = 0;
        pmix_status_t s;
        PMIX_VALUE_GET_NUMBER(s, v, n, int64_t);
        if (PMIX_SUCCESS == s) {
            rc = asprintf(&out, "Data type: %s\tValue: %lld", PMIx_Data_type_string(v->type), (long long)n);
        } else {
            rc = asprintf(&out, "Data type: %s", PMIx_Data_type_string(v->type));
        }
    }
    }
    return rc < 0 ? NULL : out;
}

PMIX_EXPORT char *PMIx_Info_string(const pmix_info_t *info)
{
    char *val = PMIx_Value_string(&info->value), *out = NULL;
    if (asprintf(&out, "Key: %s Flags: %s %s", info->key, PMIx_Info_directives_string(info->flags),
                 val ? val : "") < 0) {
        out = NULL;
    }
    free(val);
    return out;
}

/* ---- keys, nspaces and procs ---- */

PMIX_EXPORT void PMIx_Load_key(pmix_key_t key, const char *src)
{
    memset(key, 0, PMIX_MAX_KEYLEN + 1);
    if (NULL != src) {
        strncpy(key, src, PMIX_MAX_KEYLEN);
    }
}

PMIX_EXPORT bool PMIx_Check_key(const char *key, const char *str)
{
    return 0 == strncmp(key, str, PMIX_MAX_KEYLEN);
}

PMIX_EXPORT bool PMIx_Check_reserved_key(const char *key) { return 0 == strncmp(key, "pmix", 4); }

PMIX_EXPORT void PMIx_Load_nspace(pmix_nspace_t nspace, const char *str)
{
    memset(nspace, 0, PMIX_MAX_NSLEN + 1);
    if (NULL != str) {
        strncpy(nspace, str, PMIX_MAX_NSLEN);
    }
}

PMIX_EXPORT bool PMIx_Check_nspace(const char *a, const char *b)
{
    if (NULL == a || NULL == b || '\0' == a[0] || '\0' == b[0]) {
        return true; /* an empty nspace matches any, as the 4.2.2 macro does */
    }
    return 0 == strncmp(a, b, PMIX_MAX_NSLEN);
}

PMIX_EXPORT bool PMIx_Nspace_invalid(const char *nspace) { return NULL == nspace || '\0' == nspace[0]; }

PMIX_EXPORT void PMIx_Load_procid(pmix_proc_t *p, const char *ns, pmix_rank_t rk)
{
    PMIx_Load_nspace(p->nspace, ns);
    p->rank = rk;
}

PMIX_EXPORT void PMIx_Xfer_procid(pmix_proc_t *dst, const pmix_proc_t *src) { memcpy(dst, src, sizeof(*dst)); }

PMIX_EXPORT bool PMIx_Check_rank(pmix_rank_t a, pmix_rank_t b)
{
    return a == b || PMIX_RANK_WILDCARD == a || PMIX_RANK_WILDCARD == b;
}

PMIX_EXPORT bool PMIx_Check_procid(const pmix_proc_t *a, const pmix_proc_t *b)
{
    return PMIx_Check_nspace(a->nspace, b->nspace) && PMIx_Check_rank(a->rank, b->rank);
}

PMIX_EXPORT bool PMIx_Procid_invalid(const pmix_proc_t *p)
{
    return PMIx_Nspace_invalid(p->nspace) || PMIX_RANK_INVALID == p->rank;
}

PMIX_EXPORT void PMIx_Proc_construct(pmix_proc_t *p) { memset(p, 0, sizeof(*p)); }
PMIX_EXPORT void PMIx_Proc_destruct(pmix_proc_t *p) { (void)p; }
PMIX_EXPORT pmix_proc_t *PMIx_Proc_create(size_t n) { return 0 == n ? NULL : calloc(n, sizeof(pmix_proc_t)); }
PMIX_EXPORT void PMIx_Proc_free(pmix_proc_t *p, size_t n)
{
    (void)n;
    free(p);
}
PMIX_EXPORT void PMIx_Proc_load(pmix_proc_t *p, const char *nspace, pmix_rank_t rank)
{
    PMIx_Proc_construct(p);
    PMIx_Load_procid(p, nspace, rank);
}

PMIX_EXPORT void PMIx_Multicluster_nspace_construct(pmix_nspace_t target, pmix_nspace_t cluster,
                                                    pmix_nspace_t nspace)
{
    size_t lc = strnlen(cluster, PMIX_MAX_NSLEN), ln = strnlen(nspace, PMIX_MAX_NSLEN);
    memset(target, 0, PMIX_MAX_NSLEN + 1);
    if (lc + ln + 1 > PMIX_MAX_NSLEN) {
        return;
    }
    memcpy(target, cluster, lc);
    target[lc] = ':';
    memcpy(target + lc + 1, nspace, ln);
}

PMIX_EXPORT void PMIx_Multicluster_nspace_parse(pmix_nspace_t target, pmix_nspace_t cluster,
                                                pmix_nspace_t nspace)
{
    const char *colon = memchr(target, ':', strnlen(target, PMIX_MAX_NSLEN));
    memset(cluster, 0, PMIX_MAX_NSLEN + 1);
    memset(nspace, 0, PMIX_MAX_NSLEN + 1);
    if (NULL == colon) {
        PMIx_Load_nspace(nspace, target);
        return;
    }
    memcpy(cluster, target, (size_t)(colon - target));
    PMIx_Load_nspace(nspace, colon + 1);
}

/* ---- argv ---- */

PMIX_EXPORT int PMIx_Argv_count(char **a)
{
    int n = 0;
    while (NULL != a && NULL != a[n]) {
        n++;
    }
    return n;
}

static pmix_status_t argv_insert(char ***argv, const char *arg, bool front)
{
    int n = PMIx_Argv_count(*argv);
    char **grown = realloc(*argv, (size_t)(n + 2) * sizeof(char *));
    char *copy = strdup(arg);
    if (NULL == grown || NULL == copy) {
        free(copy);
        if (NULL != grown) {
            *argv = grown;
        }
        return PMIX_ERR_NOMEM;
    }
    if (front) {
        memmove(grown + 1, grown, (size_t)n * sizeof(char *));
        grown[0] = copy;
    } else {
        grown[n] = copy;
    }
    grown[n + 1] = NULL;
    *argv = grown;
    return PMIX_SUCCESS;
}

PMIX_EXPORT pmix_status_t PMIx_Argv_append_nosize(char ***argv, const char *arg)
{
    return argv_insert(argv, arg, false);
}

PMIX_EXPORT pmix_status_t PMIx_Argv_prepend_nosize(char ***argv, const char *arg)
{
    return argv_insert(argv, arg, true);
}

PMIX_EXPORT pmix_status_t PMIx_Argv_append_unique_nosize(char ***argv, const char *arg)
{
    int i;
    for (i = 0; NULL != *argv && NULL != (*argv)[i]; i++) {
        if (0 == strcmp((*argv)[i], arg)) {
            return PMIX_SUCCESS;
        }
    }
    return argv_insert(argv, arg, false);
}

PMIX_EXPORT void PMIx_Argv_free(char **argv)
{
    int i;
    for (i = 0; NULL != argv && NULL != argv[i]; i++) {
        free(argv[i]);
    }
    free(argv);
}

PMIX_EXPORT char **PMIx_Argv_split_inter(const char *src, int delimiter, bool include_empty)
{
    char **out = NULL;
    const char *p = src, *end;
    if (NULL == src) {
        return NULL;
    }
    while (1) {
        char *tok;
        end = strchr(p, delimiter);
        if (NULL == end) {
            end = p + strlen(p);
        }
        if (end > p || (include_empty && '\0' != *end)) {
            tok = strndup(p, (size_t)(end - p));
            if (NULL == tok || PMIX_SUCCESS != argv_insert(&out, tok, false)) {
                free(tok);
                PMIx_Argv_free(out);
                return NULL;
            }
            free(tok);
        }
        if ('\0' == *end) {
            break;
        }
        p = end + 1;
    }
    return out;
}

PMIX_EXPORT char **PMIx_Argv_split_with_empty(const char *src, int delimiter)
{
    return PMIx_Argv_split_inter(src, delimiter, true);
}

PMIX_EXPORT char **PMIx_Argv_split(const char *src, int delimiter)
{
    return PMIx_Argv_split_inter(src, delimiter, false);
}

PMIX_EXPORT char *PMIx_Argv_join(char **argv, int delimiter)
{
    size_t len = 1;
    int i;
    char *out, *p;
    if (NULL == argv || NULL == argv[0]) {
        return strdup("");
    }
    for (i = 0; NULL != argv[i]; i++) {
        len += strlen(argv[i]) + 1;
    }
    out = malloc(len);
    if (NULL == out) {
        return NULL;
    }
    p = out;
    for (i = 0; NULL != argv[i]; i++) {
        size_t l = strlen(argv[i]);
        memcpy(p, argv[i], l);
        p += l;
        *p++ = (char)delimiter;
    }
    p[-1] = '\0';
    return out;
}

PMIX_EXPORT char **PMIx_Argv_copy(char **argv)
{
    char **out = NULL;
    int i;
    if (NULL == argv) {
        return NULL;
    }
    out = calloc(1, sizeof(char *));
    for (i = 0; NULL != out && NULL != argv[i]; i++) {
        if (PMIX_SUCCESS != argv_insert(&out, argv[i], false)) {
            PMIx_Argv_free(out);
            return NULL;
        }
    }
    return out;
}

PMIX_EXPORT pmix_status_t PMIx_Setenv(const char *name, const char *value, bool overwrite, char ***env)
{
    size_t nl;
    int i;
    char *entry = NULL;
    if (NULL == name || NULL == env) {
        return PMIX_ERR_BAD_PARAM;
    }
    if (asprintf(&entry, "%s=%s", name, NULL == value ? "" : value) < 0) {
        return PMIX_ERR_NOMEM;
    }
    nl = strlen(name);
    for (i = 0; NULL != *env && NULL != (*env)[i]; i++) {
        if (0 == strncmp((*env)[i], name, nl) && '=' == (*env)[i][nl]) {
            if (!overwrite) {
                free(entry);
                return PMIX_ERR_EXISTS;
            }
            free((*env)[i]);
            (*env)[i] = entry;
            return PMIX_SUCCESS;
        }
    }
    i = argv_insert(env, entry, false);
    free(entry);
    return i;
}

/* ---- constructors and destructors of the other structures ---- */

OBJECT_FUNCS(Pdata, pmix_pdata_t, PMIx_Value_destruct(&p->value))
OBJECT_FUNCS(Byte_object, pmix_byte_object_t, {
    free(p->bytes);
    p->bytes = NULL;
    p->size = 0;
})
OBJECT_FUNCS(Envar, pmix_envar_t, {
    free(p->envar);
    free(p->value);
    memset(p, 0, sizeof(*p));
})
OBJECT_FUNCS(App, pmix_app_t, {
    free(p->cmd);
    PMIx_Argv_free(p->argv);
    PMIx_Argv_free(p->env);
    free(p->cwd);
    PMIx_Info_free(p->info, p->ninfo);
    memset(p, 0, sizeof(*p));
})
OBJECT_FUNCS(Query, pmix_query_t, {
    PMIx_Argv_free(p->keys);
    PMIx_Info_free(p->qualifiers, p->nqual);
    memset(p, 0, sizeof(*p));
})

/* takes d as it is: the object now owns it */
PMIX_EXPORT void PMIx_Byte_object_load(pmix_byte_object_t *b, char *d, size_t sz)
{
    b->bytes = d;
    b->size = sz;
}

PMIX_EXPORT void PMIx_Envar_load(pmix_envar_t *e, char *var, char *value, char separator)
{
    e->envar = NULL == var ? NULL : strdup(var);
    e->value = NULL == value ? NULL : strdup(value);
    e->separator = separator;
}

PMIX_EXPORT void PMIx_App_release(pmix_app_t *p) { PMIx_App_free(p, 1); }
PMIX_EXPORT void PMIx_Query_release(pmix_query_t *p) { PMIx_Query_free(p, 1); }
