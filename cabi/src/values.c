/*
 * values.c — the data helpers of the PMIx C API, entirely in C: loading,
 * copying, unloading and freeing pmix_value_t, pmix_info_t and
 * pmix_data_array_t, and info lists. No Go is involved, so these run at C
 * speed on any thread, also before PMIx_Init. Every pointer they hand out
 * comes from malloc, because callers free it with the PMIx macros, which
 * call free().
 */
#define _GNU_SOURCE /* asprintf, strndup, strcasecmp */
#include <errno.h>
#include <stdio.h>

#include "pmix.h"

static char *dupbytes(const char *b, size_t n)
{
    char *out;
    if (NULL == b || 0 == n) {
        return NULL;
    }
    out = malloc(n);
    if (NULL != out) {
        memcpy(out, b, n);
    }
    return out;
}

static char *dupstr(const char *s) { return NULL == s ? NULL : strdup(s); }

/* elemsize is the size of one element of a data array of type t, 0 for a
 * type pmixbus cannot copy. */
size_t elemsize(pmix_data_type_t t)
{
    switch (t) {
    case PMIX_BOOL: return sizeof(bool);
    case PMIX_BYTE: case PMIX_INT8: case PMIX_UINT8: return 1;
    case PMIX_INT16: case PMIX_UINT16: return 2;
    case PMIX_INT: case PMIX_INT32: case PMIX_UINT: case PMIX_UINT32: return 4;
    case PMIX_STATUS: return sizeof(pmix_status_t);
    case PMIX_PROC_RANK: return sizeof(pmix_rank_t);
    case PMIX_PID: return sizeof(pid_t);
    case PMIX_SIZE: case PMIX_INT64: case PMIX_UINT64: return 8;
    case PMIX_FLOAT: return sizeof(float);
    case PMIX_DOUBLE: return sizeof(double);
    case PMIX_TIMEVAL: return sizeof(struct timeval);
    case PMIX_TIME: return sizeof(time_t);
    case PMIX_PERSIST: case PMIX_SCOPE: case PMIX_DATA_RANGE: case PMIX_PROC_STATE:
    case PMIX_ALLOC_DIRECTIVE: case PMIX_JOB_STATE: case PMIX_LINK_STATE: return 1;
    case PMIX_INFO_DIRECTIVES: return sizeof(pmix_info_directives_t);
    case PMIX_DATA_TYPE: case PMIX_IOF_CHANNEL: case PMIX_LOCTYPE: return 2;
    case PMIX_DEVTYPE: return sizeof(pmix_device_type_t);
    case PMIX_POINTER: return sizeof(void *);
    case PMIX_STRING: return sizeof(char *);
    case PMIX_PROC: return sizeof(pmix_proc_t);
    case PMIX_VALUE: return sizeof(pmix_value_t);
    case PMIX_INFO: return sizeof(pmix_info_t);
    case PMIX_PDATA: return sizeof(pmix_pdata_t);
    case PMIX_APP: return sizeof(pmix_app_t);
    case PMIX_BYTE_OBJECT: case PMIX_COMPRESSED_STRING: case PMIX_REGEX:
        return sizeof(pmix_byte_object_t);
    case PMIX_ENVAR: return sizeof(pmix_envar_t);
    case PMIX_PROC_INFO: return sizeof(pmix_proc_info_t);
    case PMIX_QUERY: return sizeof(pmix_query_t);
    default: return 0;
    }
}

static pmix_status_t darray_copy(pmix_data_array_t *dst, const pmix_data_array_t *src);
static void darray_elems_destruct(pmix_data_type_t t, void *array, size_t n);

static char **argv_copy(char **argv)
{
    return PMIx_Argv_copy(argv);
}

static pmix_status_t info_array_copy(pmix_info_t **dst, const pmix_info_t *src, size_t n)
{
    size_t i;
    *dst = NULL;
    if (0 == n || NULL == src) {
        return PMIX_SUCCESS;
    }
    *dst = PMIx_Info_create(n);
    if (NULL == *dst) {
        return PMIX_ERR_NOMEM;
    }
    for (i = 0; i < n; i++) {
        pmix_status_t rc = PMIx_Info_xfer(&(*dst)[i], &src[i]);
        if (PMIX_SUCCESS != rc) {
            return rc;
        }
    }
    return PMIX_SUCCESS;
}

