/*
 * wire.c — frames and typed values of docs/protocol.md (see wire.h).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include <msgpuck.h>

#include "wire.h"

/* msgpuck's functions are C99 inline: these declarations make this file
 * hold their one external definition (C99 6.7.4), so that the library
 * links at any optimisation level, and stays whole without msgpuck's
 * static library (its type tables and mp_check: see wire.h). */
extern char *mp_encode_uint(char *data, uint64_t num);
extern char *mp_encode_int(char *data, int64_t num);
extern char *mp_encode_str(char *data, const char *str, uint32_t len);
extern char *mp_encode_bin(char *data, const char *str, uint32_t len);
extern char *mp_encode_nil(char *data);
extern char *mp_encode_bool(char *data, bool val);
extern char *mp_encode_array(char *data, uint32_t size);
extern char *mp_encode_double(char *data, double num);
extern uint32_t mp_decode_map(const char **data);
extern uint32_t mp_decode_array(const char **data);
extern uint32_t mp_decode_array_slowpath(uint8_t c, const char **data);
extern uint64_t mp_decode_uint(const char **data);
extern int64_t mp_decode_int(const char **data);
extern const char *mp_decode_str(const char **data, uint32_t *len);
extern const char *mp_decode_bin(const char **data, uint32_t *len);
extern bool mp_decode_bool(const char **data);
extern double mp_decode_double(const char **data);
extern float mp_decode_float(const char **data);
extern uint8_t mp_load_u8(const char **data);
extern uint16_t mp_load_u16(const char **data);
extern uint32_t mp_load_u32(const char **data);
extern uint64_t mp_load_u64(const char **data);
extern float mp_load_float(const char **data);
extern double mp_load_double(const char **data);
extern char *mp_store_u8(char *data, uint8_t val);
extern char *mp_store_u16(char *data, uint16_t val);
extern char *mp_store_u32(char *data, uint32_t val);
extern char *mp_store_u64(char *data, uint64_t val);
extern char *mp_store_double(char *data, double val);
extern uint32_t mp_decode_strl(const char **data);
extern uint32_t mp_decode_binl(const char **data);
extern char *mp_encode_strl(char *data, uint32_t len);
extern char *mp_encode_binl(char *data, uint32_t len);

/* ---- the validator ---- */

static uint32_t be16(const unsigned char *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

enum mpv_kind mpv_kind(const char *p)
{
    unsigned char c = (unsigned char)*p;
    if (c <= 0x7f) return K_UINT;
    if (c <= 0x8f) return K_MAP;
    if (c <= 0x9f) return K_ARRAY;
    if (c <= 0xbf) return K_STR;
    if (c >= 0xe0) return K_INT;
    switch (c) {
    case 0xc0: return K_NIL;
    case 0xc2: case 0xc3: return K_BOOL;
    case 0xc4: case 0xc5: case 0xc6: return K_BIN;
    case 0xc7: case 0xc8: case 0xc9: return K_EXT;
    case 0xca: return K_FLOAT;
    case 0xcb: return K_DOUBLE;
    case 0xcc: case 0xcd: case 0xce: case 0xcf: return K_UINT;
    case 0xd0: case 0xd1: case 0xd2: case 0xd3: return K_INT;
    case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: return K_EXT;
    case 0xd9: case 0xda: case 0xdb: return K_STR;
    case 0xdc: case 0xdd: return K_ARRAY;
    case 0xde: case 0xdf: return K_MAP;
    }
    return K_BAD; /* 0xc1 */
}

const char *mpv_skip(const char *p, const char *end)
{
    uint64_t pending = 1;
    while (pending > 0) {
        const unsigned char *u = (const unsigned char *)p;
        size_t left, hdr = 1;
        uint64_t body = 0, items = 0;
        unsigned char c;
        if (p >= end) {
            return NULL;
        }
        left = (size_t)(end - p);
        c = u[0];
        pending--;
        if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3) {
            /* fixint, nil, bool */
        } else if (c <= 0x8f) {
            items = 2u * (c & 0x0f);
        } else if (c <= 0x9f) {
            items = c & 0x0f;
        } else if (c <= 0xbf) {
            body = c & 0x1f;
        } else {
            size_t lenbytes = 0;
            switch (c) {
            case 0xc4: case 0xd9: lenbytes = 1; break;
            case 0xc5: case 0xda: lenbytes = 2; break;
            case 0xc6: case 0xdb: lenbytes = 4; break;
            case 0xc7: lenbytes = 1; body = 1; break;
            case 0xc8: lenbytes = 2; body = 1; break;
            case 0xc9: lenbytes = 4; body = 1; break;
            case 0xca: body = 4; break;
            case 0xcb: body = 8; break;
            case 0xcc: case 0xd0: body = 1; break;
            case 0xcd: case 0xd1: body = 2; break;
            case 0xce: case 0xd2: body = 4; break;
            case 0xcf: case 0xd3: body = 8; break;
            case 0xd4: body = 2; break;
            case 0xd5: body = 3; break;
            case 0xd6: body = 5; break;
            case 0xd7: body = 9; break;
            case 0xd8: body = 17; break;
            case 0xdc: case 0xde: lenbytes = 2; break;
            case 0xdd: case 0xdf: lenbytes = 4; break;
            default: return NULL; /* 0xc1 */
            }
            if (left < 1 + lenbytes) {
                return NULL;
            }
            hdr += lenbytes;
            if (lenbytes > 0) {
                uint64_t n = 1 == lenbytes ? u[1] : 2 == lenbytes ? be16(u + 1) : be32(u + 1);
                if (c == 0xdc || c == 0xdd) {
                    items = n;
                } else if (c == 0xde || c == 0xdf) {
                    items = 2 * n;
                } else {
                    body += n;
                }
            }
        }
        if (body > left - hdr) {
            return NULL;
        }
        p += hdr + body;
        /* Every element takes at least one byte: a count over the bytes
         * left is a lie, refused before it is walked. */
        if (items > (uint64_t)(end - p)) {
            return NULL;
        }
        pending += items;
        if (pending > (uint64_t)(end - p)) {
            return NULL;
        }
    }
    return p;
}

