/* kvs.c: the key-value exchange. Every rank puts values of several types
 * (one with PMIX_LOCAL scope), commits, fences (with PMIX_COLLECT_DATA
 * when run as "collect", without it as "direct": then each Get fetches
 * from the peer's agent), and reads every peer's values with PMIx_Get
 * and PMIx_Get_nb, checking types and contents and freeing each value as
 * OpenPMIx's macros do. It also checks an unknown key (with PMIX_IMMEDIATE:
 * a peer's key not committed is otherwise waited for), PMIx_Store_internal,
 * and calls with bad arguments, and ends with PMIx_Fence_nb. It prints
 * "name value" lines and exits 0, or prints "FAIL ..." and exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pmix.h>

#include "check.h"
#include "waitcb.h"

static pmix_proc_t me;

static void put(pmix_scope_t scope, const char *key, void *data, pmix_data_type_t type)
{
    pmix_value_t v;
    pmix_status_t rc;
    PMIX_VALUE_LOAD(&v, data, type);
    rc = PMIx_Put(scope, key, &v);
    CHECK(PMIX_SUCCESS == rc, "put %s: %s", key, PMIx_Error_string(rc));
    PMIX_VALUE_DESTRUCT(&v);
}

static void put_all(void)
{
    char str[64];
    uint16_t u16 = 100 + me.rank;
    uint32_t u32 = 1000 + me.rank;
    double dbl = 0.5 + me.rank;
    int code = -(int)me.rank;
    pmix_byte_object_t bo = {.bytes = str, .size = 3};

    snprintf(str, sizeof(str), "rank-%u", me.rank);
    put(PMIX_GLOBAL, "kvs.str", str, PMIX_STRING);
    put(PMIX_GLOBAL, "kvs.u16", &u16, PMIX_UINT16);
    put(PMIX_REMOTE, "kvs.u32", &u32, PMIX_UINT32);
    put(PMIX_GLOBAL, "kvs.rank", &me.rank, PMIX_PROC_RANK);
    put(PMIX_GLOBAL, "kvs.proc", &me, PMIX_PROC);
    put(PMIX_GLOBAL, "kvs.dbl", &dbl, PMIX_DOUBLE);
    put(PMIX_GLOBAL, "kvs.bytes", &bo, PMIX_BYTE_OBJECT);
    put(PMIX_GLOBAL, PMIX_EXIT_CODE, &code, PMIX_INT);
    put(PMIX_LOCAL, "kvs.local", &u32, PMIX_UINT32);
    put(PMIX_INTERNAL, "kvs.internal", &u32, PMIX_UINT32);
}

/* check checks one value of peer against what put_all put there. */
static void check(const pmix_proc_t *peer, const char *key, const pmix_value_t *v)
{
    char str[64];
    snprintf(str, sizeof(str), "rank-%u", peer->rank);
    if (0 == strcmp(key, "kvs.str")) {
        CHECK(PMIX_STRING == v->type && 0 == strcmp(str, v->data.string), "%s of %u", key, peer->rank);
    } else if (0 == strcmp(key, "kvs.u16")) {
        CHECK(PMIX_UINT16 == v->type && 100 + peer->rank == v->data.uint16, "%s of %u", key, peer->rank);
    } else if (0 == strcmp(key, "kvs.u32") || 0 == strcmp(key, "kvs.local")) {
        CHECK(PMIX_UINT32 == v->type && 1000 + peer->rank == v->data.uint32, "%s of %u", key, peer->rank);
    } else if (0 == strcmp(key, "kvs.rank")) {
        CHECK(PMIX_PROC_RANK == v->type && peer->rank == v->data.rank, "%s of %u", key, peer->rank);
    } else if (0 == strcmp(key, "kvs.proc")) {
        CHECK(PMIX_PROC == v->type && PMIX_CHECK_PROCID(v->data.proc, peer), "%s of %u", key, peer->rank);
    } else if (0 == strcmp(key, "kvs.dbl")) {
        CHECK(PMIX_DOUBLE == v->type && 0.5 + peer->rank == v->data.dval, "%s of %u", key, peer->rank);
    } else if (0 == strcmp(key, "kvs.bytes")) {
        CHECK(PMIX_BYTE_OBJECT == v->type && 3 == v->data.bo.size && 0 == memcmp(str, v->data.bo.bytes, 3),
              "%s of %u", key, peer->rank);
    } else if (0 == strcmp(key, PMIX_EXIT_CODE)) {
        CHECK(PMIX_INT == v->type && -(int)peer->rank == v->data.integer, "%s of %u: type %s", key,
              peer->rank, PMIx_Data_type_string(v->type));
    } else {
        CHECK(0, "unexpected key %s", key);
    }
}

