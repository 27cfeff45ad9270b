/* arrays.c: PMIx_Put and PMIx_Get of PMIX_DATA_ARRAY values of other
 * element types than info and proc, across nodes, as OpenPMIx's
 * test/simple/client2.c puts one (of PMIX_VALUE). Rank 0 puts arrays of
 * uint32, size_t, int, bool, float, double, strings, byte objects and
 * values (one of them an array itself), and an empty one, commits, and
 * waits for rank 1's "arr.done"; rank 1, on another node, gets each
 * (waiting for the commit: no fence), checks type, size and elements,
 * and commits "arr.done". A data array of struct timeval, whose
 * microseconds would not travel, is refused (PMIX_ERR_NOT_SUPPORTED).
 * It prints "name value" lines and exits 0, or "FAIL ..." and exits 1. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include <pmix.h>

#include "check.h"

static pmix_proc_t me;

static const uint32_t u32s[] = {1, 2, 0xffffffffu};
static const size_t sizes[] = {0, 42, (size_t)1 << 40};
static const int ints[] = {-1, 0, 7};
static const bool bools[] = {true, false};
static const float floats[] = {1.5f, -0.25f};
static const double doubles[] = {3.25, -1e300};
static const char *strs[] = {"a", "", "bc"};

/* flat: the arrays of plain elements, which rank 1 compares byte for
 * byte. */
static const struct {
    const char *key;
    pmix_data_type_t type;
    const void *elems;
    size_t n, size;
} flat[] = {
    {"arr.u32", PMIX_UINT32, u32s, 3, sizeof(u32s[0])},     {"arr.size", PMIX_SIZE, sizes, 3, sizeof(sizes[0])},
    {"arr.int", PMIX_INT, ints, 3, sizeof(ints[0])},        {"arr.bool", PMIX_BOOL, bools, 2, sizeof(bools[0])},
    {"arr.float", PMIX_FLOAT, floats, 2, sizeof(floats[0])}, {"arr.double", PMIX_DOUBLE, doubles, 2, sizeof(doubles[0])},
    {"arr.empty", PMIX_UINT16, NULL, 0, 2},
};

static pmix_data_array_t *mkarray(size_t n, pmix_data_type_t t)
{
    pmix_data_array_t *da;
    PMIX_DATA_ARRAY_CREATE(da, n, t);
    return da;
}

/* put_da puts da (GLOBAL) and frees it. */
static pmix_status_t put_da(const char *key, pmix_data_array_t *da)
{
    pmix_value_t v;
    pmix_status_t rc;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_DATA_ARRAY;
    v.data.darray = da;
    rc = PMIx_Put(PMIX_GLOBAL, key, &v);
    PMIX_VALUE_DESTRUCT(&v);
    return rc;
}

static void put_array(const char *key, pmix_data_type_t t, const void *elems, size_t n, size_t es)
{
    pmix_data_array_t *da = mkarray(n, t);
    pmix_status_t rc;
    if (n > 0) {
        memcpy(da->array, elems, n * es);
    }
    if (PMIX_STRING == t) {
        char **s = da->array;
        size_t k;
        for (k = 0; k < n; k++) {
            s[k] = strdup(s[k]);
        }
    }
    rc = put_da(key, da);
    CHECK(PMIX_SUCCESS == rc, "put %s: %s", key, PMIx_Error_string(rc));
}

static void put_all(void)
{
    pmix_value_t *vals;
    pmix_data_array_t *da, *inner;
    pmix_byte_object_t *bo;
    struct timeval tv[1] = {{1, 2}};
    pmix_status_t rc;
    size_t k;
    for (k = 0; k < sizeof(flat) / sizeof(flat[0]); k++) {
        put_array(flat[k].key, flat[k].type, flat[k].elems, flat[k].n, flat[k].size);
    }
    put_array("arr.str", PMIX_STRING, strs, 3, sizeof(strs[0]));

    da = mkarray(2, PMIX_BYTE_OBJECT);
    bo = da->array;
    bo[0].bytes = malloc(3);
    memcpy(bo[0].bytes, "\0x\1", 3);
    bo[0].size = 3;
    rc = put_da("arr.bytes", da);
    CHECK(PMIX_SUCCESS == rc, "put arr.bytes: %s", PMIx_Error_string(rc));

    /* as client2.c: an array of values */
    da = mkarray(3, PMIX_VALUE);
    vals = da->array;
    PMIX_VALUE_LOAD(&vals[0], "first", PMIX_STRING);
    PMIX_VALUE_LOAD(&vals[1], &ints[2], PMIX_INT);
    inner = mkarray(2, PMIX_UINT32);
    memcpy(inner->array, u32s, 2 * sizeof(u32s[0]));
    vals[2].type = PMIX_DATA_ARRAY;
    vals[2].data.darray = inner;
    rc = put_da("arr.values", da);
    CHECK(PMIX_SUCCESS == rc, "put arr.values: %s", PMIx_Error_string(rc));

    da = mkarray(1, PMIX_TIMEVAL);
    memcpy(da->array, tv, sizeof(tv));
    printf("put-timeval %d\n", put_da("arr.tv", da));
}