/* ---- cursors ---- */

static int cur_ok(struct cur *c)
{
    if (c->bad || NULL == c->p || c->p >= c->end) {
        c->bad = 1;
        return 0;
    }
    return 1;
}

static void cur_fail(struct cur *c) { c->bad = 1; }

int cur_nil(struct cur *c)
{
    if (cur_ok(c) && K_NIL == mpv_kind(c->p)) {
        c->p++;
        return 1;
    }
    return 0;
}

uint32_t cur_array(struct cur *c)
{
    uint32_t n;
    if (!cur_ok(c) || K_ARRAY != mpv_kind(c->p)) {
        cur_fail(c);
        return 0;
    }
    n = mp_decode_array(&c->p);
    if (n > (size_t)(c->end - c->p)) {
        cur_fail(c);
        return 0;
    }
    return n;
}

int cur_uint(struct cur *c, uint64_t max, uint64_t *out)
{
    uint64_t u;
    *out = 0;
    if (!cur_ok(c)) {
        return -1;
    }
    switch (mpv_kind(c->p)) {
    case K_UINT:
        u = mp_decode_uint(&c->p);
        break;
    case K_INT: {
        int64_t i = mp_decode_int(&c->p);
        if (i < 0) {
            cur_fail(c);
            return -1;
        }
        u = (uint64_t)i;
        break;
    }
    default:
        cur_fail(c);
        return -1;
    }
    if (u > max) {
        cur_fail(c);
        return -1;
    }
    *out = u;
    return 0;
}

int cur_int(struct cur *c, int64_t min, int64_t max, int64_t *out)
{
    int64_t i;
    *out = 0;
    if (!cur_ok(c)) {
        return -1;
    }
    switch (mpv_kind(c->p)) {
    case K_UINT: {
        uint64_t u = mp_decode_uint(&c->p);
        if (u > (uint64_t)INT64_MAX) {
            cur_fail(c);
            return -1;
        }
        i = (int64_t)u;
        break;
    }
    case K_INT:
        i = mp_decode_int(&c->p);
        break;
    default:
        cur_fail(c);
        return -1;
    }
    if (i < min || i > max) {
        cur_fail(c);
        return -1;
    }
    *out = i;
    return 0;
}

const char *cur_str(struct cur *c, uint32_t *len)
{
    *len = 0;
    if (!cur_ok(c)) {
        return NULL;
    }
    switch (mpv_kind(c->p)) {
    case K_NIL:
        c->p++;
        return NULL;
    case K_STR: {
        const char *s = mp_decode_str(&c->p, len);
        if (c->p > c->end) {
            cur_fail(c);
            return NULL;
        }
        return s;
    }
    case K_BIN: {
        const char *s = mp_decode_bin(&c->p, len);
        if (c->p > c->end) {
            cur_fail(c);
            return NULL;
        }
        return s;
    }
    default:
        cur_fail(c);
        return NULL;
    }
}

void cur_skip(struct cur *c)
{
    const char *n;
    if (!cur_ok(c)) {
        return;
    }
    n = mpv_skip(c->p, c->end);
    if (NULL == n) {
        cur_fail(c);
        return;
    }
    c->p = n;
}

static void copy_fixed(char *dst, size_t size, const char *s, uint32_t n)
{
    memset(dst, 0, size);
    if (n > size - 1) {
        n = (uint32_t)(size - 1);
    }
    if (n > 0) {
        memcpy(dst, s, n);
    }
}

int cur_proc(struct cur *c, pmix_proc_t *p)
{
    uint32_t n;
    const char *ns;
    uint64_t rank;
    memset(p, 0, sizeof(*p));
    if (2 != cur_array(c)) {
        cur_fail(c);
        return -1;
    }
    ns = cur_str(c, &n);
    if (cur_uint(c, UINT32_MAX, &rank) < 0 || c->bad) {
        cur_fail(c);
        return -1;
    }
    copy_fixed(p->nspace, sizeof(p->nspace), ns, n);
    p->rank = (pmix_rank_t)rank;
    return 0;
}