/* elem_copy deep-copies one element of type t from src to dst (both of
 * elemsize(t) bytes; dst zeroed). */
static pmix_status_t elem_copy(pmix_data_type_t t, void *dst, const void *src)
{
    switch (t) {
    case PMIX_STRING:
        *(char **)dst = dupstr(*(char *const *)src);
        return PMIX_SUCCESS;
    case PMIX_VALUE:
        return PMIx_Value_xfer(dst, src);
    case PMIX_INFO:
        return PMIx_Info_xfer(dst, src);
    case PMIX_PDATA: {
        pmix_pdata_t *d = dst;
        const pmix_pdata_t *s = src;
        d->proc = s->proc;
        memcpy(d->key, s->key, sizeof(d->key));
        return PMIx_Value_xfer(&d->value, &s->value);
    }
    case PMIX_BYTE_OBJECT: case PMIX_COMPRESSED_STRING: case PMIX_REGEX: {
        pmix_byte_object_t *d = dst;
        const pmix_byte_object_t *s = src;
        d->bytes = dupbytes(s->bytes, s->size);
        d->size = NULL == d->bytes ? 0 : s->size;
        return PMIX_SUCCESS;
    }
    case PMIX_ENVAR: {
        pmix_envar_t *d = dst;
        const pmix_envar_t *s = src;
        d->envar = dupstr(s->envar);
        d->value = dupstr(s->value);
        d->separator = s->separator;
        return PMIX_SUCCESS;
    }
    case PMIX_PROC_INFO: {
        pmix_proc_info_t *d = dst;
        const pmix_proc_info_t *s = src;
        *d = *s;
        d->hostname = dupstr(s->hostname);
        d->executable_name = dupstr(s->executable_name);
        return PMIX_SUCCESS;
    }
    case PMIX_APP: {
        pmix_app_t *d = dst;
        const pmix_app_t *s = src;
        d->cmd = dupstr(s->cmd);
        d->argv = argv_copy(s->argv);
        d->env = argv_copy(s->env);
        d->cwd = dupstr(s->cwd);
        d->maxprocs = s->maxprocs;
        d->ninfo = s->ninfo;
        return info_array_copy(&d->info, s->info, s->ninfo);
    }
    case PMIX_QUERY: {
        pmix_query_t *d = dst;
        const pmix_query_t *s = src;
        d->keys = argv_copy(s->keys);
        d->nqual = s->nqual;
        return info_array_copy(&d->qualifiers, s->qualifiers, s->nqual);
    }
    default:
        if (0 == elemsize(t)) {
            return PMIX_ERR_NOT_SUPPORTED;
        }
        memcpy(dst, src, elemsize(t));
        return PMIX_SUCCESS;
    }
}

static void elem_destruct(pmix_data_type_t t, void *p)
{
    switch (t) {
    case PMIX_STRING:
        free(*(char **)p);
        break;
    case PMIX_VALUE:
        PMIx_Value_destruct(p);
        break;
    case PMIX_INFO:
        PMIx_Info_destruct(p);
        break;
    case PMIX_PDATA:
        PMIx_Value_destruct(&((pmix_pdata_t *)p)->value);
        break;
    case PMIX_BYTE_OBJECT: case PMIX_COMPRESSED_STRING: case PMIX_REGEX:
        free(((pmix_byte_object_t *)p)->bytes);
        break;
    case PMIX_ENVAR:
        free(((pmix_envar_t *)p)->envar);
        free(((pmix_envar_t *)p)->value);
        break;
    case PMIX_PROC_INFO:
        free(((pmix_proc_info_t *)p)->hostname);
        free(((pmix_proc_info_t *)p)->executable_name);
        break;
    case PMIX_APP:
        PMIx_App_destruct(p);
        break;
    case PMIX_QUERY:
        PMIx_Query_destruct(p);
        break;
    default:
        break;
    }
}

static void darray_elems_destruct(pmix_data_type_t t, void *array, size_t n)
{
    size_t i, sz = elemsize(t);
    if (NULL == array || 0 == sz) {
        return;
    }
    for (i = 0; i < n; i++) {
        elem_destruct(t, (char *)array + i * sz);
    }
}