static pmix_data_array_t *get_array(const char *key, pmix_data_type_t t, size_t n, pmix_value_t **keep)
{
    pmix_proc_t p;
    pmix_value_t *v = NULL;
    pmix_status_t rc;
    PMIX_LOAD_PROCID(&p, me.nspace, 0);
    *keep = NULL;
    rc = PMIx_Get(&p, key, NULL, 0, &v);
    CHECK(PMIX_SUCCESS == rc, "get %s: %s", key, PMIx_Error_string(rc));
    if (PMIX_SUCCESS != rc) {
        return NULL;
    }
    *keep = v;
    CHECK(PMIX_DATA_ARRAY == v->type && NULL != v->data.darray, "%s: type %d", key, v->type);
    if (PMIX_DATA_ARRAY != v->type || NULL == v->data.darray) {
        return NULL;
    }
    CHECK(t == v->data.darray->type && n == v->data.darray->size, "%s: array of %d, %zu elements", key,
          v->data.darray->type, v->data.darray->size);
    if (t != v->data.darray->type || n != v->data.darray->size) {
        return NULL;
    }
    return v->data.darray;
}

static void check_same(const char *key, pmix_data_type_t t, const void *want, size_t n, size_t es)
{
    pmix_value_t *keep;
    pmix_data_array_t *da = get_array(key, t, n, &keep);
    if (NULL != da && n > 0) {
        CHECK(0 == memcmp(da->array, want, n * es), "%s: elements differ", key);
    }
    if (NULL != keep) {
        PMIX_VALUE_RELEASE(keep);
    }
    printf("%s ok\n", key);
}

static void check_all(void)
{
    pmix_value_t *keep;
    pmix_data_array_t *da;
    size_t k;
    for (k = 0; k < sizeof(flat) / sizeof(flat[0]); k++) {
        check_same(flat[k].key, flat[k].type, flat[k].elems, flat[k].n, flat[k].size);
    }

    da = get_array("arr.str", PMIX_STRING, 3, &keep);
    for (k = 0; NULL != da && k < 3; k++) {
        const char *s = ((char **)da->array)[k];
        CHECK(NULL != s && 0 == strcmp(s, strs[k]), "arr.str[%zu]", k);
    }
    PMIX_VALUE_RELEASE(keep);
    printf("arr.str ok\n");

    da = get_array("arr.bytes", PMIX_BYTE_OBJECT, 2, &keep);
    if (NULL != da) {
        pmix_byte_object_t *bo = da->array;
        CHECK(3 == bo[0].size && 0 == memcmp(bo[0].bytes, "\0x\1", 3), "arr.bytes[0]");
        CHECK(0 == bo[1].size, "arr.bytes[1]: %zu bytes", bo[1].size);
    }
    PMIX_VALUE_RELEASE(keep);
    printf("arr.bytes ok\n");

    da = get_array("arr.values", PMIX_VALUE, 3, &keep);
    if (NULL != da) {
        pmix_value_t *vals = da->array;
        CHECK(PMIX_STRING == vals[0].type && 0 == strcmp("first", vals[0].data.string), "arr.values[0]");
        CHECK(PMIX_INT32 == vals[1].type && 7 == vals[1].data.int32, "arr.values[1]: type %d", vals[1].type);
        CHECK(PMIX_DATA_ARRAY == vals[2].type && PMIX_UINT32 == vals[2].data.darray->type &&
                  2 == vals[2].data.darray->size && 0 == memcmp(vals[2].data.darray->array, u32s, 8),
              "arr.values[2]");
    }
    PMIX_VALUE_RELEASE(keep);
    printf("arr.values ok\n");
}

int main(void)
{
    pmix_status_t rc;
    pmix_proc_t p;
    pmix_value_t v, *got = NULL;
    rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    printf("init\n");
    fflush(stdout);
    if (0 == me.rank) {
        put_all();
        rc = PMIx_Commit();
        CHECK(PMIX_SUCCESS == rc, "commit: %s", PMIx_Error_string(rc));
        PMIX_LOAD_PROCID(&p, me.nspace, 1);
        rc = PMIx_Get(&p, "arr.done", NULL, 0, &got);
        CHECK(PMIX_SUCCESS == rc, "waiting for arr.done: %s", PMIx_Error_string(rc));
        if (NULL != got) {
            PMIX_VALUE_RELEASE(got);
        }
    } else {
        check_all();
        PMIX_VALUE_LOAD(&v, "yes", PMIX_STRING);
        rc = PMIx_Put(PMIX_GLOBAL, "arr.done", &v);
        PMIX_VALUE_DESTRUCT(&v);
        CHECK(PMIX_SUCCESS == rc, "put arr.done: %s", PMIx_Error_string(rc));
        rc = PMIx_Commit();
        CHECK(PMIX_SUCCESS == rc, "commit arr.done: %s", PMIx_Error_string(rc));
    }
    rc = PMIx_Finalize(NULL, 0);
    printf("finalize %d\n", rc);
    return failed;
}