/* The keys whose OpenPMIx type the wire carries as another of the same
 * width (the Go bridge's cTypes). */
static pmix_data_type_t c_type(const char *key, pmix_data_type_t wire)
{
    static const struct {
        const char *key;
        pmix_data_type_t carrier, c;
    } types[] = {
        {"pmix.exit.code", PMIX_INT32, PMIX_INT}, {"pmix.timeout", PMIX_INT32, PMIX_INT},
        {"pmix.evtimeout", PMIX_INT32, PMIX_INT}, {"pmix.wait", PMIX_INT32, PMIX_INT},
        {"pmix.job.time", PMIX_INT32, PMIX_INT},  {"pmix.sp.time", PMIX_INT32, PMIX_INT},
        {"pmix.ppid", PMIX_INT32, PMIX_PID},      {"pmix.grp.ctxid", PMIX_UINT64, PMIX_SIZE},
        {"pmix.grp.lclid", PMIX_UINT64, PMIX_SIZE}, {"pmix.fab.idx", PMIX_UINT64, PMIX_SIZE},
        {"pmix.fab.nverts", PMIX_UINT64, PMIX_SIZE}, {"pmix.hwlocaddr", PMIX_UINT64, PMIX_SIZE},
        {"pmix.hwlocsize", PMIX_UINT64, PMIX_SIZE},
    };
    size_t i;
    if (NULL == key) {
        return wire;
    }
    for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (0 == strcmp(key, types[i].key) && wire == types[i].carrier) {
            return types[i].c;
        }
    }
    return wire;
}

static char *dupn(const char *s, uint32_t n)
{
    char *out = malloc((size_t)n + 1);
    if (NULL == out) {
        return NULL;
    }
    if (n > 0) {
        memcpy(out, s, n);
    }
    out[n] = '\0';
    return out;
}

static int wire_type(const pmix_value_t *v);

/* elem_wire is the wire type the elements of a data array of C type t
 * travel as (WIRE_ARRAY's), -1 for a type whose arrays cannot leave the
 * process. PMIX_VALUE elements travel each as its own type. */
static int elem_wire(pmix_data_type_t t)
{
    pmix_value_t probe;
    if (PMIX_TIMEVAL == t || PMIX_DATA_ARRAY == t || PMIX_PROC == t || PMIX_INFO == t || 0 == elemsize(t)) {
        return -1; /* TIMEVAL: its microseconds would not come back */
    }
    if (PMIX_VALUE == t) {
        return 0;
    }
    memset(&probe, 0, sizeof(probe));
    probe.type = t;
    return wire_type(&probe);
}

/* cur_array_value reads WIRE_ARRAY's payload into v, a PMIX_DATA_ARRAY
 * of the element type it names; each element must travel as that type
 * does. */
static int cur_array_value(struct cur *c, pmix_value_t *v, int depth)
{
    pmix_data_array_t *da;
    uint64_t et;
    uint32_t n, k;
    size_t es;
    int want;
    if (depth > WIRE_MAX_NESTING || 2 != cur_array(c) || cur_uint(c, UINT16_MAX, &et) < 0 ||
        (want = elem_wire((pmix_data_type_t)et)) < 0) {
        cur_fail(c);
        return -1;
    }
    da = calloc(1, sizeof(*da));
    if (NULL == da) {
        cur_fail(c);
        return -1;
    }
    da->type = (pmix_data_type_t)et;
    v->data.darray = da;
    v->type = PMIX_DATA_ARRAY;
    n = cur_array(c);
    if (c->bad || 0 == n) {
        return c->bad ? -1 : 0;
    }
    es = elemsize(da->type);
    da->array = calloc(n, es);
    if (NULL == da->array) {
        cur_fail(c);
        return -1;
    }
    da->size = n; /* zeroed elements destruct as nothing if one fails */
    for (k = 0; k < n; k++) {
        char *slot = (char *)da->array + (size_t)k * es;
        pmix_value_t e;
        if (cur_value(c, &e, NULL, depth + 1) < 0) {
            PMIx_Value_destruct(&e);
            return -1;
        }
        if (PMIX_VALUE == da->type) {
            memcpy(slot, &e, sizeof(e));
            continue;
        }
        if (wire_type(&e) != want) {
            PMIx_Value_destruct(&e);
            cur_fail(c);
            return -1;
        }
        if (PMIX_FLOAT == da->type) {
            e.data.fval = (float)e.data.dval;
        }
        memcpy(slot, &e.data, es); /* the element's storage moves into the array */
    }
    return 0;
}