static pmix_status_t darray_copy(pmix_data_array_t *dst, const pmix_data_array_t *src)
{
    size_t i, sz = elemsize(src->type);
    dst->type = src->type;
    dst->size = 0;
    dst->array = NULL;
    if (0 == src->size || NULL == src->array) {
        return PMIX_SUCCESS;
    }
    if (0 == sz) {
        return PMIX_ERR_NOT_SUPPORTED;
    }
    dst->array = calloc(src->size, sz);
    if (NULL == dst->array) {
        return PMIX_ERR_NOMEM;
    }
    dst->size = src->size;
    if (PMIX_INFO == src->type) {
        /* as PMIX_INFO_CREATE would have made it */
        ((pmix_info_t *)dst->array)[src->size - 1].flags = PMIX_INFO_ARRAY_END;
    }
    for (i = 0; i < src->size; i++) {
        pmix_status_t rc = elem_copy(src->type, (char *)dst->array + i * sz,
                                     (const char *)src->array + i * sz);
        if (PMIX_SUCCESS != rc) {
            return rc;
        }
    }
    return PMIX_SUCCESS;
}

PMIX_EXPORT void PMIx_Value_construct(pmix_value_t *val)
{
    memset(val, 0, sizeof(*val));
    val->type = PMIX_UNDEF;
}

PMIX_EXPORT void PMIx_Value_destruct(pmix_value_t *v)
{
    if (NULL == v) {
        return;
    }
    switch (v->type) {
    case PMIX_STRING:
        free(v->data.string);
        break;
    case PMIX_PROC:
        free(v->data.proc);
        break;
    case PMIX_PROC_NSPACE:
        free(v->data.nspace);
        break;
    case PMIX_BYTE_OBJECT: case PMIX_COMPRESSED_STRING: case PMIX_REGEX:
        free(v->data.bo.bytes);
        break;
    case PMIX_ENVAR:
        free(v->data.envar.envar);
        free(v->data.envar.value);
        break;
    case PMIX_PROC_INFO:
        if (NULL != v->data.pinfo) {
            elem_destruct(PMIX_PROC_INFO, v->data.pinfo);
            free(v->data.pinfo);
        }
        break;
    case PMIX_DATA_ARRAY:
        if (NULL != v->data.darray) {
            PMIx_Data_array_destruct(v->data.darray);
            free(v->data.darray);
        }
        break;
    case PMIX_COORD:
        if (NULL != v->data.coord) {
            free(v->data.coord->coord);
            free(v->data.coord);
        }
        break;
    default:
        break;
    }
    memset(&v->data, 0, sizeof(v->data));
    v->type = PMIX_UNDEF;
}