static const char *keys[] = {"kvs.str", "kvs.u16", "kvs.rank", "kvs.proc", "kvs.dbl", "kvs.bytes", PMIX_EXIT_CODE, NULL};

/* immediate: PMIX_IMMEDIATE, for the keys a peer never commits, which a
 * get would otherwise wait for (direct modex). */
static pmix_info_t immediate;

static pmix_status_t get_with(const pmix_proc_t *p, const char *key, int want, const pmix_info_t *info, size_t ninfo)
{
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(p, key, info, ninfo, &v);
    if (PMIX_SUCCESS == rc) {
        check(p, key, v);
        PMIX_VALUE_RELEASE(v);
    }
    CHECK(want == rc, "get %s of %u: %s, want %s", key, p->rank, PMIx_Error_string(rc), PMIx_Error_string(want));
    return rc;
}

static pmix_status_t get(const pmix_proc_t *p, const char *key, int want)
{
    return get_with(p, key, want, NULL, 0);
}

struct getnb {
    const pmix_proc_t *peer;
    const char *key;
    pmix_status_t want;
};

static void valuecb(pmix_status_t status, pmix_value_t *kv, void *cbdata)
{
    struct getnb *g = cbdata;
    CHECK(g->want == status && (PMIX_SUCCESS == status) == (NULL != kv), "get_nb %s: %s", g->key,
          PMIx_Error_string(status));
    if (NULL != kv) {
        check(g->peer, g->key, kv); /* the library's: not freed here */
    }
    signal_done(status);
}

static void bad_arguments(const pmix_proc_t *peer)
{
    char *longkey = malloc(PMIX_MAX_KEYLEN + 2);
    pmix_value_t *v = NULL, val;
    uint32_t u = 1;

    memset(longkey, 'k', PMIX_MAX_KEYLEN + 1);
    longkey[PMIX_MAX_KEYLEN + 1] = '\0';
    PMIX_VALUE_LOAD(&val, &u, PMIX_UINT32);
    printf("bad get-null-key %d\n", PMIx_Get(peer, NULL, NULL, 0, &v));
    printf("bad get-long-key %d\n", PMIx_Get(peer, longkey, NULL, 0, &v));
    printf("bad get-null-val %d\n", PMIx_Get(peer, "kvs.str", NULL, 0, NULL));
    printf("bad get_nb-null-cb %d\n", PMIx_Get_nb(peer, "kvs.str", NULL, 0, NULL, NULL));
    printf("bad put-null-key %d\n", PMIx_Put(PMIX_GLOBAL, NULL, &val));
    printf("bad put-long-key %d\n", PMIx_Put(PMIX_GLOBAL, longkey, &val));
    printf("bad put-null-val %d\n", PMIx_Put(PMIX_GLOBAL, "kvs.x", NULL));
    printf("bad put-scope %d\n", PMIx_Put(PMIX_SCOPE_UNDEF, "kvs.x", &val));
    printf("bad store-null-proc %d\n", PMIx_Store_internal(NULL, "kvs.x", &val));
    printf("bad fence-null-procs %d\n", PMIx_Fence(NULL, 2, NULL, 0));
    printf("bad fence_nb-null-procs %d\n", PMIx_Fence_nb(NULL, 2, NULL, 0, opcb, NULL));
    printf("bad connect-null-procs %d\n", PMIx_Connect(NULL, 2, NULL, 0));
    printf("bad disconnect-null-procs %d\n", PMIx_Disconnect(NULL, 1, NULL, 0));
    PMIX_VALUE_DESTRUCT(&val);
    free(longkey);
}