int cur_value(struct cur *c, pmix_value_t *v, const char *key, int depth)
{
    uint64_t t, u;
    int64_t i;
    memset(v, 0, sizeof(*v));
    if (2 != cur_array(c) || cur_uint(c, UINT16_MAX, &t) < 0) {
        cur_fail(c);
        return -1;
    }
    switch (t) {
    case 0:
        if (!cur_nil(c)) {
            cur_skip(c); /* a payload of the undef type is ignored */
        }
        v->type = PMIX_UNDEF;
        break;
    case 1:
        if (!cur_ok(c) || K_BOOL != mpv_kind(c->p)) {
            cur_fail(c);
            return -1;
        }
        v->data.flag = mp_decode_bool(&c->p);
        v->type = PMIX_BOOL;
        break;
    case 3: {
        uint32_t n;
        const char *s = cur_str(c, &n);
        if (c->bad) {
            return -1;
        }
        v->data.string = dupn(s, n);
        if (NULL == v->data.string) {
            cur_fail(c);
            return -1;
        }
        v->type = PMIX_STRING;
        break;
    }
    case 7: case 8: case 9: case 10: case 20: {
        int64_t lo = 7 == t ? INT8_MIN : 8 == t ? INT16_MIN : 10 == t ? INT64_MIN : INT32_MIN;
        int64_t hi = 7 == t ? INT8_MAX : 8 == t ? INT16_MAX : 10 == t ? INT64_MAX : INT32_MAX;
        if (cur_int(c, lo, hi, &i) < 0) {
            return -1;
        }
        switch (t) {
        case 7: v->data.int8 = (int8_t)i; v->type = PMIX_INT8; break;
        case 8: v->data.int16 = (int16_t)i; v->type = PMIX_INT16; break;
        case 9: v->data.int32 = (int32_t)i; v->type = PMIX_INT32; break;
        case 10: v->data.int64 = i; v->type = PMIX_INT64; break;
        default: v->data.status = (pmix_status_t)i; v->type = PMIX_STATUS; break;
        }
        break;
    }
    case 12: case 13: case 14: case 15: case 30: case 33: case 40: {
        uint64_t hi = (12 == t || 30 == t || 33 == t) ? UINT8_MAX : 13 == t ? UINT16_MAX
                    : 15 == t ? UINT64_MAX : UINT32_MAX;
        if (cur_uint(c, hi, &u) < 0) {
            return -1;
        }
        switch (t) {
        case 12: v->data.uint8 = (uint8_t)u; v->type = PMIX_UINT8; break;
        case 13: v->data.uint16 = (uint16_t)u; v->type = PMIX_UINT16; break;
        case 14: v->data.uint32 = (uint32_t)u; v->type = PMIX_UINT32; break;
        case 15: v->data.uint64 = u; v->type = PMIX_UINT64; break;
        case 30: v->data.persist = (pmix_persistence_t)u; v->type = PMIX_PERSIST; break;
        case 33: v->data.range = (pmix_data_range_t)u; v->type = PMIX_DATA_RANGE; break;
        default: v->data.rank = (pmix_rank_t)u; v->type = PMIX_PROC_RANK; break;
        }
        break;
    }
    case 17:
        if (!cur_ok(c)) {
            return -1;
        }
        switch (mpv_kind(c->p)) {
        case K_DOUBLE: v->data.dval = mp_decode_double(&c->p); break;
        case K_FLOAT: v->data.dval = mp_decode_float(&c->p); break;
        case K_UINT: v->data.dval = (double)mp_decode_uint(&c->p); break;
        case K_INT: v->data.dval = (double)mp_decode_int(&c->p); break;
        default: cur_fail(c); return -1;
        }
        v->type = PMIX_DOUBLE;
        break;
    case 19:
        if (2 != cur_array(c) || cur_int(c, INT64_MIN, INT64_MAX, &i) < 0 ||
            cur_uint(c, 999999999, &u) < 0) {
            cur_fail(c);
            return -1;
        }
        v->data.time = (time_t)i;
        v->type = PMIX_TIME;
        break;
    case 22:
        v->data.proc = calloc(1, sizeof(pmix_proc_t));
        if (NULL == v->data.proc) {
            cur_fail(c);
            return -1;
        }
        v->type = PMIX_PROC;
        if (cur_proc(c, v->data.proc) < 0) {
            return -1;
        }
        break;
    case 24: {
        pmix_data_array_t *da = calloc(1, sizeof(*da));
        size_t n = 0;
        pmix_info_t *arr = NULL;
        if (NULL == da) {
            cur_fail(c);
            return -1;
        }
        da->type = PMIX_INFO;
        v->data.darray = da;
        v->type = PMIX_DATA_ARRAY;
        if (cur_infos(c, &arr, &n, depth + 1) < 0) {
            return -1;
        }
        da->array = arr;
        da->size = n;
        break;
    }
    case 27: {
        uint32_t n;
        const char *b = cur_str(c, &n);
        if (c->bad) {
            return -1;
        }
        v->type = PMIX_BYTE_OBJECT;
        if (n > 0) {
            v->data.bo.bytes = malloc(n);
            if (NULL == v->data.bo.bytes) {
                cur_fail(c);
                return -1;
            }
            memcpy(v->data.bo.bytes, b, n);
            v->data.bo.size = n;
        }
        break;
    }
    case 39: {
        pmix_data_array_t *da = calloc(1, sizeof(*da));
        uint32_t n, k;
        if (NULL == da) {
            cur_fail(c);
            return -1;
        }
        da->type = PMIX_PROC;
        v->data.darray = da;
        v->type = PMIX_DATA_ARRAY;
        n = cur_array(c);
        if (c->bad) {
            return -1;
        }
        if (n > 0) {
            pmix_proc_t *procs = calloc(n, sizeof(pmix_proc_t));
            if (NULL == procs) {
                cur_fail(c);
                return -1;
            }
            da->array = procs;
            da->size = n;
            for (k = 0; k < n; k++) {
                if (cur_proc(c, &procs[k]) < 0) {
                    return -1;
                }
            }
        }
        break;
    }
    case WIRE_ARRAY:
        if (cur_array_value(c, v, depth) < 0) {
            return -1;
        }
        break;
    default:
        cur_fail(c);
        return -1;
    }
    v->type = c_type(key, v->type);
    return c->bad ? -1 : 0;
}