PMIX_EXPORT pmix_status_t PMIx_Value_load(pmix_value_t *v, const void *data, pmix_data_type_t type)
{
    if (NULL == v) {
        return PMIX_ERR_BAD_PARAM;
    }
    memset(&v->data, 0, sizeof(v->data));
    v->type = type;
    if (NULL == data) {
        /* a NULL string or pointer is a value of its own; other types keep
         * the zero value, but a bool is true, as in OpenPMIx: the presence
         * of a flag attribute means true (PMIX_INFO_LOAD(&i,
         * PMIX_CLEANUP_RECURSIVE, NULL, PMIX_BOOL), as Open MPI loads it) */
        if (PMIX_BOOL == type) {
            v->data.flag = true;
        }
        return PMIX_SUCCESS;
    }
    switch (type) {
    case PMIX_UNDEF:
        return PMIX_SUCCESS;
    case PMIX_STRING:
        v->data.string = strdup((const char *)data);
        return NULL == v->data.string ? PMIX_ERR_NOMEM : PMIX_SUCCESS;
    case PMIX_POINTER:
        v->data.ptr = (void *)data;
        return PMIX_SUCCESS;
    case PMIX_PROC:
        v->data.proc = malloc(sizeof(pmix_proc_t));
        if (NULL == v->data.proc) {
            return PMIX_ERR_NOMEM;
        }
        memcpy(v->data.proc, data, sizeof(pmix_proc_t));
        return PMIX_SUCCESS;
    case PMIX_PROC_NSPACE:
        v->data.nspace = malloc(sizeof(pmix_nspace_t));
        if (NULL == v->data.nspace) {
            return PMIX_ERR_NOMEM;
        }
        PMIx_Load_nspace(*v->data.nspace, (const char *)data);
        return PMIX_SUCCESS;
    case PMIX_DATA_ARRAY:
        v->data.darray = malloc(sizeof(pmix_data_array_t));
        if (NULL == v->data.darray) {
            return PMIX_ERR_NOMEM;
        }
        return darray_copy(v->data.darray, data);
    case PMIX_PROC_INFO:
        v->data.pinfo = calloc(1, sizeof(pmix_proc_info_t));
        if (NULL == v->data.pinfo) {
            return PMIX_ERR_NOMEM;
        }
        return elem_copy(type, v->data.pinfo, data);
    case PMIX_BYTE_OBJECT: case PMIX_COMPRESSED_STRING: case PMIX_REGEX: case PMIX_ENVAR:
        return elem_copy(type, &v->data, data);
    case PMIX_COORD: {
        const pmix_coord_t *s = data;
        v->data.coord = calloc(1, sizeof(pmix_coord_t));
        if (NULL == v->data.coord) {
            return PMIX_ERR_NOMEM;
        }
        v->data.coord->view = s->view;
        v->data.coord->dims = s->dims;
        v->data.coord->coord = (uint32_t *)dupbytes((const char *)s->coord, s->dims * sizeof(uint32_t));
        return PMIX_SUCCESS;
    }
    case PMIX_TOPO: case PMIX_PROC_CPUSET: case PMIX_GEOMETRY: case PMIX_DEVICE_DIST:
    case PMIX_ENDPOINT: case PMIX_DATA_BUFFER:
        /* pointers to objects pmixbus does not interpret: shared, not copied */
        v->data.ptr = (void *)data;
        return PMIX_SUCCESS;
    default:
        if (0 == elemsize(type)) {
            v->type = PMIX_UNDEF;
            return PMIX_ERR_UNKNOWN_DATA_TYPE;
        }
        memcpy(&v->data, data, elemsize(type));
        return PMIX_SUCCESS;
    }
}

PMIX_EXPORT pmix_status_t PMIx_Value_xfer(pmix_value_t *dest, const pmix_value_t *src)
{
    if (NULL == dest || NULL == src) {
        return PMIX_ERR_BAD_PARAM;
    }
    switch (src->type) {
    case PMIX_STRING:
        return PMIx_Value_load(dest, src->data.string, PMIX_STRING);
    case PMIX_PROC:
        return PMIx_Value_load(dest, src->data.proc, PMIX_PROC);
    case PMIX_PROC_NSPACE:
        return PMIx_Value_load(dest, src->data.nspace, PMIX_PROC_NSPACE);
    case PMIX_DATA_ARRAY:
        return PMIx_Value_load(dest, src->data.darray, PMIX_DATA_ARRAY);
    case PMIX_PROC_INFO:
        return PMIx_Value_load(dest, src->data.pinfo, PMIX_PROC_INFO);
    case PMIX_COORD:
        return PMIx_Value_load(dest, src->data.coord, PMIX_COORD);
    case PMIX_BYTE_OBJECT: case PMIX_COMPRESSED_STRING: case PMIX_REGEX: case PMIX_ENVAR:
        return PMIx_Value_load(dest, &src->data, src->type);
    default:
        dest->type = src->type;
        memcpy(&dest->data, &src->data, sizeof(dest->data));
        return PMIX_SUCCESS;
    }
}