int main(int argc, char **argv)
{
    pmix_status_t rc;
    pmix_value_t *v = NULL, stored;
    pmix_proc_t wildcard, peer;
    pmix_info_t *info = NULL;
    size_t ninfo = 0, i;
    uint32_t size, r;
    bool collect;
    struct getnb g;

    if (argc != 2) {
        fprintf(stderr, "usage: kvs collect|direct\n");
        return 2;
    }
    collect = 0 == strcmp(argv[1], "collect");
    PMIX_INFO_LOAD(&immediate, PMIX_IMMEDIATE, NULL, PMIX_BOOL);
    rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    PMIX_LOAD_PROCID(&wildcard, me.nspace, PMIX_RANK_WILDCARD);
    rc = PMIx_Get(&wildcard, PMIX_JOB_SIZE, NULL, 0, &v);
    if (PMIX_SUCCESS != rc || PMIX_UINT32 != v->type) {
        printf("FAIL job size: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    size = v->data.uint32;
    PMIX_VALUE_RELEASE(v);
    printf("size %u\n", size);
    fflush(stdout); /* the test waits for it before starting the next rank */

    put_all();
    rc = PMIx_Commit();
    CHECK(PMIX_SUCCESS == rc, "commit: %s", PMIx_Error_string(rc));
    /* this process's own values, at once, the internal one too */
    for (i = 0; NULL != keys[i]; i++) {
        get(&me, keys[i], PMIX_SUCCESS);
    }
    rc = PMIx_Get(&me, "kvs.internal", NULL, 0, &v);
    CHECK(PMIX_SUCCESS == rc && PMIX_UINT32 == v->type, "own internal value: %s", PMIx_Error_string(rc));
    if (PMIX_SUCCESS == rc) {
        PMIX_VALUE_RELEASE(v);
    }

    if (collect) {
        PMIX_INFO_CREATE(info, 1);
        ninfo = 1;
        PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, NULL, PMIX_BOOL);
    }
    rc = PMIx_Fence(NULL, 0, info, ninfo);
    PMIX_INFO_FREE(info, ninfo);
    printf("fence %d\n", rc);

    for (r = 0; r < size; r++) {
        if (r == me.rank) {
            continue;
        }
        PMIX_LOAD_PROCID(&peer, me.nspace, r);
        for (i = 0; NULL != keys[i]; i++) {
            get(&peer, keys[i], PMIX_SUCCESS);
        }
        /* the launch places ranks 0 and 1 on one node, 2 on another */
        get(&peer, "kvs.local", (me.rank < 2) == (r < 2) ? PMIX_SUCCESS : PMIX_ERR_NOT_FOUND);
        get(&peer, "kvs.u32", (me.rank < 2) == (r < 2) ? PMIX_ERR_NOT_FOUND : PMIX_SUCCESS);
        get_with(&peer, "kvs.internal", PMIX_ERR_NOT_FOUND, &immediate, 1);
        get_with(&peer, "kvs.unknown", PMIX_ERR_NOT_FOUND, &immediate, 1);

        g.peer = &peer;
        g.key = "kvs.str";
        g.want = PMIX_SUCCESS;
        rc = completed(PMIx_Get_nb(&peer, g.key, NULL, 0, valuecb, &g));
        CHECK(PMIX_SUCCESS == rc, "get_nb: %s", PMIx_Error_string(rc));
        printf("peer %u ok\n", r);
    }

    /* a value stored for a peer in this process only */
    PMIX_LOAD_PROCID(&peer, me.nspace, (me.rank + 1) % size);
    PMIX_VALUE_LOAD(&stored, "kept here", PMIX_STRING);
    rc = PMIx_Store_internal(&peer, "kvs.stored", &stored);
    PMIX_VALUE_DESTRUCT(&stored);
    CHECK(PMIX_SUCCESS == rc, "store_internal: %s", PMIx_Error_string(rc));
    rc = PMIx_Get(&peer, "kvs.stored", NULL, 0, &v);
    CHECK(PMIX_SUCCESS == rc && PMIX_STRING == v->type && 0 == strcmp("kept here", v->data.string),
          "get of a stored value: %s", PMIx_Error_string(rc));
    if (PMIX_SUCCESS == rc) {
        PMIX_VALUE_RELEASE(v);
    }
    g.peer = &peer;
    g.key = "kvs.unknown";
    g.want = PMIX_ERR_NOT_FOUND;
    printf("get_nb-unknown %d\n", completed(PMIx_Get_nb(&peer, g.key, &immediate, 1, valuecb, &g)));

    bad_arguments(&peer);

    printf("fence_nb %d\n", completed(PMIx_Fence_nb(NULL, 0, NULL, 0, opcb, NULL)));
    rc = PMIx_Finalize(NULL, 0);
    printf("finalize %d\n", rc);
    return failed;
}