int cur_infos(struct cur *c, pmix_info_t **out, size_t *n, int depth)
{
    uint32_t cnt, k;
    pmix_info_t *arr;
    *out = NULL;
    *n = 0;
    if (depth > WIRE_MAX_NESTING) {
        cur_fail(c);
        return -1;
    }
    cnt = cur_array(c);
    if (c->bad) {
        return -1;
    }
    if (0 == cnt) {
        return 0;
    }
    arr = calloc(cnt, sizeof(pmix_info_t));
    if (NULL == arr) {
        cur_fail(c);
        return -1;
    }
    for (k = 0; k < cnt; k++) {
        uint32_t kl;
        const char *key;
        uint64_t flags;
        if (3 != cur_array(c)) {
            cur_fail(c);
            break;
        }
        key = cur_str(c, &kl);
        if (c->bad || kl > PMIX_MAX_KEYLEN || cur_uint(c, UINT32_MAX, &flags) < 0) {
            cur_fail(c);
            break;
        }
        copy_fixed(arr[k].key, sizeof(arr[k].key), key, kl);
        /* only the required flag travels: others (PERSISTENT: not owned)
         * would change what freeing the array frees */
        arr[k].flags = (pmix_info_directives_t)flags & PMIX_INFO_REQD;
        if (cur_value(c, &arr[k].value, arr[k].key, depth) < 0) {
            k++; /* the half-made value is freed with the others */
            break;
        }
    }
    if (c->bad) {
        PMIx_Info_free(arr, k < cnt ? k : cnt);
        return -1;
    }
    arr[cnt - 1].flags |= PMIX_INFO_ARRAY_END;
    *out = arr;
    *n = cnt;
    return 0;
}

/* ---- frames ---- */

static const char *const frame_keys[] = {"t", "s", "st", "m", "ec", "v", "ns", "rk", "cr", "id", "nm", "cs", "c", "r",
                                          "src", "in", "res", "pr", "ks", "pd", "pc", "pt", "b", "ch", "iv", "dn"};
#define NKEYS (sizeof(frame_keys) / sizeof(frame_keys[0]))

static int key_index(const char *k, uint32_t n)
{
    size_t i;
    for (i = 0; i < NKEYS; i++) {
        if (strlen(frame_keys[i]) == n && 0 == memcmp(frame_keys[i], k, n)) {
            return (int)i;
        }
    }
    return -1;
}

static int is_scalar(enum mpv_kind k) { return K_ARRAY != k && K_MAP != k && K_BAD != k; }