PMIX_EXPORT pmix_status_t PMIx_Value_unload(pmix_value_t *v, void **data, size_t *sz)
{
    if (NULL == v || NULL == data || NULL == sz) {
        return PMIX_ERR_BAD_PARAM;
    }
    *sz = 0;
    switch (v->type) {
    case PMIX_UNDEF:
        return PMIX_SUCCESS;
    case PMIX_STRING:
        if (NULL != v->data.string) {
            *data = strdup(v->data.string);
            *sz = strlen(v->data.string);
        }
        return PMIX_SUCCESS;
    case PMIX_POINTER:
        *data = v->data.ptr;
        *sz = sizeof(void *);
        return PMIX_SUCCESS;
    case PMIX_PROC:
        *data = dupbytes((const char *)v->data.proc, sizeof(pmix_proc_t));
        *sz = sizeof(pmix_proc_t);
        return PMIX_SUCCESS;
    case PMIX_BYTE_OBJECT: case PMIX_COMPRESSED_STRING: case PMIX_REGEX:
        *data = dupbytes(v->data.bo.bytes, v->data.bo.size);
        *sz = v->data.bo.size;
        return PMIX_SUCCESS;
    case PMIX_DATA_ARRAY: {
        pmix_data_array_t *d;
        if (NULL == v->data.darray) {
            return PMIX_SUCCESS;
        }
        d = malloc(sizeof(*d));
        if (NULL == d) {
            return PMIX_ERR_NOMEM;
        }
        *data = d;
        *sz = sizeof(*d);
        return darray_copy(d, v->data.darray);
    }
    case PMIX_ENVAR: {
        pmix_envar_t *e = calloc(1, sizeof(*e));
        if (NULL == e) {
            return PMIX_ERR_NOMEM;
        }
        elem_copy(PMIX_ENVAR, e, &v->data.envar);
        *data = e;
        *sz = sizeof(*e);
        return PMIX_SUCCESS;
    }
    default:
        /* scalars go into the caller's storage at *data */
        if (0 == elemsize(v->type) || NULL == *data) {
            return PMIX_ERR_NOT_SUPPORTED;
        }
        memcpy(*data, &v->data, elemsize(v->type));
        *sz = elemsize(v->type);
        return PMIX_SUCCESS;
    }
}

PMIX_EXPORT pmix_value_cmp_t PMIx_Value_compare(pmix_value_t *v1, pmix_value_t *v2)
{
    if (v1->type != v2->type) {
        return PMIX_VALUE_TYPE_DIFFERENT;
    }
    switch (v1->type) {
    case PMIX_STRING: {
        int c = strcmp(v1->data.string ? v1->data.string : "", v2->data.string ? v2->data.string : "");
        return 0 == c ? PMIX_EQUAL : (c > 0 ? PMIX_VALUE1_GREATER : PMIX_VALUE2_GREATER);
    }
    case PMIX_PROC:
        if (0 == memcmp(v1->data.proc, v2->data.proc, sizeof(pmix_proc_t))) {
            return PMIX_EQUAL;
        }
        return PMIX_VALUE_INCOMPATIBLE_OBJECTS;
    case PMIX_BYTE_OBJECT:
        if (v1->data.bo.size == v2->data.bo.size &&
            (0 == v1->data.bo.size || 0 == memcmp(v1->data.bo.bytes, v2->data.bo.bytes, v1->data.bo.size))) {
            return PMIX_EQUAL;
        }
        return PMIX_VALUE_INCOMPATIBLE_OBJECTS;
#define CMP(f) return v1->data.f == v2->data.f ? PMIX_EQUAL : (v1->data.f > v2->data.f ? PMIX_VALUE1_GREATER : PMIX_VALUE2_GREATER)
    case PMIX_BOOL: CMP(flag);
    case PMIX_BYTE: case PMIX_UINT8: CMP(uint8);
    case PMIX_SIZE: CMP(size);
    case PMIX_PID: CMP(pid);
    case PMIX_INT: CMP(integer);
    case PMIX_INT8: CMP(int8);
    case PMIX_INT16: CMP(int16);
    case PMIX_INT32: CMP(int32);
    case PMIX_INT64: CMP(int64);
    case PMIX_UINT: CMP(uint);
    case PMIX_UINT16: CMP(uint16);
    case PMIX_UINT32: CMP(uint32);
    case PMIX_UINT64: CMP(uint64);
    case PMIX_FLOAT: CMP(fval);
    case PMIX_DOUBLE: CMP(dval);
    case PMIX_TIME: CMP(time);
    case PMIX_STATUS: CMP(status);
    case PMIX_PROC_RANK: CMP(rank);
    case PMIX_PERSIST: CMP(persist);
    case PMIX_SCOPE: CMP(scope);
    case PMIX_DATA_RANGE: CMP(range);
    case PMIX_PROC_STATE: CMP(state);
#undef CMP
    default:
        return PMIX_VALUE_COMPARISON_NOT_AVAIL;
    }
}