enum frame_rc frame_parse(const char *buf, size_t len, size_t max, struct frame *f, size_t *used,
                          const char **why)
{
    const char *p, *end, *w = NULL;
    uint32_t body, n, i;
    uint32_t seen = 0;
    memset(f, 0, sizeof(*f));
    if (NULL == why) {
        why = &w;
    }
    if (len < 4) {
        return FRAME_MORE;
    }
    body = be32((const unsigned char *)buf);
    if (body > max) {
        *why = "frame length over the limit";
        return FRAME_TOO_BIG;
    }
    if (len - 4 < body) {
        return FRAME_MORE;
    }
    *used = 4 + (size_t)body;
    p = buf + 4;
    end = p + body;
    if (p == end || K_MAP != mpv_kind(p)) {
        *why = "frame body is not a map";
        return FRAME_MALFORMED;
    }
    if (mpv_skip(p, end) != end) {
        *why = "frame body is not one whole msgpack value";
        return FRAME_MALFORMED;
    }
    n = mp_decode_map(&p);
    for (i = 0; i < n; i++) {
        struct cur c = {p, end, 0};
        uint32_t kl;
        const char *k;
        const char *vstart;
        int idx;
        if (K_STR != mpv_kind(c.p) && K_BIN != mpv_kind(c.p)) {
            *why = "frame key is not a string";
            return FRAME_MALFORMED;
        }
        k = cur_str(&c, &kl);
        if (c.bad) {
            return FRAME_MALFORMED;
        }
        idx = key_index(k, kl);
        vstart = c.p;
        if (idx < 0) {
            /* unknown: skipped if scalar; a duplicate unknown key goes
             * unnoticed here, which only costs skipping it twice */
            if (!is_scalar(mpv_kind(c.p))) {
                *why = "unknown frame key with a nested value";
                return FRAME_MALFORMED;
            }
            cur_skip(&c);
            p = c.p;
            continue;
        }
        if (seen & (1u << idx)) {
            *why = "frame key given twice";
            return FRAME_MALFORMED;
        }
        seen |= 1u << idx;
        {
            const char *k2 = frame_keys[idx];
            uint64_t u;
            int64_t s;
            struct raw *r = NULL;
            if (0 == strcmp(k2, "t")) {
                cur_uint(&c, 255, &f->t);
            } else if (0 == strcmp(k2, "s")) {
                cur_uint(&c, UINT64_MAX, &f->s);
            } else if (0 == strcmp(k2, "st")) {
                cur_int(&c, INT32_MIN, INT32_MAX, &f->st);
                f->has_st = 1;
            } else if (0 == strcmp(k2, "c")) {
                cur_int(&c, INT32_MIN, INT32_MAX, &f->c);
            } else if (0 == strcmp(k2, "v")) {
                cur_uint(&c, UINT32_MAX, &f->v);
                f->has_v = 1;
            } else if (0 == strcmp(k2, "rk")) {
                cur_uint(&c, UINT32_MAX, &f->rk);
                f->has_rk = 1;
            } else if (0 == strcmp(k2, "id")) {
                cur_uint(&c, UINT64_MAX, &f->id);
            } else if (0 == strcmp(k2, "r")) {
                cur_uint(&c, 255, &f->r);
            } else if (0 == strcmp(k2, "ch")) {
                cur_uint(&c, UINT16_MAX, &u);
            } else if (0 == strcmp(k2, "m")) {
                f->m = cur_str(&c, &f->m_len);
            } else if (0 == strcmp(k2, "ec")) {
                f->ec = cur_str(&c, &f->ec_len);
            } else if (0 == strcmp(k2, "ns")) {
                f->ns = cur_str(&c, &f->ns_len);
            } else if (0 == strcmp(k2, "nm")) {
                f->nm = cur_str(&c, &f->nm_len);
            } else if (0 == strcmp(k2, "cr")) {
                cur_str(&c, &kl);
            } else if (0 == strcmp(k2, "b")) {
                r = &f->b;
            } else {
                /* nested: kept raw, checked as a whole, decoded when used */
                static const struct {
                    const char *k;
                    size_t off;
                } nested[] = {
                    {"in", offsetof(struct frame, in)}, {"res", offsetof(struct frame, res)},
                    {"pr", offsetof(struct frame, pr)}, {"ks", offsetof(struct frame, ks)},
                    {"pd", offsetof(struct frame, pd)}, {"pc", offsetof(struct frame, pc)},
                    {"src", offsetof(struct frame, src)}, {"iv", offsetof(struct frame, iv)},
                    {"cs", offsetof(struct frame, cs)}, {"dn", offsetof(struct frame, dn)},
                    {"pt", offsetof(struct frame, pt)},
                };
                size_t j;
                for (j = 0; j < sizeof(nested) / sizeof(nested[0]); j++) {
                    if (0 == strcmp(k2, nested[j].k)) {
                        r = (struct raw *)((char *)f + nested[j].off);
                    }
                }
            }
            (void)s;
            if (NULL != r) {
                cur_skip(&c);
                r->p = vstart;
                r->end = c.p;
            }
        }
        if (c.bad) {
            *why = "frame field of the wrong kind";
            return FRAME_MALFORMED;
        }
        p = c.p;
    }
    if (p != end) {
        *why = "trailing bytes after the frame's map";
        return FRAME_MALFORMED;
    }
    if (0 == f->t) {
        *why = "frame without a type";
        return FRAME_MALFORMED;
    }
    return FRAME_OK;
}

/* ---- writing ---- */

void wb_free(struct wbuf *w)
{
    free(w->p);
    memset(w, 0, sizeof(*w));
}

char *wb_reserve(struct wbuf *w, size_t n)
{
    if (w->oom) {
        return NULL;
    }
    if (w->cap - w->len < n) {
        size_t cap = w->cap ? w->cap : 256;
        char *np;
        while (cap - w->len < n) {
            if (cap > SIZE_MAX / 2) {
                w->oom = 1;
                return NULL;
            }
            cap *= 2;
        }
        np = realloc(w->p, cap);
        if (NULL == np) {
            w->oom = 1;
            return NULL;
        }
        w->p = np;
        w->cap = cap;
    }
    return w->p + w->len;
}

#define WB_PUT(w, maxsize, expr)                     \
    do {                                             \
        char *at_ = wb_reserve((w), (maxsize));      \
        if (NULL != at_) {                           \
            char *e_ = (expr);                       \
            (w)->len += (size_t)(e_ - at_);          \
        }                                            \
    } while (0)

void wb_uint(struct wbuf *w, uint64_t u) { WB_PUT(w, 9, mp_encode_uint(at_, u)); }
void wb_int(struct wbuf *w, int64_t i)
{
    if (i >= 0) {
        wb_uint(w, (uint64_t)i);
    } else {
        WB_PUT(w, 9, mp_encode_int(at_, i));
    }
}
void wb_str(struct wbuf *w, const char *s, size_t n)
{
    if (n > UINT32_MAX) {
        w->oom = 1;
        return;
    }
    WB_PUT(w, 5 + n, mp_encode_str(at_, n ? s : "", (uint32_t)n));
}
void wb_cstr(struct wbuf *w, const char *s) { wb_str(w, s ? s : "", s ? strlen(s) : 0); }
void wb_bin(struct wbuf *w, const void *b, size_t n)
{
    if (n > UINT32_MAX) {
        w->oom = 1;
        return;
    }
    WB_PUT(w, 5 + n, mp_encode_bin(at_, n ? b : "", (uint32_t)n));
}
void wb_nil(struct wbuf *w) { WB_PUT(w, 1, mp_encode_nil(at_)); }
void wb_bool(struct wbuf *w, int b) { WB_PUT(w, 1, mp_encode_bool(at_, b != 0)); }
void wb_array(struct wbuf *w, uint32_t n) { WB_PUT(w, 5, mp_encode_array(at_, n)); }
void wb_raw(struct wbuf *w, const char *p, size_t n)
{
    char *at = wb_reserve(w, n);
    if (NULL != at) {
        memcpy(at, p, n);
        w->len += n;
    }
}

static size_t wb_hdr32(struct wbuf *w, unsigned char code)
{
    char *at = wb_reserve(w, 5);
    size_t off = w->len;
    if (NULL != at) {
        at[0] = (char)code;
        memset(at + 1, 0, 4);
        w->len += 5;
    }
    return off;
}
size_t wb_array32(struct wbuf *w) { return wb_hdr32(w, 0xdd); }
size_t wb_map32(struct wbuf *w) { return wb_hdr32(w, 0xdf); }

static void put_be32(char *p, uint32_t n)
{
    p[0] = (char)(n >> 24);
    p[1] = (char)(n >> 16);
    p[2] = (char)(n >> 8);
    p[3] = (char)n;
}

void wb_patch32(struct wbuf *w, size_t at, uint32_t n)
{
    if (!w->oom && at + 5 <= w->len) {
        put_be32(w->p + at + 1, n);
    }
}

void fw_begin(struct fw *f, struct wbuf *w, unsigned type, uint64_t seq)
{
    char *at;
    f->w = w;
    f->n = 0;
    f->start = w->len;
    at = wb_reserve(w, 4);
    if (NULL != at) {
        w->len += 4;
    }
    f->map = wb_map32(w);
    fw_key(f, "t");
    wb_uint(w, type);
    if (0 != seq) {
        fw_key(f, "s");
        wb_uint(w, seq);
    }
}

void fw_key(struct fw *f, const char *key)
{
    f->n++;
    wb_cstr(f->w, key);
}

int fw_end(struct fw *f)
{
    struct wbuf *w = f->w;
    if (w->oom) {
        return -1;
    }
    wb_patch32(w, f->map, f->n);
    put_be32(w->p + f->start, (uint32_t)(w->len - f->start - 4));
    return 0;
}

void wb_proc(struct wbuf *w, const pmix_proc_t *p)
{
    wb_array(w, 2);
    wb_str(w, p->nspace, strnlen(p->nspace, PMIX_MAX_NSLEN));
    wb_uint(w, p->rank);
}

void wb_procs(struct wbuf *w, const pmix_proc_t *procs, size_t n, const char *self)
{
    size_t i;
    wb_array(w, (uint32_t)n);
    for (i = 0; i < n; i++) {
        if ('\0' == procs[i].nspace[0] && NULL != self) {
            wb_array(w, 2);
            wb_cstr(w, self);
            wb_uint(w, procs[i].rank);
        } else {
            wb_proc(w, &procs[i]);
        }
    }
}

/* wire_type is the wire type of a C value, 0 undef, -1 for none. */
static int wire_type(const pmix_value_t *v)
{
    switch (v->type) {
    case PMIX_UNDEF: return 0;
    case PMIX_BOOL: return 1;
    case PMIX_STRING: return 3;
    case PMIX_BYTE: case PMIX_UINT8: return 12;
    case PMIX_INT8: return 7;
    case PMIX_INT16: return 8;
    case PMIX_INT: case PMIX_INT32: case PMIX_PID: return 9;
    case PMIX_INT64: return 10;
    case PMIX_UINT16: return 13;
    case PMIX_UINT: case PMIX_UINT32: return 14;
    case PMIX_SIZE: case PMIX_UINT64: return 15;
    case PMIX_FLOAT: case PMIX_DOUBLE: return 17;
    case PMIX_TIME: case PMIX_TIMEVAL: return 19;
    case PMIX_STATUS: return 20;
    case PMIX_PROC_RANK: return 40;
    case PMIX_PERSIST: return 30;
    case PMIX_DATA_RANGE: return 33;
    case PMIX_PROC: return NULL == v->data.proc ? -1 : 22;
    case PMIX_BYTE_OBJECT: case PMIX_COMPRESSED_STRING: return 27;
    case PMIX_DATA_ARRAY:
        if (NULL == v->data.darray) {
            return -1;
        }
        if (PMIX_PROC == v->data.darray->type) {
            return 39;
        }
        if (PMIX_INFO == v->data.darray->type) {
            return 24;
        }
        if (elem_wire(v->data.darray->type) < 0) {
            return -1;
        }
        if (PMIX_VALUE == v->data.darray->type) {
            const pmix_value_t *e = v->data.darray->array;
            size_t k;
            for (k = 0; NULL != e && k < v->data.darray->size; k++) {
                if (wire_type(&e[k]) < 0) {
                    return -1;
                }
            }
        }
        return WIRE_ARRAY;
    }
    return -1;
}