PMIX_EXPORT pmix_boolean_t PMIx_Value_true(const pmix_value_t *v)
{
    if (PMIX_UNDEF == v->type) {
        return PMIX_BOOL_TRUE; /* a key without a value means true */
    }
    if (PMIX_BOOL == v->type) {
        return v->data.flag ? PMIX_BOOL_TRUE : PMIX_BOOL_FALSE;
    }
    if (PMIX_STRING == v->type && NULL != v->data.string) {
        const char *s = v->data.string;
        if (0 == strcasecmp(s, "true") || 0 == strcasecmp(s, "yes") || 0 == strcmp(s, "1")) {
            return PMIX_BOOL_TRUE;
        }
        if (0 == strcasecmp(s, "false") || 0 == strcasecmp(s, "no") || 0 == strcmp(s, "0")) {
            return PMIX_BOOL_FALSE;
        }
    }
    return PMIX_NON_BOOL;
}

PMIX_EXPORT pmix_value_t *PMIx_Value_create(size_t n)
{
    pmix_value_t *v;
    size_t i;
    if (0 == n) {
        return NULL;
    }
    v = malloc(n * sizeof(*v));
    if (NULL != v) {
        for (i = 0; i < n; i++) {
            PMIx_Value_construct(&v[i]);
        }
    }
    return v;
}

PMIX_EXPORT void PMIx_Value_free(pmix_value_t *v, size_t n)
{
    size_t i;
    if (NULL == v) {
        return;
    }
    for (i = 0; i < n; i++) {
        PMIx_Value_destruct(&v[i]);
    }
    free(v);
}

PMIX_EXPORT pmix_status_t PMIx_Info_load(pmix_info_t *info, const char *key, const void *data,
                                         pmix_data_type_t type)
{
    if (NULL == info || NULL == key) {
        return PMIX_ERR_BAD_PARAM;
    }
    PMIx_Load_key(info->key, key);
    /* as OpenPMIx's PMIX_INFO_LOAD: an info loaded on the stack without
     * being constructed must not keep a PERSISTENT bit of garbage, which
     * would make its destruct leave the value */
    info->flags = 0;
    return PMIx_Value_load(&info->value, data, type);
}

PMIX_EXPORT pmix_status_t PMIx_Info_xfer(pmix_info_t *dest, const pmix_info_t *src)
{
    if (NULL == dest || NULL == src) {
        return PMIX_ERR_BAD_PARAM;
    }
    memcpy(dest->key, src->key, sizeof(dest->key));
    dest->flags = src->flags;
    if (src->flags & PMIX_INFO_PERSISTENT) {
        /* the source keeps ownership of a persistent value */
        dest->value = src->value;
        return PMIX_SUCCESS;
    }
    return PMIx_Value_xfer(&dest->value, &src->value);
}

PMIX_EXPORT void PMIx_Info_construct(pmix_info_t *p)
{
    memset(p, 0, sizeof(*p));
    p->value.type = PMIX_UNDEF;
}

PMIX_EXPORT void PMIx_Info_destruct(pmix_info_t *p)
{
    if (!(p->flags & PMIX_INFO_PERSISTENT)) {
        PMIx_Value_destruct(&p->value);
    }
}

PMIX_EXPORT pmix_info_t *PMIx_Info_create(size_t n)
{
    pmix_info_t *p;
    if (0 == n) {
        return NULL;
    }
    p = calloc(n, sizeof(*p));
    if (NULL != p) {
        p[n - 1].flags = PMIX_INFO_ARRAY_END;
    }
    return p;
}

PMIX_EXPORT void PMIx_Info_free(pmix_info_t *p, size_t n)
{
    size_t i;
    if (NULL == p) {
        return;
    }
    for (i = 0; i < n; i++) {
        PMIx_Info_destruct(&p[i]);
    }
    free(p);
}

PMIX_EXPORT pmix_boolean_t PMIx_Info_true(const pmix_info_t *p) { return PMIx_Value_true(&p->value); }
PMIX_EXPORT void PMIx_Info_required(pmix_info_t *p) { p->flags |= PMIX_INFO_REQD; }
PMIX_EXPORT void PMIx_Info_optional(pmix_info_t *p) { p->flags &= ~PMIX_INFO_REQD; }
PMIX_EXPORT bool PMIx_Info_is_required(const pmix_info_t *p) { return p->flags & PMIX_INFO_REQD; }
PMIX_EXPORT bool PMIx_Info_is_optional(const pmix_info_t *p) { return !(p->flags & PMIX_INFO_REQD); }
PMIX_EXPORT void PMIx_Info_processed(pmix_info_t *p) { p->flags |= PMIX_INFO_REQD_PROCESSED; }
PMIX_EXPORT bool PMIx_Info_was_processed(const pmix_info_t *p) { return p->flags & PMIX_INFO_REQD_PROCESSED; }
PMIX_EXPORT void PMIx_Info_set_end(pmix_info_t *p) { p->flags |= PMIX_INFO_ARRAY_END; }
PMIX_EXPORT bool PMIx_Info_is_end(const pmix_info_t *p) { return p->flags & PMIX_INFO_ARRAY_END; }
PMIX_EXPORT void PMIx_Info_qualifier(pmix_info_t *p) { p->flags |= PMIX_INFO_QUALIFIER; }
PMIX_EXPORT bool PMIx_Info_is_qualifier(const pmix_info_t *p) { return p->flags & PMIX_INFO_QUALIFIER; }
PMIX_EXPORT void PMIx_Info_persistent(pmix_info_t *p) { p->flags |= PMIX_INFO_PERSISTENT; }
PMIX_EXPORT bool PMIx_Info_is_persistent(const pmix_info_t *p) { return p->flags & PMIX_INFO_PERSISTENT; }

/* ---- data arrays ---- */

PMIX_EXPORT void PMIx_Data_array_init(pmix_data_array_t *p, pmix_data_type_t type)
{
    p->type = type;
    p->size = 0;
    p->array = NULL;
}

PMIX_EXPORT void PMIx_Data_array_construct(pmix_data_array_t *p, size_t num, pmix_data_type_t type)
{
    size_t sz = elemsize(type);
    PMIx_Data_array_init(p, type);
    if (0 == num || 0 == sz) {
        return;
    }
    p->array = calloc(num, sz);
    if (NULL == p->array) {
        return;
    }
    p->size = num;
    if (PMIX_INFO == type) {
        ((pmix_info_t *)p->array)[num - 1].flags = PMIX_INFO_ARRAY_END;
    }
}

PMIX_EXPORT void PMIx_Data_array_destruct(pmix_data_array_t *d)
{
    if (NULL == d) {
        return;
    }
    darray_elems_destruct(d->type, d->array, d->size);
    free(d->array);
    d->array = NULL;
    d->size = 0;
}

PMIX_EXPORT pmix_data_array_t *PMIx_Data_array_create(size_t n, pmix_data_type_t type)
{
    pmix_data_array_t *p = malloc(sizeof(*p));
    if (NULL != p) {
        PMIx_Data_array_construct(p, n, type);
    }
    return p;
}

PMIX_EXPORT void PMIx_Data_array_free(pmix_data_array_t *p)
{
    if (NULL != p) {
        PMIx_Data_array_destruct(p);
        free(p);
    }
}

/* ---- info lists: a singly linked list of pmix_info_t ---- */

struct cabi_infolist_item {
    struct cabi_infolist_item *next;
    pmix_info_t info;
};
struct cabi_infolist {
    struct cabi_infolist_item *head, *tail;
    size_t n;
};

PMIX_EXPORT void *PMIx_Info_list_start(void) { return calloc(1, sizeof(struct cabi_infolist)); }

static struct cabi_infolist_item *list_item(struct cabi_infolist *l, bool front)
{
    struct cabi_infolist_item *it = calloc(1, sizeof(*it));
    if (NULL == it) {
        return NULL;
    }
    if (front) {
        it->next = l->head;
        l->head = it;
        if (NULL == l->tail) {
            l->tail = it;
        }
    } else {
        if (NULL == l->tail) {
            l->head = it;
        } else {
            l->tail->next = it;
        }
        l->tail = it;
    }
    l->n++;
    return it;
}