/* wb_array_value writes WIRE_ARRAY's payload: the element type, then
 * each element as a value of that type (wire_type checked they can). */
static void wb_array_value(struct wbuf *w, const pmix_data_array_t *da)
{
    size_t n = NULL == da->array ? 0 : da->size, es = elemsize(da->type), k;
    wb_array(w, 2);
    wb_uint(w, da->type);
    wb_patch32(w, wb_array32(w), (uint32_t)n);
    for (k = 0; k < n; k++) {
        const char *slot = (const char *)da->array + k * es;
        pmix_value_t e;
        if (PMIX_VALUE == da->type) {
            (void)wb_value(w, (const pmix_value_t *)slot);
            continue;
        }
        memset(&e, 0, sizeof(e));
        e.type = da->type;
        memcpy(&e.data, slot, es);
        (void)wb_value(w, &e);
    }
}

int wb_value(struct wbuf *w, const pmix_value_t *v)
{
    int t = wire_type(v);
    if (t < 0) {
        return -1;
    }
    wb_array(w, 2);
    wb_uint(w, (uint64_t)t);
    switch (v->type) {
    case PMIX_UNDEF: wb_nil(w); break;
    case PMIX_BOOL: wb_bool(w, v->data.flag); break;
    case PMIX_STRING: wb_cstr(w, v->data.string); break;
    case PMIX_BYTE: case PMIX_UINT8: wb_uint(w, v->data.uint8); break;
    case PMIX_INT8: wb_int(w, v->data.int8); break;
    case PMIX_INT16: wb_int(w, v->data.int16); break;
    case PMIX_INT: case PMIX_INT32: case PMIX_PID: wb_int(w, v->data.int32); break;
    case PMIX_INT64: wb_int(w, v->data.int64); break;
    case PMIX_UINT16: wb_uint(w, v->data.uint16); break;
    case PMIX_UINT: case PMIX_UINT32: wb_uint(w, v->data.uint32); break;
    case PMIX_SIZE: case PMIX_UINT64: wb_uint(w, v->data.uint64); break;
    case PMIX_FLOAT: WB_PUT(w, 9, mp_encode_double(at_, (double)v->data.fval)); break;
    case PMIX_DOUBLE: WB_PUT(w, 9, mp_encode_double(at_, v->data.dval)); break;
    case PMIX_TIME:
        wb_array(w, 2);
        wb_int(w, (int64_t)v->data.time);
        wb_uint(w, 0);
        break;
    case PMIX_TIMEVAL:
        wb_array(w, 2);
        wb_int(w, (int64_t)v->data.tv.tv_sec + (int64_t)v->data.tv.tv_usec / 1000000);
        wb_uint(w, (uint64_t)(((int64_t)v->data.tv.tv_usec % 1000000 + 1000000) % 1000000) * 1000);
        break;
    case PMIX_STATUS: wb_int(w, v->data.status); break;
    case PMIX_PROC_RANK: wb_uint(w, v->data.rank); break;
    case PMIX_PERSIST: wb_uint(w, v->data.persist); break;
    case PMIX_DATA_RANGE: wb_uint(w, v->data.range); break;
    case PMIX_PROC: wb_proc(w, v->data.proc); break;
    case PMIX_BYTE_OBJECT: case PMIX_COMPRESSED_STRING:
        wb_bin(w, v->data.bo.bytes, NULL == v->data.bo.bytes ? 0 : v->data.bo.size);
        break;
    case PMIX_DATA_ARRAY:
        if (WIRE_ARRAY == t) {
            wb_array_value(w, v->data.darray);
        } else if (39 == t) {
            wb_procs(w, v->data.darray->array, NULL == v->data.darray->array ? 0 : v->data.darray->size, NULL);
        } else {
            wb_infos(w, v->data.darray->array, NULL == v->data.darray->array ? 0 : v->data.darray->size);
        }
        break;
    }
    return 0;
}

void wb_infos(struct wbuf *w, const pmix_info_t *info, size_t n)
{
    size_t at = wb_array32(w), i;
    uint32_t cnt = 0;
    for (i = 0; NULL != info && i < n; i++) {
        size_t mark = w->len;
        wb_array(w, 3);
        wb_str(w, info[i].key, strnlen(info[i].key, PMIX_MAX_KEYLEN));
        wb_uint(w, info[i].flags & PMIX_INFO_REQD);
        if (wb_value(w, &info[i].value) < 0) {
            if (!w->oom) {
                w->len = mark; /* a type that cannot leave the process */
            }
            continue;
        }
        cnt++;
    }
    wb_patch32(w, at, cnt);
}