PMIX_EXPORT pmix_status_t PMIx_Info_list_add(void *ptr, const char *key, const void *value,
                                             pmix_data_type_t type)
{
    struct cabi_infolist_item *it;
    if (NULL == ptr) {
        return PMIX_ERR_BAD_PARAM;
    }
    it = list_item(ptr, false);
    return NULL == it ? PMIX_ERR_NOMEM : PMIx_Info_load(&it->info, key, value, type);
}

PMIX_EXPORT pmix_status_t PMIx_Info_list_prepend(void *ptr, const char *key, const void *value,
                                                 pmix_data_type_t type)
{
    struct cabi_infolist_item *it;
    if (NULL == ptr) {
        return PMIX_ERR_BAD_PARAM;
    }
    it = list_item(ptr, true);
    return NULL == it ? PMIX_ERR_NOMEM : PMIx_Info_load(&it->info, key, value, type);
}

/* insert takes the info as it is: its value now belongs to the list. */
PMIX_EXPORT pmix_status_t PMIx_Info_list_insert(void *ptr, pmix_info_t *info)
{
    struct cabi_infolist_item *it;
    if (NULL == ptr || NULL == info) {
        return PMIX_ERR_BAD_PARAM;
    }
    it = list_item(ptr, false);
    if (NULL == it) {
        return PMIX_ERR_NOMEM;
    }
    it->info = *info;
    it->info.flags &= ~PMIX_INFO_ARRAY_END;
    return PMIX_SUCCESS;
}

PMIX_EXPORT pmix_status_t PMIx_Info_list_xfer(void *ptr, const pmix_info_t *info)
{
    struct cabi_infolist_item *it;
    pmix_status_t rc;
    if (NULL == ptr || NULL == info) {
        return PMIX_ERR_BAD_PARAM;
    }
    it = list_item(ptr, false);
    if (NULL == it) {
        return PMIX_ERR_NOMEM;
    }
    rc = PMIx_Info_xfer(&it->info, info);
    it->info.flags &= ~PMIX_INFO_ARRAY_END;
    return rc;
}

PMIX_EXPORT pmix_status_t PMIx_Info_list_convert(void *ptr, pmix_data_array_t *par)
{
    struct cabi_infolist *l = ptr;
    struct cabi_infolist_item *it;
    pmix_info_t *out;
    size_t i = 0;
    if (NULL == l || NULL == par) {
        return PMIX_ERR_BAD_PARAM;
    }
    PMIx_Data_array_init(par, PMIX_INFO);
    if (0 == l->n) {
        return PMIX_ERR_EMPTY;
    }
    out = PMIx_Info_create(l->n);
    if (NULL == out) {
        return PMIX_ERR_NOMEM;
    }
    for (it = l->head; NULL != it; it = it->next, i++) {
        pmix_status_t rc = PMIx_Info_xfer(&out[i], &it->info);
        if (PMIX_SUCCESS != rc) {
            PMIx_Info_free(out, l->n);
            return rc;
        }
    }
    out[l->n - 1].flags |= PMIX_INFO_ARRAY_END;
    par->array = out;
    par->size = l->n;
    return PMIX_SUCCESS;
}

PMIX_EXPORT pmix_info_t *PMIx_Info_list_get_info(void *ptr, void *prev, void **next)
{
    struct cabi_infolist *l = ptr;
    struct cabi_infolist_item *it;
    if (NULL == l) {
        return NULL;
    }
    it = NULL == prev ? l->head : ((struct cabi_infolist_item *)prev)->next;
    if (NULL != next) {
        *next = it;
    }
    return NULL == it ? NULL : &it->info;
}

PMIX_EXPORT void PMIx_Info_list_release(void *ptr)
{
    struct cabi_infolist *l = ptr;
    struct cabi_infolist_item *it, *next;
    if (NULL == l) {
        return;
    }
    for (it = l->head; NULL != it; it = next) {
        next = it->next;
        PMIx_Info_destruct(&it->info);
        free(it);
    }
    free(l);
}
